"""The probe's import recorder (grpo_compat.testing.trainer_probe) on a real import of a throwaway package tree."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _record(tmp_path: Path, files: dict[str, str]) -> dict:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    code = (
        "import json, sys\n"
        "from grpo_compat.testing.trainer_probe import import_recording\n"
        "missing, error, found = import_recording('app.trainer', 'Trainer')\n"
        "print(json.dumps({'missing': missing, 'error': error, 'found': found is not None}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
        env={"PYTHONPATH": f"{tmp_path}:{ROOT}", "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_every_unguarded_missing_module_and_name_is_recorded_in_import_order(tmp_path: Path) -> None:
    result = _record(tmp_path, {
        "app/__init__.py": "import gone_first\n",
        "app/helpers.py": "VALUE = 1\n",
        "app/trainer.py": """
            try:
                import optional_extra  # guarded: never recorded, never stood in for
            except ImportError:
                optional_extra = None
            from gone_second.sub import Engine
            from app.helpers import VALUE, REMOVED
            import gone_first.deeper  # a submodule of a module already stood in for: not recorded again

            class Trainer(Engine):
                guarded = optional_extra
                group = Engine.create(port=0)  # a missing module's class used at import: a stand-in too
        """,
    })  # fmt: skip
    assert [(m["kind"], m["name"]) for m in result["missing"]] == [
        ("missing-module", "gone_first"),
        ("missing-module", "gone_second"),
        ("missing-name", "app.helpers.REMOVED"),
    ]
    assert [m["where"] for m in result["missing"]] == ["app:1", "app.trainer:6", "app.trainer:7"]
    assert result["error"] is None and result["found"]


def test_an_error_of_another_kind_stops_the_import_and_is_recorded(tmp_path: Path) -> None:
    result = _record(tmp_path, {
        "app/__init__.py": "",
        "app/trainer.py": "import gone\nraise RuntimeError('operator torchvision::nms does not exist')\n",
    })  # fmt: skip
    assert [m["name"] for m in result["missing"]] == ["gone"]
    assert result["error"] == {
        "type": "RuntimeError", "message": "operator torchvision::nms does not exist", "where": "app.trainer:2",
        "after_stand_ins": True,  # met after a stand-in: the doctor says it may be the stand-in's consequence
    }  # fmt: skip
    assert not result["found"]


@pytest.mark.parametrize("guard", ["except ImportError", "except ModuleNotFoundError", "except Exception"])
def test_a_set_whose_missing_modules_are_all_guarded_imports_cleanly(tmp_path: Path, guard: str) -> None:
    trainer = f"try:\n    import gone\n{guard}:\n    gone = None\nclass Trainer:\n    pass\n"
    result = _record(tmp_path, {"app/__init__.py": "", "app/trainer.py": trainer})
    assert result == {"missing": [], "error": None, "found": True}


def test_ms_swifts_command_line_carries_the_users_settings_it_takes_and_the_probes_own_model_data_and_sizes():
    import dataclasses

    from grpo_compat.testing.trainer_probe import SWIFT_REWARD, swift_argv

    @dataclasses.dataclass
    class RLHFArguments:  # the fields swift_argv reads: a 3.x one (train_type, before 4.0's tuner_type)
        rlhf_type: str = "dpo"
        model: str = ""
        dataset: list = dataclasses.field(default_factory=list)
        train_type: str = "lora"
        loss_type: str = "grpo"
        max_steps: int = -1
        use_vllm: bool = False
        output_dir: str = ""
        reward_funcs: list = dataclasses.field(default_factory=list)

    config = {"loss_type": "dapo", "max_steps": 500, "model": "Qwen/Qwen2.5-7B", "use_vllm": True, "no_such": 1}
    argv, not_used = swift_argv(RLHFArguments, config, "/tiny", "/data.jsonl", "/out")
    pairs = dict(zip(argv[::2], argv[1::2], strict=True))
    assert pairs == {
        "--loss_type": "dapo", "--rlhf_type": "grpo", "--max_steps": "1", "--train_type": "full", "--model": "/tiny",
        "--dataset": "/data.jsonl", "--reward_funcs": SWIFT_REWARD, "--output_dir": "/out",
    }  # fmt: skip
    assert not_used == ["max_steps", "model", "no_such", "use_vllm"]
