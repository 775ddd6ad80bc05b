"""Patches for Unsloth (unsloth-zoo: the GRPO loss code Unsloth generates its trainer from)."""
