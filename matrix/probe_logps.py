"""Probe TRL's per-token log-prob method with logits_to_keep = L (KF-1) on the tiny model; writes a JSON result.

    python -m matrix.probe_logps --mode plain --output plain.json
    python -m matrix.probe_logps --mode patched --model-ignores-logits-to-keep --output patched.json

Builds a real GRPOTrainer (beta 0, nothing trained) and calls its own log-prob method on fixed ids:
1. an aligned K = L - 3; with --model-ignores-logits-to-keep the policy then returns all L logits and
   must still give the log-probs of the model honouring logits_to_keep (TRL #3681, trl 0.19.x);
2. K = L: K columns, the first (no logit predicts it) holding alignment.UNPREDICTABLE_LOGP, the other
   L - 1 equal to the K = L - 1 result.
Upstream raises the gather error (trl 0.15-1.13) or returns L - 1 columns (trl >= 1.15); either is the
probe's error. Exits non-zero on error, after writing the JSON.
"""

from __future__ import annotations

import argparse
import sys

from grpo_compat.testing.smoke import (
    ProbeFailed,
    ignore_logits_to_keep,
    length_reward,
    parse_args,
    run_smoke,
    start_probe,
)

BATCH, LENGTH = 2, 12


def probe(args: argparse.Namespace, output_dir: str, result: dict) -> None:
    model_dir = start_probe(args, result)
    import torch
    from trl import GRPOConfig, GRPOTrainer

    from grpo_compat.fixes.alignment import UNPREDICTABLE_LOGP
    from grpo_compat.testing.logps import log_prob_method_name, log_probs
    from matrix.smoke_grpo import config_kwargs, prompts

    args.config_overrides = {"beta": 0.0, **args.config_overrides}  # no reference model: it is not probed
    kwargs, _ = config_kwargs(GRPOConfig, output_dir, args)
    config = GRPOConfig(**kwargs)
    trainer = GRPOTrainer(model=str(model_dir), reward_funcs=length_reward, args=config, train_dataset=prompts())
    model = trainer.model.eval()
    name = result["method"] = log_prob_method_name()
    method = getattr(trainer, name)
    ids = torch.randint(0, model.config.vocab_size, (BATCH, LENGTH), generator=torch.Generator().manual_seed(0))
    ids = ids.to(model.device)
    mask = torch.ones_like(ids)

    def logps(keep: int) -> torch.Tensor:
        with torch.no_grad():
            return log_probs(method(model, ids, mask, keep))

    aligned = LENGTH - 3
    honoured, predictable = logps(aligned), logps(LENGTH - 1)
    checked = f"aligned K={aligned} {tuple(honoured.shape)}"
    if args.model_ignores_logits_to_keep:
        ignore_logits_to_keep(model)
        if not torch.equal(logps(aligned), honoured):
            raise ProbeFailed(f"logits_to_keep={aligned}: a model ignoring logits_to_keep gets shifted log-probs")
        checked += " equal for a model ignoring logits_to_keep"
    full = logps(LENGTH)
    result["shape_at_full_length"] = list(full.shape)
    if tuple(full.shape) != (BATCH, LENGTH):
        raise ProbeFailed(f"{name} returned {tuple(full.shape)} for logits_to_keep={LENGTH} (L={LENGTH})")
    if not torch.equal(full[:, 1:], predictable):
        raise ProbeFailed(f"logits_to_keep={LENGTH}: columns 1.. differ from the K={LENGTH - 1} result")
    if not bool((full[:, 0] == UNPREDICTABLE_LOGP).all()):
        raise ProbeFailed(f"logits_to_keep={LENGTH}: column 0 is {full[:, 0].tolist()}, not {UNPREDICTABLE_LOGP}")
    result["summary"] = (
        f"{name}: K=L={LENGTH} gives {tuple(full.shape)}, column 0 = {UNPREDICTABLE_LOGP} (no logit predicts it), "
        f"columns 1.. equal to K={LENGTH - 1}; {checked}"
    )


def main(argv: list[str] | None = None) -> int:
    return run_smoke("probe_logps", parse_args(__doc__.splitlines()[0], "GRPOConfig field (JSON value)", argv), probe)


if __name__ == "__main__":
    sys.exit(main())
