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


class TrainingStalledError(GRPOCompatError, RuntimeError):
    """The learning watchdog, in ``stop`` mode, found a run that does not learn (see grpo_compat.fixes.watchdog)."""


class LMHeadShapeError(GRPOCompatError, RuntimeError):
    """A tensor about to be projected through the LM head is neither hidden states nor logits (KF-3).

    A ``RuntimeError`` subclass, like torch's own shape errors that it replaces.
    """


class UnsupportedCombinationError(GRPOCompatError, RuntimeError):
    """Installed versions (or settings on them) that crash or train wrongly, refused before the model loads."""


class RewardFunctionError(GRPOCompatError, TypeError):
    """A reward function the installed trl or ms-swift cannot call or score, found before it would fail or mislead.

    Found by calling it once before the model loads (trl) or before the first generation (ms-swift), or at the
    training step where it returns the wrong number of rewards. A ``TypeError`` subclass, like the errors upstream
    raises for the same mistakes after the model loaded.
    """


class SettingNotTakenError(GRPOCompatError, TypeError, ValueError):
    """A setting the installed trl or ms-swift does not take: removed or renamed in a named release, newer than the
    installed one, or a typo (the message names the valid setting closest to it).

    A ``TypeError`` (as ``unexpected keyword argument``) and a ``ValueError`` (as ms-swift's ``remaining_argv``), so
    code that catches upstream's own error keeps working.
    """


class ObjectiveMismatchError(GRPOCompatError, RuntimeError):
    """With ``GRPO_COMPAT_WATCHDOG=stop``: on the first batch, the loss a run trains on (a fused kernel's) is not the
    objective trl's own loss computes for the same inputs (see grpo_compat.fixes.fused_loss)."""
