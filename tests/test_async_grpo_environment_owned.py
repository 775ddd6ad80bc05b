"""trl.refuse-async-grpo-environment-owned in the trl-1.9 cell (trl 1.9.2): only the call trl #6824 breaks is
refused, before the model loads; every other AsyncGRPOTrainer call reaches upstream (here: loading a model path that
does not exist). The upstream crash itself: matrix reproducer async-grpo-environment-owned."""

from __future__ import annotations

import json

import pytest

from tests.helpers import cell_python, run_python

BUILD_CASES = """
import json
import grpo_compat
grpo_compat.apply()
from datasets import Dataset
from trl.experimental.async_grpo import AsyncGRPOConfig, AsyncGRPOTrainer
from grpo_compat.testing.multi_turn import CounterEnvironment, EchoEnvironment

class ArgsFirst(AsyncGRPOTrainer):
    def __init__(self, *args, **kwargs):
        self.args = kwargs["args"]
        super().__init__(*args, **kwargs)

config = AsyncGRPOConfig(output_dir="async-out", max_steps=2, per_device_train_batch_size=2, use_cpu=True, bf16=False)
placeholder = Dataset.from_dict({"prompt": [[{"role": "user", "content": ""}]] * 2})
cases = {
    "environment-owned": (AsyncGRPOTrainer, dict(environment_factory=CounterEnvironment)),
    "with-dataset": (AsyncGRPOTrainer, dict(environment_factory=CounterEnvironment, train_dataset=placeholder)),
    "dict-of-factories": (AsyncGRPOTrainer, dict(environment_factory={"a": CounterEnvironment, "b": EchoEnvironment})),
    "subclass-sets-args": (ArgsFirst, dict(environment_factory=CounterEnvironment)),
}
outcomes = {}
for name, (trainer_class, kwargs) in cases.items():
    try:
        trainer_class(model="/nonexistent/model", reward_funcs=lambda completions, **kw: [0.0], args=config, **kwargs)
    except Exception as exc:
        outcomes[name] = type(exc).__name__
print(json.dumps(outcomes))
"""


@pytest.mark.slow
@pytest.mark.cells("trl-1.9")
def test_only_environment_owned_data_is_refused_before_the_model_loads(tmp_path):
    result = run_python(BUILD_CASES, python=cell_python("trl-1.9"), env={"HF_HUB_OFFLINE": "1"})
    assert result.returncode == 0, result.stderr[-3000:]
    outcomes = json.loads(result.stdout.strip().splitlines()[-1])
    assert outcomes["environment-owned"] == "UnsupportedCombinationError"
    # Upstream's own failure, loading the missing model: grpo_compat left these calls alone.
    assert {outcomes[name] for name in ("with-dataset", "dict-of-factories", "subclass-sets-args")} <= {
        "OSError",
        "HFValidationError",
    }
