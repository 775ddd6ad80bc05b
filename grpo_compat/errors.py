"""Exceptions raised by grpo_compat.

Every error a user can see is one of these, so callers can catch them precisely.
"""

from __future__ import annotations


class GRPOCompatError(Exception):
    """Base class of every grpo_compat error."""


class UnknownPatchError(GRPOCompatError, ValueError):
    """A patch id given to ``apply(only=..., skip=...)`` or ``GRPO_COMPAT_DISABLE`` does not exist."""


class PatchFailedError(GRPOCompatError, RuntimeError):
    """A patch could not be applied and ``strict=True`` was asked for."""


class GRPOSettingsError(GRPOCompatError, ValueError):
    """GRPO settings that cannot train.

    A ``ValueError`` subclass, so code that catches upstream's own ``ValueError`` keeps working.
    """


class LaunchError(GRPOCompatError, RuntimeError):
    """The way the training script was started cannot train correctly, e.g. one process seeing several GPUs."""
