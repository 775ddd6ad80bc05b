"""Patches for Hugging Face transformers (its models and Trainer, as GRPO reaches them)."""
