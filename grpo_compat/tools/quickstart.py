"""`grpo-compat quickstart DIR`: a GRPO project that trains on a CPU in a minute, without the Hugging Face Hub.

DIR/tiny-model/   a tiny Qwen2 and its tokenizer, built here from a seed (grpo_compat.testing.tiny_model)
DIR/train.py      a plain trl GRPO script (it never imports grpo_compat: `grpo-compat run -- python train.py`)
DIR/grpo.yaml     its GRPOConfig settings, a file `grpo-compat check grpo.yaml` judges before anything loads

docs/quickstart.md walks through them; tests/test_quickstart.py runs that page's commands as written.
"""

from __future__ import annotations

from pathlib import Path

from grpo_compat.tools.errors import InputError

MODEL_FOLDER = "tiny-model"

TRAIN_PY = '''\
"""Two GRPO steps on the tiny local model, with the settings of grpo.yaml.

    grpo-compat run -- python train.py      # with grpo_compat applied, no change to this file
    python train.py                         # plainly

Replace the model, the prompts and the reward with yours; keep the settings in grpo.yaml.
"""

from pathlib import Path

import torch
import yaml
from datasets import Dataset
from trl import GRPOConfig, GRPOTrainer

HERE = Path(__file__).resolve().parent


def length_reward(completions, **kwargs):
    """One reward per completion: the closer to 20 characters, the higher."""
    return [-abs(20 - len(completion)) / 20 for completion in completions]


def main():
    settings = yaml.safe_load((HERE / "grpo.yaml").read_text())
    config = GRPOConfig(**settings)
    prompts = Dataset.from_dict({"prompt": [f"Count to {n}:" for n in range(8)]})
    trainer = GRPOTrainer(
        model=str(HERE / "tiny-model"), reward_funcs=length_reward, args=config, train_dataset=prompts
    )
    before = {name: tensor.clone() for name, tensor in trainer.model.state_dict().items()}
    trainer.train()
    after = trainer.model.state_dict()
    changed = sum(not torch.equal(before[name], after[name]) for name in after)
    print(f"trained {trainer.state.global_step} steps: {changed} of {len(after)} weight tensors changed")


if __name__ == "__main__":
    main()
'''

GRPO_YAML = """\
# GRPOConfig settings of train.py (the format of `trl grpo --config`). Check them before a run:
#   grpo-compat check grpo.yaml
output_dir: out
max_steps: 2
per_device_train_batch_size: 4   # completions per step: a multiple of num_generations
num_generations: 4               # completions per prompt, compared with each other
max_completion_length: 8
learning_rate: 0.001
logging_steps: 1
save_strategy: "no"
report_to: none
seed: 0
use_cpu: true                    # runs anywhere; drop it (and set bf16: true) on a GPU
bf16: false
"""


def write_quickstart(folder: Path, force: bool = False) -> list[Path]:
    """Write train.py and grpo.yaml into ``folder`` (existing ones only with ``force``) and build the tiny model
    beside them (reused when already built). The paths written."""
    files = {folder / "train.py": TRAIN_PY, folder / "grpo.yaml": GRPO_YAML}
    existing = [str(path) for path in files if path.exists()]
    if existing and not force:
        raise InputError(f"{', '.join(existing)} exist(s): --force overwrites")
    try:  # the builder imports them when it builds: fail here, in one line
        import tokenizers  # noqa: F401
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as error:
        raise InputError(
            f"the tiny model needs torch, transformers and tokenizers: {error} (pip install trl)"
        ) from None
    from grpo_compat.testing.tiny_model import build_tiny_qwen2

    try:
        folder.mkdir(parents=True, exist_ok=True)
        for path, text in files.items():
            path.write_text(text)
        build_tiny_qwen2(folder / MODEL_FOLDER)
    except FileExistsError as error:  # a model folder the builder did not make: never overwritten
        raise InputError(str(error)) from None
    except OSError as error:
        raise InputError(f"{folder}: {error.strerror or error}") from None
    return [folder / MODEL_FOLDER, *files]
