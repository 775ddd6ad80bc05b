"""The engine: the patch registry, wrapping and its revert, post-import hooks, versions, the report, logging.

Nothing here knows about GRPO; patches under ``grpo_compat.patches`` declare what to wrap, and this
package decides where and when.
"""
