"""Holds only the file ms-swift imports through ``--external_plugins``; see grpo_compat/swift_plugin.py."""
