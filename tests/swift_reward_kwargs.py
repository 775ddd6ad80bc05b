"""Run by tests/test_swift_reward_checks.py in a ms-swift cell env: what the real trainer passes a reward function.

    python tests/swift_reward_kwargs.py --model-dir DIR --output result.json

One plain GRPO step of matrix/smoke_swift.py with a reward ORM that records the keyword argument names ms-swift
passes it; the trainer's first dataset rows are recorded when swift's GRPOTrainer is built, and the dry run's
keyword arguments for them (grpo_compat.fixes.rewards.swift_keyword_arguments) are written next to them.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from typing import Any

import matrix.smoke_swift as smoke_swift
from grpo_compat.core.versions import installed_version
from grpo_compat.fixes.rewards import dataset_rows, swift_keyword_arguments


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model-dir", required=True)
    parser.add_argument("--output", required=True)
    args = parser.parse_args()
    seen: dict[str, Any] = {}

    def register_reward(api: Any, reward: Any) -> None:
        class Recording(api.orm):  # type: ignore[misc,name-defined]
            def __call__(self, completions: list, **kwargs: Any) -> list:
                seen.setdefault("passed", sorted(kwargs))
                return reward(completions)

        api.orms[smoke_swift.REWARD_NAME] = Recording

    if importlib.util.find_spec("swift.rlhf_trainers"):  # 4.x
        from swift.rlhf_trainers.grpo_trainer import GRPOTrainer
    else:
        from swift.trainers.rlhf_trainer.grpo_trainer import GRPOTrainer
    built = GRPOTrainer.__init__

    def init(trainer: Any, *positional: Any, **keywords: Any) -> None:
        built(trainer, *positional, **keywords)
        rows = dataset_rows(trainer.train_dataset)
        expected = swift_keyword_arguments(installed_version("ms-swift"), rows, trainer.args.num_generations)
        seen["dry_run"] = sorted(set(expected) - {"completions"})

    GRPOTrainer.__init__ = init
    smoke_swift.register_reward = register_reward
    status = smoke_swift.main(["--mode", "plain", "--steps", "1", "--model-dir", args.model_dir])
    with open(args.output, "w") as output:
        json.dump({"status": status, **seen}, output)
    return status


if __name__ == "__main__":
    sys.exit(main())
