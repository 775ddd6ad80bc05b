"""Holds only the ``sitecustomize.py`` that `grpo-compat run` puts first on PYTHONPATH; see grpo_compat/tools/run.py."""
