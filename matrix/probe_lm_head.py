"""Probe TRL's Liger GRPO loss with a model whose backbone returns logits (KF-3); writes a JSON result.

    python -m matrix.probe_lm_head --mode plain --output plain.json
    python -m matrix.probe_lm_head --mode patched --output patched.json

Needs trl 0.17-1.13 with liger-kernel (the trl-0.23-liger cell). Builds a real GRPOTrainer with the
Liger loss on (beta 0), makes one real batch with its own _generate_and_score_completions, then calls
its compute_loss:
1. on the model itself (hidden states reach Liger): patched, the loss must be bit-identical to
   upstream's (grpo_compat reverted for that call) and the hidden states Liger gets must be upstream's
   tensor itself, not a copy;
2. on the same model seen through a backbone that outputs logits (grpo_compat.testing.lm_head):
   upstream fails in Liger's matmul ("a and b must have same reduction dim"); patched, the loss must
   equal TRL's non-Liger loss bit for bit (and the Liger loss of step 1 within float tolerance);
3. on a backbone output of another width: patched, LMHeadShapeError naming both shapes.
Exits non-zero on error, after writing the JSON.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys

from grpo_compat.testing.smoke import (
    LIGER_MODEL_KERNELS_OFF,
    ProbeFailed,
    length_reward,
    parse_args,
    run_smoke,
    start_probe,
)

BATCH, NARROW = 4, 40


def liger_settings(config_cls: type) -> dict:
    fields = {f.name for f in dataclasses.fields(config_cls)}
    if "use_liger_loss" in fields:  # trl 0.17-0.24; use_liger_kernel there would patch the model's kernels
        return {"use_liger_loss": True}
    return {"use_liger_kernel": True, "liger_kernel_config": LIGER_MODEL_KERNELS_OFF}


def probe(args: argparse.Namespace, output_dir: str, result: dict) -> None:
    model_dir = start_probe(args, result)
    import torch
    from trl import GRPOConfig, GRPOTrainer

    from grpo_compat.testing.lm_head import BackboneOutputsLogits
    from matrix.smoke_grpo import config_kwargs, prompts

    # bnpo: a loss type every liger-kernel release has (trl 0.23's default "dapo" is newer than some).
    args.config_overrides = {"beta": 0.0, "loss_type": "bnpo", **liger_settings(GRPOConfig), **args.config_overrides}
    kwargs, _ = config_kwargs(GRPOConfig, output_dir, args)
    trainer = GRPOTrainer(
        model=str(model_dir), reward_funcs=length_reward, args=GRPOConfig(**kwargs), train_dataset=prompts()
    )
    trainer.current_gradient_accumulation_steps = 1  # set by the training loop, read by compute_liger_loss
    model = trainer.model
    torch.manual_seed(args.seed)
    inputs = trainer._generate_and_score_completions([{"prompt": p} for p in prompts()["prompt"][:BATCH]])
    head = list(model.lm_head.weight.shape)

    liger = trainer.compute_loss(model, inputs)
    checked = f"hidden (B, K, {head[1]}): Liger loss {liger.item():.6f}"
    if args.mode == "patched":
        import grpo_compat

        grpo_compat.revert()
        upstream = trainer.compute_loss(model, inputs)
        grpo_compat.apply()
        if not torch.equal(liger, upstream):
            raise ProbeFailed(
                f"hidden states: patched Liger loss {liger.item()} differs from upstream's {upstream.item()}"
            )
        checked += " bit-identical to upstream's"
        seen: list = []  # what the backbone returned: Liger must get a view of that very tensor
        hook = model.model.register_forward_hook(lambda module, inp, out: seen.append(out.last_hidden_state))
        got = trainer._get_last_hidden_state(model, *_ids_and_mask(torch, inputs))
        hook.remove()
        if got.untyped_storage().data_ptr() != seen[0].untyped_storage().data_ptr():
            raise ProbeFailed("hidden states: the guard handed Liger a copy, not the backbone's own tensor")
        checked += ", no copy"

    logits_loss = trainer.compute_loss(BackboneOutputsLogits(model), inputs)  # upstream: Liger's matmul error
    non_liger = trainer._compute_loss(model, inputs)
    if not torch.equal(logits_loss, non_liger):
        raise ProbeFailed(f"logits: loss {logits_loss.item()} is not TRL's non-Liger loss {non_liger.item()}")
    if not torch.allclose(logits_loss, liger, rtol=1e-4, atol=1e-6):
        raise ProbeFailed(f"logits: loss {logits_loss.item()} far from the Liger loss on hidden states {liger.item()}")
    checked += f"; logits (B, K, {head[0]}): non-Liger loss {logits_loss.item():.6f}, equal bit for bit"

    from grpo_compat.core.errors import LMHeadShapeError

    try:
        trainer.compute_loss(BackboneOutputsLogits(model, width=NARROW), inputs)
    except LMHeadShapeError as error:
        if str(head) not in str(error) or f", {NARROW}]" not in str(error):
            raise ProbeFailed(f"width {NARROW}: the error does not name both shapes: {error}") from error
    else:
        raise ProbeFailed(f"width {NARROW}: no LMHeadShapeError")
    result["summary"] = f"{checked}; width {NARROW}: LMHeadShapeError naming {head} and the input shape"


def _ids_and_mask(torch, inputs: dict) -> tuple:
    ids = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], dim=1)
    mask = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], dim=1)
    return ids, mask, inputs["completion_ids"].size(1)


def main(argv: list[str] | None = None) -> int:
    return run_smoke("probe_lm_head", parse_args(__doc__.splitlines()[0], "GRPOConfig field (JSON value)", argv), probe)


if __name__ == "__main__":
    sys.exit(main())
