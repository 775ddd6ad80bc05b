"""Test helpers for grpo_compat (offline tiny models)."""
