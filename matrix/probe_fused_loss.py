"""Probe whether the loss trl's fused (Liger) GRPO path trains on is trl's own objective; writes a JSON result.

    python -m matrix.probe_fused_loss --mode plain --set loss_type=dapo --set gradient_accumulation_steps=2 \\
        --output r.json

Trains a real GRPOTrainer (patched: under grpo_compat.apply()) with the Liger GRPO loss (use_liger_loss on trl
0.17-0.24, use_liger_kernel with liger's Triton model kernels off from 0.25: the fused loss runs on CPU) for
--steps steps, recording only the first training micro-batch's inputs and the loss trl trained on (a passive
wrapper: the same in both modes). After training, trl's own loss (_compute_loss) of that batch is computed on the
model as it was then (a copy taken before training; the fused loss must replay on it) and compared with the trained
one: the probe's oracle, independent
of grpo_compat. A difference is the probe's error in plain mode; patched, grpo_compat's trl.fused-loss-check must
have named it with the same two values (and must have stayed silent where they agree). Exits non-zero on error,
after writing the JSON.
"""

from __future__ import annotations

import argparse
import copy
import sys

from grpo_compat.testing.smoke import (
    LIGER_MODEL_KERNELS_OFF,
    ProbeFailed,
    digest,
    parse_args,
    run_smoke,
    snapshot,
    start_probe,
)

RELATIVE, ABSOLUTE = 1e-4, 1e-6  # float32 on CPU: Liger's chunks and trl's loss agree to about 1e-7


def probe(args: argparse.Namespace, output_dir: str, result: dict) -> None:
    model_dir = start_probe(args, result)
    import torch
    from trl import GRPOConfig, GRPOTrainer

    from grpo_compat.core.versions import installed_version, release
    from grpo_compat.testing.smoke import reward_function
    from matrix.smoke_grpo import config_kwargs, prompts

    old_flag = release(installed_version("trl") or "0") < (0, 25)  # trl 0.17-0.24 take the loss as use_liger_loss
    liger = {"use_liger_loss": True} if old_flag else {"use_liger_kernel": True}
    args.config_overrides = {**liger, **args.config_overrides}
    kwargs, result["config_fields_dropped"] = config_kwargs(GRPOConfig, output_dir, args)
    extra = {} if old_flag else {"liger_kernel_config": LIGER_MODEL_KERNELS_OFF}
    config = GRPOConfig(**kwargs, **extra)
    rewards = reward_function(args)
    adapter = {"peft_config": prompt_tuning_config()} if args.prompt_tuning else {}
    # trl builds the adapter before transformers' Trainer seeds the run, and torch 2.13 starts each process with
    # another random state: a prompt adapter's random start would differ between the plain and the patched run.
    torch.manual_seed(args.seed)
    trainer = GRPOTrainer(
        model=str(model_dir), reward_funcs=rewards, args=config, train_dataset=prompts(args), **adapter
    )
    first_policy = copy.deepcopy(trainer.model)  # the policy of the first step (a prompt adapter starts random)
    first: dict = {}
    trained_loss = trainer.compute_loss  # grpo_compat's wrapper, when patched: recorded around, never changed

    def recording(model, inputs, *more, **options):
        loss = trained_loss(model, inputs, *more, **options)
        if not first and trainer.model.training:
            first.update(inputs=inputs, loss=loss.item(), accumulation=trainer.current_gradient_accumulation_steps)
        return loss

    trainer.compute_loss = recording
    trainer.train()
    result["weights"] = digest(snapshot(trainer.model))
    result["steps"] = trainer.state.global_step
    check = getattr(trainer, "_grpo_compat_fused_loss_check", None)
    result["grpo_compat_check"] = check
    # trl's own loss of the recorded batch on the policy of the first step.
    model = first_policy.train()
    trainer.current_gradient_accumulation_steps = first["accumulation"]
    with torch.no_grad():
        objective = trainer._compute_loss(model, first["inputs"]).item()
        replayed = trained_loss(model, first["inputs"]).item()  # the fused loss again: the copy is that policy
    result.update(trained_loss=first["loss"], objective_loss=objective, replayed_loss=replayed)
    batch = first["inputs"]
    result["first_batch"] = dict(
        completion_tokens=int(batch["completion_mask"].sum()),
        generation_batch_tokens=int(batch["num_items_in_batch"]) if "num_items_in_batch" in batch else None,
        gradient_accumulation_steps=first["accumulation"],
        steps_per_generation=getattr(config, "steps_per_generation", None),
    )
    if abs(replayed - first["loss"]) > ABSOLUTE + RELATIVE * abs(first["loss"]):
        raise ProbeFailed(f"the copied policy is not the first step's: fused loss {replayed}, then {first['loss']}")
    differs = abs(first["loss"] - objective) > ABSOLUTE + RELATIVE * max(abs(first["loss"]), abs(objective))
    what = f"trained on fused loss {first['loss']:.6f}, trl's own loss of the same batch {objective:.6f}"
    if args.mode == "plain":
        if differs:
            raise ProbeFailed(f"the fused GRPO loss is not the objective: {what}")
        result["summary"] = f"the fused GRPO loss is the objective: {what}"
        return
    if check is None:
        raise ProbeFailed(f"grpo_compat did not compare the fused loss with the objective ({what})")
    named = (check["fused"], check["reference"])
    if differs and check["agrees"]:
        raise ProbeFailed(f"grpo_compat found the fused loss agreeing ({named}), but {what}")
    if not differs and not check["agrees"]:
        raise ProbeFailed(f"grpo_compat warned on a run whose fused loss is the objective ({what}): {check}")
    measured = (first["loss"], objective)
    if differs and not all(abs(a - b) <= ABSOLUTE + RELATIVE * abs(b) for a, b in zip(named, measured, strict=True)):
        raise ProbeFailed(f"grpo_compat named other values ({named}) than the probe measured: {what}")
    verdict = "named the difference" if differs else "found them agreeing, silently"
    result["summary"] = f"grpo_compat {verdict}: {what}" + (f"; its warning: {check['message']}" if differs else "")


def prompt_tuning_config():
    from peft import PromptTuningConfig

    # Virtual tokens prepended by PeftModel.forward, which trl's fused path does not call (trl PR #6186, trl 1.8).
    return PromptTuningConfig(task_type="CAUSAL_LM", num_virtual_tokens=4)


def main(argv: list[str] | None = None) -> int:
    arguments = parse_args(__doc__.splitlines()[0], "GRPOConfig field (JSON value)", argv)
    return run_smoke("probe_fused_loss", arguments, probe)


if __name__ == "__main__":
    sys.exit(main())
