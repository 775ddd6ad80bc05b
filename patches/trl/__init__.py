"""Patches for Hugging Face TRL."""
