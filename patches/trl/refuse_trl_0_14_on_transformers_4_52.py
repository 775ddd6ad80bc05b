"""Refuse trl 0.14 on transformers >= 4.52, which trains on the log-probs of the wrong tokens without a word.

Symptom:   none: training runs, but trl 0.14 asks the model for num_logits_to_keep positions, transformers
           4.52 removed that alias of logits_to_keep (the keyword is swallowed by **kwargs), full-length
           logits come back and trl gathers the completion's log-probs at the first (prompt) positions.
           Policy, ratio and KL terms are computed on the wrong tokens (grad_norm 1.264 against 1.054 on
           4.51.3, same seed).
Upstream:  huggingface/transformers#37149 (census row 17, the silent form); trl 0.15 slices the logits itself.
Versions:  trl 0.14.x with transformers >= 4.52 (pip allows it: trl 0.14 declares transformers>=4.46.0).
           Reproduced on CPU with 4.52.0, 4.52.4 and 4.53.3; 4.46.3 and 4.51.3 are correct (matrix cell
           trl-0.14-tf4.52, reproducer num-logits-to-keep-ignored). A shim would have to rewrite trl 0.14's
           nested log-prob function; pinning either package is the fix.
Remove when: trl 0.14 is no longer supported.
"""

from __future__ import annotations

from typing import Any

from grpo_compat.core.registry import patch
from grpo_compat.fixes.detectors import trl_grpo_trainer_init_present


@patch(
    id="trl.refuse-trl-0.14-on-transformers-4.52",
    catalogue="trl-0.14-logits-to-keep-ignored",
    requires=("trl>=0.14,<0.15", "transformers>=4.52"),
    targets="trl.trainer.grpo_trainer:GRPOTrainer.__init__",
    detect=trl_grpo_trainer_init_present,
)
def refuse_ignored_num_logits_to_keep(wrapped: Any, trainer: Any, *args: Any, **kwargs: Any) -> Any:
    from grpo_compat.fixes.combinations import installed, refuse

    refuse(
        "trl-0.14-logits-to-keep-ignored",
        f"{installed('trl', 'transformers')} trains on the wrong tokens without an error: trl 0.14 passes "
        "num_logits_to_keep, which transformers >= 4.52 ignores, so the completion's log-probs are taken at "
        "prompt positions.",
        ['pip install "transformers<4.52"', 'pip install "trl>=0.15"'],
    )
