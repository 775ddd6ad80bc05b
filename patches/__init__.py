"""The patches, one module per fix, grouped by upstream library. Ships as ``grpo_compat.patches``."""
