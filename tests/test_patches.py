"""Every shipped patch, against the real upstream installed here: declared properly, reversible, effective.

EFFECT_PROBES maps each patch id to a function that returns True exactly when the patch's effect
is visible in this process; the round trip asserts the behaviour, not the attribute assignment.
"""

from __future__ import annotations

import json
import re

import pytest

import grpo_compat
from grpo_compat.core.errors import GRPOSettingsError, LaunchError
from grpo_compat.core.registry import registered_patches
from grpo_compat.core.report import Status
from grpo_compat.core.versions import installed_version, window_problem
from tests.helpers import REPO, run_python

PATCHES = registered_patches()


def _single_generation_is_rejected_by_grpo_compat() -> bool:
    from trl import GRPOConfig

    try:
        GRPOConfig(output_dir="unused", num_generations=1, per_device_train_batch_size=2, use_cpu=True, bf16=False)
    except GRPOSettingsError:
        return True
    except ValueError:
        return False  # upstream's own refusal
    return False


def _removed_setting_is_named_with_its_release() -> bool:
    from trl import GRPOConfig

    from grpo_compat.core.errors import SettingNotTakenError

    try:
        GRPOConfig(output_dir="unused", max_prompt_length=64, use_cpu=True, bf16=False)
    except SettingNotTakenError as error:
        return "removed in trl 0.28.0" in str(error)
    except TypeError:
        return False  # upstream's own "unexpected keyword argument"
    return False


def _trainer_refuses_a_bad_config_before_loading() -> bool:
    from trl import GRPOConfig, GRPOTrainer

    config = GRPOConfig(output_dir="unused", num_generations=2, per_device_train_batch_size=2, use_cpu=True, bf16=False)
    config.num_generations = 3  # changed after the config check: only the trainer can see it
    try:  # a model path that does not exist: upstream fails loading it, the check fails before
        GRPOTrainer(model="/nonexistent/model", reward_funcs=lambda completions, **kw: [0.0], args=config)
    except GRPOSettingsError:
        return True
    except Exception:  # noqa: BLE001 - upstream's own failure to load the model
        return False
    return False


def _reward_without_kwargs_is_refused_before_loading() -> bool:
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from grpo_compat.core.errors import RewardFunctionError

    config = GRPOConfig(output_dir="unused", num_generations=2, per_device_train_batch_size=2, use_cpu=True, bf16=False)
    data = Dataset.from_dict({"prompt": ["a", "b"]})
    try:  # a model path that does not exist: upstream fails loading it, the dry run fails before
        GRPOTrainer(model="/nonexistent/model", reward_funcs=lambda completions: [0.0], args=config, train_dataset=data)
    except RewardFunctionError:
        return True
    except Exception:  # noqa: BLE001 - upstream's own failure to load the model
        return False
    return False


def _two_gpu_plain_launch_is_refused_by_grpo_compat() -> bool:
    import tempfile
    from unittest import mock

    import torch
    from trl import GRPOConfig, GRPOTrainer

    with tempfile.TemporaryDirectory() as empty, mock.patch.object(torch.cuda, "device_count", return_value=2):
        # One process seeing 2 GPUs: GRPOConfig reads the count only while it is built (tests/test_launch_guard.py).
        config = GRPOConfig(output_dir=empty, num_generations=2, per_device_train_batch_size=2, bf16=False)
        assert config.n_gpu == 2
        try:  # an empty model folder: upstream fails loading it, the guard refuses before
            GRPOTrainer(model=empty, reward_funcs=lambda completions, **kw: [0.0], args=config)
        except LaunchError:
            return True
        except (OSError, ValueError):
            return False
    return False


def _full_length_log_probs_have_k_columns() -> bool:
    import torch

    from grpo_compat.testing.logps import causal_lm, log_prob_method, log_probs, trainer_stand_in

    model = causal_lm()
    ids = torch.randint(0, 97, (2, 5), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():  # upstream (trl 1.16) returns L - 1 = 4 columns for logits_to_keep = L = 5
        result = log_prob_method()(trainer_stand_in(model), model, ids, torch.ones_like(ids), 5)
    return log_probs(result).shape == (2, 5)


class _CallbackAdded(Exception):
    pass


def _grpo_training_gets_the_learning_watchdog() -> bool:
    from types import SimpleNamespace

    from trl import GRPOTrainer

    def add_callback(callback):
        raise _CallbackAdded(type(callback).__name__)  # stop before any training

    trainer = SimpleNamespace(callback_handler=SimpleNamespace(callbacks=[]), add_callback=add_callback)
    try:
        GRPOTrainer.train(trainer)
    except _CallbackAdded as added:
        return str(added) == "LearningWatchdog"
    except Exception:  # noqa: BLE001 - upstream's train() on a bare object: no watchdog
        return False
    return False


def _contradicting_deepspeed_accumulation_is_refused_when_the_config_is_built() -> bool:
    import os
    import tempfile

    from trl import GRPOConfig

    saved = dict(os.environ)  # TrainingArguments(deepspeed=...) sets ACCELERATE_USE_DEEPSPEED for the process
    deepspeed = {
        "zero_optimization": {"stage": 2},
        "train_micro_batch_size_per_gpu": "auto",
        "gradient_accumulation_steps": 4,
    }
    try:
        with tempfile.TemporaryDirectory() as output_dir:
            GRPOConfig(
                output_dir=output_dir,
                deepspeed=deepspeed,
                per_device_train_batch_size=2,
                gradient_accumulation_steps=2,
                num_generations=2,
                use_cpu=True,
                bf16=False,
                report_to="none",
            )
    except GRPOSettingsError:
        return True
    except Exception:  # noqa: BLE001 - upstream refuses only later, in train()
        return False
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return False


EFFECT_PROBES = {
    "trl.learning-watchdog": _grpo_training_gets_the_learning_watchdog,
    "trl.grpo-config-check": _single_generation_is_rejected_by_grpo_compat,
    "trl.grpo-config-settings": _removed_setting_is_named_with_its_release,
    # ms-swift is not in this env: proven in the swift-4.6 cell by the reproducer swift-renamed-argument-cli (plain:
    # remaining_argv after __post_init__; patched: refused naming ms-swift 4.1.0 and --tuner_type).
    "swift.arguments-not-taken": None,
    "trl.grpo-trainer-check": _trainer_refuses_a_bad_config_before_loading,
    "trl.reward-dry-run": _reward_without_kwargs_is_refused_before_loading,
    "trl.launch-guard": _two_gpu_plain_launch_is_refused_by_grpo_compat,
    "trl.logps-alignment": _full_length_log_probs_have_k_columns,
    # trl 0.19.x only (this env has 1.16): proven in the trl-0.19 cell env by tests/test_logps_alignment.py.
    "trl.logps-trim-logits": None,
    # ms-swift is not in this env: proven in the swift-4.6 cell env by tests/test_swift_arguments_check.py.
    "swift.grpo-arguments-check": None,
    # ms-swift is not in this env: proven in the swift-4.6 cell env by tests/test_swift_logps_alignment.py
    # (4.x), and by the swift-3.5 / swift-3.12 matrix reproducers (3.x).
    "swift.logps-alignment": None,
    "swift.logps-alignment-3x": None,
    # trl 0.17-1.13 only (1.16 has no _get_last_hidden_state / compute_liger_loss): proven with the real
    # Liger loss in the trl-0.23-liger cell env by tests/test_lm_head_shape_guard.py.
    "trl.liger-lm-head-guard": None,
    # unsloth imports only on a GPU: its guard functions are tested on CPU by tests/test_lm_head_shape_guard.py.
    "unsloth.lm-head-guard": None,
    # trl 0.15-0.16 with transformers >= 4.52 only: proven in the trl-0.16-tf4.52 cell (its matrix runs) and by
    # tests/test_version_skew.py (patched weights equal trl 0.16.1 + transformers 4.51.3's).
    "trl.train-sampler-signature": None,
    # trl 0.14 with transformers < 4.46 or >= 4.52 only: proven in the trl-0.14-tf4.45 and trl-0.14-tf4.52 cells
    # (every patched run refused, every plain run failing or, on 4.52, training on the wrong tokens) and by
    # tests/test_version_skew.py, which also trains trl 0.14 on transformers 4.51.3 patched (not refused).
    "trl.refuse-transformers-without-processing-class": None,
    "trl.refuse-trl-0.14-on-transformers-4.52": None,
    # liger-kernel is not in this env (and trl 1.16 has no Liger GRPO loss): proven in the trl-0.23-liger cell
    # (reproducer liger-loss-type) and by tests/test_version_skew.py (bnpo: weights identical to plain).
    "trl.refuse-liger-missing-loss-type": None,
    # trl 1.7-1.13 with liger-kernel only: proven in the trl-1.9-liger cell (reproducer gmpo-liger) and by
    # tests/test_version_skew.py (GMPO without Liger: not refused).
    "trl.refuse-gmpo-with-liger": None,
    # trl 0.14-1.9 only: proven in the trl cells below 1.10 (reproducer reward-one-value-broadcast; every healthy
    # patched run's weights equal plain's) and by tests/test_reward_dry_run.py (trl 0.16, the dry run off).
    "trl.reward-count-check": None,
    # trl 0.22.0-1.9.0 only: proven in the trl-0.23 and trl-0.29 cells by the probe of reproducer
    # token-normalisation-scale (plain 0.500x, patched 1.000x trl 1.9.1's divisor; healthy runs: weights identical).
    "trl.token-normalisation-scale": None,
    # transformers 5.0-5.5 only (this env has 5.23): proven in the trl-1.9-tf5.5 cell (reproducer
    # gemma3-token-type-ids: a tiny Gemma-3 fails plain, trains patched).
    "transformers.gemma3-text-token-type-ids": None,
    # ms-swift 3.5-3.6 with trl >= 0.20 only: proven in the swift-3.5-trl0.20 cell (every plain run fails at the
    # first step, every patched one is refused: in-process apply() and the `swift rlhf` plugin, 1 and 2 processes).
    "swift.refuse-trl-0.20-on-swift-3.5": None,
    # ms-swift is not in this env: proven in the swift-3.5, swift-3.12 and swift-4.6 cells by the reproducers
    # swift-reward-without-kwargs (plain fails at the first reward call, patched refused before the first
    # generation) and swift-reward-one-value-broadcast (plain learns nothing without a word, patched refused at
    # the step), with every healthy swift run's patched weights equal to plain's; and by tests/test_reward_dry_run.py.
    "swift.reward-dry-run": None,
    "swift.reward-count-check": None,
    # ms-swift only: proven in the swift-3.5 and swift-4.6 cells (reproducer swift-reward-not-registered).
    "swift.reward-names-check": None,
    # trl 0.22.0-0.27.0 only: proven in the trl-0.23 cells (evaluate() before train()) by the matrix reproducer
    # evaluate-before-train and tests/test_version_skew.py.
    "trl.accumulation-steps-default": None,
    # Needs deepspeed (a DeepSpeed config cannot be built without it); also proven in the trl-1.16 and trl-0.16
    # cell envs, and for ms-swift 4.6 with DeepSpeed 0.19.8 beside it, by tests/test_deepspeed_agreement.py.
    "trl.deepspeed-agreement": (
        _contradicting_deepspeed_accumulation_is_refused_when_the_config_is_built
        if installed_version("deepspeed")
        else None
    ),
    # ms-swift is not in this env: proven in the swift-4.6 env with DeepSpeed beside it (test_deepspeed_agreement.py).
    "swift.deepspeed-agreement": None,
    # transformers 4.48.x only (this env has 5.23, no deepspeed): proven in the trl-0.15 cell (ZeRO-2 vs DDP
    # grad_norm) by tests/test_deepspeed_gas_scaling.py.
    "trl.deepspeed-gas-double-scaling": None,
    # trl 0.14-0.15 only, and neither peft nor deepspeed is in this env: proven in the trl-0.15 and
    # trl-0.29-peft-zero3 cells (LoRA training runs) by tests/test_peft_patches.py.
    "trl.peft-input-grads": None,
    "trl.peft-zero3-reentrant": None,
}


def _probe_or_skip(patch):
    probe = EFFECT_PROBES[patch.id]
    if probe is None:
        outside = window_problem(patch.requires)
        assert outside is not None, f"{patch.id}: its upstream is installed in its window here, add a probe"
        pytest.skip(f"{outside[1]} in this env; the patch is proven in its matrix cell")
    return probe


@pytest.mark.parametrize("patch", PATCHES, ids=lambda p: p.id)
def test_every_patch_declares_window_docstring_probe_and_reproducer(patch):
    from matrix.reproducers import REPRODUCERS

    assert patch.requires, "a patch must declare its version window"
    for section in ("Symptom:", "Upstream:", "Affects:", "Remove when:"):
        assert section in patch.doc, f"{patch.id}: docstring lacks {section!r}"
    assert patch.id in EFFECT_PROBES, f"{patch.id}: add an effect probe to tests/test_patches.py"
    # The proof that the fix works is its reproducer: fails plain on the versions it targets, passes patched.
    assert [r for r in REPRODUCERS if r.patch == patch.id], f"{patch.id}: add a reproducer to matrix/reproducers.py"


def test_patch_modules_are_short_and_listed_in_pyproject():
    pyproject = (REPO / "pyproject.toml").read_text()
    for folder in (REPO / "patches").iterdir():
        if folder.is_dir() and (folder / "__init__.py").exists():
            assert f'"grpo_compat.patches.{folder.name}"' in pyproject, f"add patches/{folder.name} to pyproject"
    for module in (REPO / "patches").rglob("*.py"):
        assert len(module.read_text().splitlines()) < 220, f"{module} is too long for one patch"


@pytest.mark.parametrize("patch", PATCHES, ids=lambda p: p.id)
def test_apply_revert_apply_round_trip_switches_the_effect(patch):
    probe = _probe_or_skip(patch)
    grpo_compat.revert()
    assert not probe(), "effect visible before apply()"
    for _ in range(2):
        report = grpo_compat.apply(only=[patch.id])
        probe()  # imports the target module, which applies the pending patch
        assert grpo_compat.report().status_of(patch.id) is Status.APPLIED, report
        assert probe()
        grpo_compat.revert()
        assert not probe()


@pytest.mark.parametrize("order", ["apply-then-import", "import-then-apply"])
@pytest.mark.parametrize("patch", PATCHES, ids=lambda p: p.id)
def test_patch_applies_in_both_import_orders(patch, order):
    _probe_or_skip(patch)
    modules = sorted({t.module for t in patch.targets})
    imports = "; ".join(f"import {m}" for m in modules)
    steps = [imports, "grpo_compat.apply()"] if order == "import-then-apply" else ["grpo_compat.apply()", imports]
    result = run_python(
        "import grpo_compat\n" + "\n".join(steps) + f"\nprint(grpo_compat.report().status_of({patch.id!r}))"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "applied"


def test_patch_docstrings_name_an_upstream_issue_or_report():
    for patch in PATCHES:
        upstream = re.search(r"Upstream:(.*?)\n\S", patch.doc + "\nX", re.S).group(1)
        assert re.search(r"#\d+|KF-\d", upstream), f"{patch.id}: name the upstream issue in 'Upstream:'"


def test_every_patch_sharing_a_target_with_another_has_a_declared_place_in_the_wrapping_order():
    from grpo_compat.core.registry import wrapping_order

    order = wrapping_order()
    wrappers: dict[str, list[str]] = {}
    for patch in PATCHES:
        for target in patch.targets:
            wrappers.setdefault(f"{target.module}:{target.qualname}", []).append(patch.id)
    shared = {patch_id for ids in wrappers.values() if len(ids) > 1 for patch_id in ids}
    assert shared - set(order) == set(), "patches sharing a target must be placed in patches/__init__.py"
    assert set(order) <= {patch.id for patch in PATCHES}


@pytest.mark.parametrize("imports_first", [False, True], ids=["apply-then-import", "import-then-apply"])
def test_the_wrappers_on_a_shared_target_run_in_the_declared_order(imports_first):
    # Walks the live wrapper chain of trl's GRPOConfig.__post_init__ and GRPOTrainer.__init__ from the outside in.
    result = run_python(
        f"""
        import json, grpo_compat
        if {imports_first}:
            import trl.trainer.grpo_config, trl.trainer.grpo_trainer
        report = grpo_compat.apply()
        import trl.trainer.grpo_config, trl.trainer.grpo_trainer
        from grpo_compat.core.wrapping import PATCH_ID_ATTRIBUTE
        chains = {{}}
        for name, owner, attribute in (
            ("trl.trainer.grpo_config:GRPOConfig.__post_init__", trl.trainer.grpo_config.GRPOConfig, "__post_init__"),
            ("trl.trainer.grpo_trainer:GRPOTrainer.__init__", trl.trainer.grpo_trainer.GRPOTrainer, "__init__"),
        ):
            function, chain = vars(owner)[attribute], []
            while hasattr(function, PATCH_ID_ATTRIBUTE):
                chain.append(getattr(function, PATCH_ID_ATTRIBUTE))
                function = function.__wrapped__
            chains[name] = chain
        print(json.dumps({{"live": chains, "reported": grpo_compat.report().wrapping_order}}))
        """,
        env={"GRPO_COMPAT_LOG_LEVEL": "error"},
    )
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout.splitlines()[-1])
    assert seen["live"] == seen["reported"]
    assert seen["live"]["trl.trainer.grpo_trainer:GRPOTrainer.__init__"][0] == "trl.launch-guard"
    assert seen["live"]["trl.trainer.grpo_config:GRPOConfig.__post_init__"] == [
        "trl.grpo-config-check",
        "trl.deepspeed-agreement",
    ]
