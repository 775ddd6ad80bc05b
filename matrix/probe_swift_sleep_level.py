"""Probe the gradient accumulation ms-swift GRPO trains with under --use_vllm --sleep_level 1; writes a JSON result.

    python -m matrix.probe_swift_sleep_level --mode plain --set gradient_accumulation_steps=4 --output r.json

Builds ms-swift's RLHFArguments (patched: under grpo_compat.apply()) from the smoke run's `swift rlhf` GRPO
arguments with use_vllm true and sleep_level 1 (colocate: ms-swift's argument checks count one device per process,
so the probe tells them there is one; nothing is generated or loaded), and compares the gradient_accumulation_steps
swift ends up with with the one asked for (--set). ms-swift 3.2.1-3.3.x replace it with 1 (ms-swift #3943): the
probe's error. Exits non-zero on error, after writing the JSON.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from unittest import mock

from grpo_compat.testing.smoke import ProbeFailed, free_port, parse_args, reward_function, run_smoke, tiny_model

COLOCATED_VLLM = {"use_vllm": True, "sleep_level": 1}


def probe(args: argparse.Namespace, output_dir: str, result: dict) -> None:
    result["summary"] = None  # marks a probe result, also when upstream raises below
    os.environ.setdefault("MODELSCOPE_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    # use_vllm: swift sets a one-process DDP default (set_default_ddp_config) and joins it at MASTER_PORT (29500 by
    # default, which another run may hold)
    os.environ.setdefault("MASTER_PORT", str(free_port()))
    if args.mode == "patched":
        import grpo_compat

        grpo_compat.apply()  # before swift, so patches hook its import
    from matrix.smoke_swift import register_reward, swift_api, swift_keywords, write_dataset

    model_dir = tiny_model(args)
    api = swift_api()
    register_reward(api, reward_function(args))
    Path(output_dir).mkdir(parents=True, exist_ok=True)
    dataset = write_dataset(Path(output_dir) / "smoke_prompts.jsonl")
    args.config_overrides = {**COLOCATED_VLLM, **args.config_overrides}
    keywords, result["config_fields_dropped"] = swift_keywords(api, model_dir, dataset, output_dir, args)
    asked = keywords.get("gradient_accumulation_steps")
    import swift.utils

    # Colocate mode: ms-swift asserts one device per process (device_count == NPROC_PER_NODE == num_infer_workers).
    with mock.patch.object(swift.utils, "get_device_count", return_value=1):
        arguments = api.arguments(**keywords)
    got = arguments.gradient_accumulation_steps
    result.update(asked_gradient_accumulation_steps=asked, gradient_accumulation_steps=got)
    settings = ", ".join(f"{key}={keywords.get(key)!r}" for key in ("use_vllm", "sleep_level"))
    if got != asked:
        raise ProbeFailed(
            f"ms-swift trains with gradient_accumulation_steps {got}, not the {asked} asked for ({settings}), "
            "without a word"
        )
    result["summary"] = f"ms-swift keeps gradient_accumulation_steps {got} as asked ({settings})"


def main(argv: list[str] | None = None) -> int:
    arguments = parse_args(__doc__.splitlines()[0], "swift rlhf argument (JSON value)", argv)
    return run_smoke("probe_swift_sleep_level", arguments, probe)


if __name__ == "__main__":
    sys.exit(main())
