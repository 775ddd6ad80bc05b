"""Build trl's experimental AsyncGRPOTrainer with environment-owned data (no train_dataset); writes a JSON result.

    python -m matrix.probe_async_grpo_environment_owned --mode plain --output plain.json

An environment_factory and no train_dataset (trl #6824): trl 1.9-1.10 fail in __init__ with "'AsyncGRPOTrainer'
object has no attribute 'args'" after the model loaded; patched, grpo_compat refuses it before. trl loads the model
with attn_implementation="kernels-community/flash-attn3", a GPU kernel from the Hub; the probe hands trl a model
loader that loads it with sdpa instead, so that __init__ gets on to the line on CPU. Past it AsyncGRPOTrainer needs
vLLM >= 0.22 and a vLLM server, so the probe ends at building the trainer: the run does not train either way.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from grpo_compat.testing.multi_turn import CounterEnvironment
from grpo_compat.testing.smoke import constant_reward, parse_args, run_smoke, start_probe


class SdpaModelLoader:
    """trl's AutoModelForCausalLM with sdpa attention in place of the Hub's flash-attn3 kernel (no GPU, no Hub)."""

    @staticmethod
    def from_pretrained(path: str, **kwargs: Any) -> Any:
        from transformers import AutoModelForCausalLM

        return AutoModelForCausalLM.from_pretrained(path, **{**kwargs, "attn_implementation": "sdpa"})


def probe(args: argparse.Namespace, output_dir: str, result: dict) -> None:
    model_dir = start_probe(args, result)
    import trl.experimental.async_grpo.async_grpo_trainer as async_grpo
    from trl.experimental.async_grpo import AsyncGRPOConfig, AsyncGRPOTrainer

    async_grpo.AutoModelForCausalLM = SdpaModelLoader
    config = AsyncGRPOConfig(
        output_dir=output_dir, max_steps=2, per_device_train_batch_size=2, use_cpu=True, bf16=False, report_to="none"
    )
    AsyncGRPOTrainer(
        model=str(model_dir), reward_funcs=constant_reward, args=config, environment_factory=CounterEnvironment
    )
    result["summary"] = "AsyncGRPOTrainer built with an environment_factory and no train_dataset"


def main(argv: list[str] | None = None) -> int:
    return run_smoke(
        "probe_async_grpo_environment_owned",
        parse_args(__doc__.splitlines()[0], "AsyncGRPOConfig field (JSON value)", argv),
        probe,
    )


if __name__ == "__main__":
    sys.exit(main())
