"""Probe which objective trl's experimental GMPOTrainer computes with use_liger_kernel; writes a JSON result.

    python -m matrix.probe_gmpo_liger --mode plain --output plain.json

Builds a real GMPOTrainer (patched: under grpo_compat.apply()) with use_liger_kernel=True (liger's model kernels
off through liger_kernel_config: they are Triton, GPU only; the fused GRPO loss runs on CPU), generates and scores
one batch, then computes the loss the trainer trains on (compute_loss) and GMPO's own objective (_compute_loss)
on that batch. They must be equal; trl 1.7-1.13 return the GRPO loss instead (trl#7270): the probe's error.
Exits non-zero on error, after writing the JSON.
"""

from __future__ import annotations

import argparse
import sys

from grpo_compat.testing.smoke import (
    LIGER_MODEL_KERNELS_OFF,
    ProbeFailed,
    length_reward,
    parse_args,
    run_smoke,
    start_probe,
)


def probe(args: argparse.Namespace, output_dir: str, result: dict) -> None:
    model_dir = start_probe(args, result)
    import torch
    from trl.experimental.gmpo import GMPOConfig, GMPOTrainer

    from matrix.smoke_grpo import config_kwargs, prompts

    # --set use_liger_kernel=false: the control, GMPO without Liger.
    args.config_overrides = {"beta": 0.0, "loss_type": "bnpo", "use_liger_kernel": True, **args.config_overrides}
    kwargs, _ = config_kwargs(GMPOConfig, output_dir, args)
    config = GMPOConfig(**kwargs, liger_kernel_config=LIGER_MODEL_KERNELS_OFF)
    dataset = prompts()
    trainer = GMPOTrainer(model=str(model_dir), reward_funcs=length_reward, args=config, train_dataset=dataset)
    trainer.current_gradient_accumulation_steps = 1  # set by transformers' training loop, which is not run
    torch.manual_seed(0)
    batch = trainer._generate_and_score_completions([{"prompt": row["prompt"]} for row in dataset.select(range(4))])
    with torch.no_grad():
        trained = trainer.compute_loss(trainer.model, batch).item()
        gmpo = trainer._compute_loss(trainer.model, batch).item()
    result.update(trained_loss=trained, gmpo_loss=gmpo)
    if not torch.isclose(torch.tensor(trained), torch.tensor(gmpo), atol=1e-6):
        raise ProbeFailed(
            f"GMPOTrainer with use_liger_kernel trains on loss {trained:.6f}, not GMPO's objective {gmpo:.6f}"
        )
    result["summary"] = (
        f"GMPOTrainer (use_liger_kernel={config.use_liger_kernel}) trains on GMPO's objective ({gmpo:.6f})"
    )


def main(argv: list[str] | None = None) -> int:
    return run_smoke(
        "probe_gmpo_liger", parse_args(__doc__.splitlines()[0], "GMPOConfig field (JSON value)", argv), probe
    )


if __name__ == "__main__":
    sys.exit(main())
