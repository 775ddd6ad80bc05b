"""The ``grpo-compat`` command and what it runs: doctor (this install) and the pre-flight settings check."""
