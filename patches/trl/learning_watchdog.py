"""Install grpo_compat's learning watchdog on every GRPO training run (TRL, and ms-swift through it).

Symptom:   a GRPO run finishes without an error while the weights never change and KL stays
           exactly 0: zero advantages (every completion of a prompt rewarded alike), learning rate 0,
           an accumulation boundary never reached, frozen parameters, or bf16 weights without fp32
           master weights that round lr-1e-6 updates away. Or inf / NaN weights after an overflow, which the
           next generation turns into "probability tensor contains either inf, nan or element < 0"; or
           completions all cut at max_completion_length, so the reward judges truncated text. On a mixture
           of experts (trl >= 1.7), zero advantages while the router load-balancing loss alone moves the weights.
           Before any of it, a run that cannot change a weight is refused when train() is called: no trainable
           parameter (a PEFT adapter loaded with PeftModel.from_pretrained's default is_trainable=False: trl
           trains it silently and saves the adapter it loaded, byte for byte), or an optimizer holding none of
           the policy's trainable parameters; learning_rate=0 too in stop mode (warn mode warns and goes on: a run
           measuring rewards or gradients may mean it).
Upstream:  KF-5; modelscope/ms-swift #4348, #5571, #5890, #7229; huggingface/trl #4535, #6700, #3031.
Versions:  every trl >= 0.14 (and ms-swift 3.x / 4.x, whose GRPOTrainer.train reaches trl's through
           SwiftMixin.train -> super().train()). Settings: GRPO_COMPAT_WATCHDOG=warn|stop|off and the
           thresholds in grpo_compat/fixes/watchdog.py.
Remove when: never by version: the watchdog catches configurations, not an upstream bug.
"""

from __future__ import annotations

from typing import Any

from grpo_compat.core.registry import patch

# The callback's class name, so a second train() call (resume, or a notebook re-run) adds no second one.
WATCHDOG_CLASS = "LearningWatchdog"


@patch(
    id="trl.learning-watchdog",
    catalogue=("no-learning", "training-diverged", "completions-truncated", "moe-router-aux-loss-default"),
    requires="trl>=0.14",
    # Inherited from transformers' Trainer: wrapping it on trl's GRPOTrainer scopes the watchdog to
    # GRPO (trl's, its subclasses and ms-swift's), and swift deletes only __init__ and log from it.
    targets="trl.trainer.grpo_trainer:GRPOTrainer.train",
    expects=("self",),
)
def train_with_watchdog(wrapped: Any, trainer: Any, *args: Any, **kwargs: Any) -> Any:
    from grpo_compat.fixes.watchdog import WatchdogSettings

    settings = WatchdogSettings.from_env()
    cannot_train = None if settings.mode == "off" else refuse_when_no_weight_can_move(trainer, settings.mode)
    handler = getattr(trainer, "callback_handler", None)
    present = handler is not None and any(type(c).__name__ == WATCHDOG_CLASS for c in handler.callbacks)
    if settings.mode == "off" or handler is None or present:
        return wrapped(trainer, *args, **kwargs)

    from grpo_compat.fixes.watchdog_callback import build_callback

    watchdog = build_callback(settings, trainer)
    if cannot_train is not None:  # warned of already: the run's not-learning finding, said once
        from grpo_compat.fixes.watchdog import NOT_LEARNING

        watchdog.findings[NOT_LEARNING] = cannot_train
    trainer.add_callback(watchdog)
    try:
        return wrapped(trainer, *args, **kwargs)
    except Exception as error:
        watchdog.after_failure(error)  # trl's sampling error after inf / NaN weights gets its cause
        raise
    finally:
        trainer.remove_callback(watchdog)  # leaves the trainer as it found it


def refuse_when_no_weight_can_move(trainer: Any, mode: str) -> Any:
    """Before any compute: a run whose policy cannot change a weight is refused, naming why (trl #6700); one that may
    mean it (learning rate 0) only warned of in warn mode: the finding warned of, else None."""
    from grpo_compat.core.errors import GRPOSettingsError
    from grpo_compat.fixes.weights_move import STILL_RUN, STILL_TRAINS, why_no_weight_can_move

    found = why_no_weight_can_move(trainer)
    if found is None:
        return None
    if found.may_be_meant and mode == "warn":
        from grpo_compat.core.logs import log

        log("warning", "%s", f"{found.finding.message()} ({STILL_TRAINS})")
        return found.finding
    raise GRPOSettingsError(f"{found.finding.message()} ({STILL_RUN})")
