"""Patches for ModelScope ms-swift."""
