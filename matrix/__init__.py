"""The version matrix: cell definitions, their environments and the GRPO smoke runs."""
