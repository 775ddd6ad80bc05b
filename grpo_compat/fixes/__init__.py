"""The logic that patches call: GRPO settings rules, log-prob alignment, LM-head shapes, DeepSpeed
batch-size agreement, the learning watchdog, and the feature detection patches share.

Each module is plain functions over upstream objects; none wraps anything itself.
"""
