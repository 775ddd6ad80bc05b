"""`explain`'s general mechanisms, each on a short log built from upstream's own messages: the evidence read once
(frames attributed to distributions), the environment facts, reasoning over every release when the log states no
version, refused settings per release, raise sites, and the ranking step that applies the harm rules."""

from __future__ import annotations

import re

import pytest

from grpo_compat.catalogue.evidence import distribution_of_path, read_evidence
from grpo_compat.catalogue.log_matching import Explanation, explain, format_explanation, rank
from grpo_compat.catalogue.reasoning import Finding, reason
from grpo_compat.tools.cli import main


def answer_of(log: str, given: dict[str, str] | None = None, installed: dict | None = None) -> Finding:
    answer = explain(log, given, installed={} if installed is None else installed).answer()
    assert isinstance(answer, Finding), answer
    return answer


def every_fix(log: str, **kwargs) -> str:
    explanation = explain(log, installed=kwargs.get("installed", {}), given=kwargs.get("given"))
    return "\n".join(finding.fix for finding in explanation.reasoned)


# --- frame attribution -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "distribution", "module"),
    [
        ("/usr/local/lib/python3.10/dist-packages/trl/trainer/grpo_trainer.py", "trl", "trl.trainer.grpo_trainer"),
        (r"C:\Users\me\anaconda3\envs\rl\Lib\site-packages\transformers\trainer.py", "transformers", None),
        ("/opt/conda/lib/python3.11/site-packages/swift/llm/train/rlhf.py", "ms-swift", "swift.llm.train.rlhf"),
        ("/content/unsloth_compiled_cache/UnslothGRPOTrainer.py", "unsloth", None),
        ("/venv/lib/python3.11/site-packages/unsloth_zoo/vllm_utils.py", "unsloth-zoo", "unsloth_zoo.vllm_utils"),
        ("/workspace/trl/trl/trainer/grpo_trainer.py", "trl", "trl.trainer.grpo_trainer"),
        ("/home/u/ms-swift/swift/trainers/rlhf_trainer/grpo_trainer.py", "ms-swift", None),
        ("/home/u/transformers/src/transformers/trainer.py", "transformers", "transformers.trainer"),
        ("/home/u/project/train.py", None, None),
        ("/home/u/trl/train.py", None, None),  # a project folder named trl holding the user's script
    ],
)
def test_every_frame_is_mapped_to_the_distribution_whose_code_it_runs(path, distribution, module):
    found, found_module = distribution_of_path(path)
    assert found == distribution
    if module:
        assert found_module == module


def test_the_answer_names_whose_code_raised_whose_called_it_and_the_release_pair_in_question():
    log = """Traceback (most recent call last):
  File "/home/me/train.py", line 30, in <module>
    trainer.train()
  File "/usr/lib/python3.11/site-packages/transformers/trainer.py", line 2206, in _inner_training_loop
    train_dataloader = self.get_train_dataloader()
  File "/usr/lib/python3.11/site-packages/transformers/trainer.py", line 1006, in _get_dataloader
    dataloader_params["sampler"] = sampler_fn(dataset)
TypeError: GRPOTrainer._get_train_sampler() takes 1 positional argument but 2 were given
"""
    explanation = explain(log, {"trl": "0.16.1", "transformers": "4.52.4"}, installed={})
    (finding,) = [f for f in explanation.reasoned if f.cls == "signature-mismatch"]
    assert finding.code == (
        "the call in transformers 4.52.4's code (trainer.py, _get_dataloader) into trl 0.16.1's: "
        "the transformers / trl release pair is in question"
    )
    error = read_evidence(log).errors[-1]
    assert (error.raised_by, error.called_by) == ("transformers", None)


# --- harm rules, applied in one ranking step ---------------------------------------------------------------------

WINDOWS_RESOURCE = r"""Traceback (most recent call last):
  File "C:\Users\me\grpo\train.py", line 3, in <module>
    from unsloth import FastLanguageModel
  File "C:\Users\me\miniconda3\envs\rl\Lib\site-packages\unsloth\__init__.py", line 12, in <module>
    import resource
ModuleNotFoundError: No module named 'resource'
"""


def test_a_posix_only_standard_module_on_windows_is_the_platform_never_a_pip_install():
    finding = answer_of(WINDOWS_RESOURCE)
    assert (finding.cls, finding.name, finding.importer, finding.confident) == ("platform", "resource", "unsloth", True)
    assert "windows" in finding.cause and "Linux" in finding.fix
    assert "pip install" not in every_fix(WINDOWS_RESOURCE)


@pytest.mark.parametrize(
    ("module", "cls", "fix"),
    [
        ("_lzma", "platform", "rebuild Python"),  # a Python built without its system library
        ("imp", "platform", "older than 3.12"),  # left the standard library
        ("distutils", "missing-package", "pip install setuptools"),  # setuptools provides it again
        ("msvcrt", "platform", "Windows"),
    ],
)
def test_a_standard_library_module_is_answered_by_the_platform_or_the_python_build(module, cls, fix):
    log = f"Traceback (most recent call last):\nModuleNotFoundError: No module named '{module}'\n"
    finding = answer_of(log)
    assert finding.cls == cls and fix in finding.fix


@pytest.mark.parametrize(
    ("module", "distribution"), [("cv2", "opencv-python"), ("yaml", "PyYAML"), ("sklearn", "scikit-learn")]
)
def test_an_import_name_is_installed_by_its_distributions_name(module, distribution):
    log = f"ModuleNotFoundError: No module named '{module}'\n"
    finding = answer_of(log)
    assert (finding.package, finding.fix, finding.confident) == (distribution, f"pip install {distribution}", True)


def test_a_module_no_data_maps_to_a_distribution_is_offered_without_a_pip_command():
    finding = answer_of("ModuleNotFoundError: No module named 'grpo_helpers_of_my_lab'\n")
    assert finding.certainty == "offered" and "pip install" not in finding.fix


def test_the_ranking_drops_a_pip_install_of_a_standard_module_whatever_reasoner_proposed_it():
    explanation = Explanation({}, {}, evidence=read_evidence(WINDOWS_RESOURCE))
    wrong = Finding("missing-package", "resource", True, "x", "pip install resource", "No module named 'resource'")
    alias = Finding("missing-package", "cv2", True, "x", "pip install cv2", "No module named 'cv2'")
    right = Finding("missing-package", "opencv-python", True, "x", "pip install opencv-python", "No module named")
    explanation.reasoned = [wrong, alias, right]
    assert rank(explanation).reasoned == [right]


GRPOCONFIG_ELSEWHERE = """Traceback (most recent call last):
  File "/content/train.py", line 3, in <module>
    from trl import GRPOConfig, GRPOTrainer
ImportError: cannot import name 'GRPOConfig' from 'trl' (/usr/local/lib/python3.11/dist-packages/trl/__init__.py)
"""


def test_a_release_the_histories_say_has_the_name_is_never_said_to_lack_it():
    # Another machine's log, read where trl 1.16.0 is installed: 1.16.0 is not the run's trl, and has GRPOConfig.
    text = format_explanation(explain(GRPOCONFIG_ELSEWHERE, installed={"trl": "1.16.0"}), "log")
    assert "has no 'GRPOConfig'" not in text and "trl 1.16.0" not in text.split("versions used:")[1].split("\n", 1)[1]
    # Given as the run's release: the import failed for another reason (a shadowing file, a partial install).
    finding = answer_of(GRPOCONFIG_ELSEWHERE, {"trl": "1.16.0"})
    assert (finding.cls, finding.certainty) == ("import-failed", "offered")
    assert "trl 1.16.0 has 'GRPOConfig'" in finding.cause


def test_a_note_that_nothing_is_wrong_is_never_shown_on_a_log_holding_an_exception():
    metrics = "{'loss': 0.0, 'grad_norm': 0.21, 'reward': 0.5, 'reward_std': 0.3}\n" * 3
    assert [f.cls for f in explain(metrics, installed={}).reasoned] == ["expected-zero-loss"]
    crashed = (
        metrics + 'Traceback (most recent call last):\n  File "/x/t.py", line 2, in <module>\nRuntimeError: boom\n'
    )
    explanation = explain(crashed, installed={})
    assert explanation.reasoned == [] and not explanation.nothing_wrong
    assert "nothing to fix" not in format_explanation(explanation, "log")


def test_every_finding_is_labelled_asserted_or_offered_in_text_and_json():
    explanation = explain(WINDOWS_RESOURCE, installed={})
    assert "(1) asserted: platform: resource" in format_explanation(explanation, "log")
    assert explanation.to_dict()["reasoned"][0]["certainty"] == "asserted"
    offered = explain("ModuleNotFoundError: No module named 'grpo_helpers_of_my_lab'\n", installed={})
    assert "(1) offered: missing-package" in format_explanation(offered, "log")


# --- a clean log ---------------------------------------------------------------------------------------------------

LEARNING = (
    "".join(
        f"{{'loss': {loss}, 'grad_norm': {grad}, 'learning_rate': 1e-06, 'reward': {reward}, 'reward_std': 0.31, "
        f"'completions/clipped_ratio': 0.05, 'kl': 0.001, 'epoch': {epoch}}}\n"
        for loss, grad, reward, epoch in ((0.012, 0.41, 0.22, 0.1), (0.009, 0.37, 0.35, 0.2), (0.011, 0.33, 0.51, 0.3))
    )
    + "{'train_runtime': 812.4, 'train_samples_per_second': 0.59, 'train_loss': 0.0107, 'epoch': 0.3}\n"
)


def test_a_log_of_a_run_that_learns_says_nothing_is_wrong_and_exits_0(tmp_path, capsys):
    explanation = explain(LEARNING, installed={})
    assert explanation.nothing_wrong and explanation.reasoned == [] and explanation.matches == []
    log = tmp_path / "train.log"
    log.write_text(LEARNING)
    assert main(["explain", str(log)]) == 0
    out = capsys.readouterr().out
    assert "nothing is wrong" in out and "cause" not in out.splitlines()[0]


def test_a_run_without_gradient_or_with_nan_is_not_called_clean():
    assert not explain(LEARNING.replace("'grad_norm': 0.37", "'grad_norm': nan"), installed={}).nothing_wrong
    assert not explain("loading model\nsaving checkpoint\n", installed={}).nothing_wrong  # no metrics: unknown


# --- reasoning without versions: every release of the histories ---------------------------------------------------

SEED_WORKER = """Traceback (most recent call last):
  File "/content/train.py", line 88, in <module>
    trainer.train()
  File "/usr/local/lib/python3.11/dist-packages/transformers/trainer.py", line 2240, in train
    return inner_training_loop(
  File "/usr/local/lib/python3.11/dist-packages/torch/_utils.py", line 733, in reraise
    raise exception
TypeError: Caught TypeError in DataLoader worker process 0.
Original Traceback (most recent call last):
  File "/usr/local/lib/python3.11/dist-packages/torch/utils/data/_utils/worker.py", line 287, in _worker_loop
    init_fn(worker_id)
TypeError: seed_worker() missing 2 required positional arguments: 'num_workers' and 'rank'
"""


def _same(finding: Finding) -> tuple:
    return finding.cls, finding.name, finding.package, finding.importer, finding.fix, finding.confident


def test_a_call_the_histories_bind_in_one_range_gets_the_same_answer_with_or_without_versions():
    without = answer_of(SEED_WORKER)
    with_versions = answer_of(SEED_WORKER, {"transformers": "4.52.4", "trl": "0.17.0"})
    assert _same(without) == _same(with_versions)
    assert (without.fix, without.remedy) == ("pip install 'transformers<=4.51.3'", "pin")
    assert "torch" not in without.fix  # torch only invoked the callback: it did not write the call


@pytest.mark.parametrize(
    ("error", "fix"),
    [
        # vLLM 0.12 removed GuidedDecodingParams (last in 0.11.2); 0.11 added StructuredOutputsParams
        ("cannot import name 'GuidedDecodingParams' from 'vllm.sampling_params'", "pip install 'vllm<=0.11.2'"),
        ("cannot import name 'StructuredOutputsParams' from 'vllm.sampling_params'", "pip install 'vllm>=0.11.0'"),
    ],
)
def test_a_missing_name_whose_release_range_is_certain_needs_no_version_in_the_log(error, fix):
    log = f"ImportError: {error}\n"
    without = answer_of(log)
    version = "0.12.0" if "Guided" in error else "0.10.2"
    assert _same(without)[:5] == _same(answer_of(log, {"vllm": version}))[:5]
    assert (without.fix, without.confident) == (fix, True)


def test_a_pin_inside_a_sentence_is_not_taken_for_the_release_that_failed():
    log = (
        "pinning trl==0.19.0 fixed it for me\n"
        "ImportError: cannot import name 'ConstantLengthDataset' from 'trl.trainer.utils'\n"
    )
    finding = answer_of(log)
    assert (finding.cls, finding.remedy, finding.fix) == ("name-missing", "pin", "pip install 'trl<=0.19.1'")


# --- settings per release ------------------------------------------------------------------------------------------

REMAINING_ARGV = """Traceback (most recent call last):
  File "/usr/local/lib/python3.10/site-packages/swift/cli/rlhf.py", line 5, in <module>
    rlhf_main()
  File "/usr/local/lib/python3.10/site-packages/swift/llm/argument/base_args/base_args.py", line 60, in parse_args
    raise ValueError(f'remaining_argv: {remaining_argv}')
ValueError: remaining_argv: ['--max_prompt_length', '1024']
"""


def test_a_swift_flag_gets_its_answer_from_every_release_of_the_settings_history_not_the_generic_record():
    without = answer_of(REMAINING_ARGV)
    on_4 = answer_of(REMAINING_ARGV, {"ms-swift": "4.0.0"})
    assert (without.cls, without.name, without.confident) == ("setting-refused", "max_prompt_length", True)
    assert "no ms-swift release from 3.4.0" in without.cause and "setting of trl" in without.cause
    assert without.fix == on_4.fix and "max_length" in without.fix


def test_a_renamed_swift_flag_names_its_replacement_with_or_without_the_version():
    log = REMAINING_ARGV.replace("'--max_prompt_length', '1024'", "'--train_type', 'full'")
    assert answer_of(log).fix == answer_of(log, {"ms-swift": "4.6.0"}).fix == "set `tuner_type` instead"


def test_a_training_argument_swift_inherits_from_transformers_is_never_called_unknown():
    log = REMAINING_ARGV.replace("--max_prompt_length", "--per_device_train_batch_size")
    assert [f for f in explain(log, installed={}).reasoned if f.cls == "setting-refused"] == []


# --- environment: native builds ------------------------------------------------------------------------------------

LIBCUDART = """torch==2.1.2+cu118
Traceback (most recent call last):
  File "/root/train.py", line 5, in <module>
    from vllm import LLM
  File "/usr/local/lib/python3.10/site-packages/vllm/_custom_ops.py", line 9, in <module>
    import vllm._C
ImportError: libcudart.so.12: cannot open shared object file: No such file or directory
"""


def test_a_missing_cuda_runtime_names_the_package_built_for_it_and_the_torch_build():
    finding = answer_of(LIBCUDART)
    assert (finding.cls, finding.name, finding.package) == ("native-build", "libcudart.so.12", "vllm")
    assert "CUDA 12" in finding.cause and "CUDA 11.8" in finding.cause


def test_an_extension_built_against_another_torch_is_rebuilt_not_reinstalled_as_is():
    log = (
        "ImportError: /usr/local/lib/python3.10/dist-packages/flash_attn_2_cuda.cpython-310-x86_64-linux-gnu.so: "
        "undefined symbol: _ZN3c105ErrorC2ENS_14SourceLocationENSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE\n"
    )
    finding = answer_of(log)
    assert (finding.cls, finding.package) == ("native-build", "flash-attn")
    assert "built against torch" in finding.cause and "--no-build-isolation" in finding.fix


def test_an_ascend_machine_without_cuda_is_named_as_such():
    log = "[INFO] torch_npu 2.1.0 found, Ascend 910B\nAssertionError: Torch not compiled with CUDA enabled\n"
    finding = answer_of(log)
    assert finding.cls == "native-build" and "npu" in finding.fix
    assert answer_of("ModuleNotFoundError: No module named 'torch_npu'\n").fix == "pip install torch-npu"


# --- raise sites ---------------------------------------------------------------------------------------------------

NO_EPOCHS = """{'output_dir': 'out', 'num_train_epochs': None, 'max_steps': -1, 'per_device_train_batch_size': 4}
Traceback (most recent call last):
  File "/workspace/train.py", line 40, in <module>
    trainer.train()
  File "/opt/conda/lib/python3.11/site-packages/transformers/trainer.py", line 2338, in _inner_training_loop
    max_steps = math.ceil(args.num_train_epochs * num_update_steps_per_epoch)
TypeError: unsupported operand type(s) for *: 'NoneType' and 'int'
"""


def test_an_upstream_operation_on_none_names_the_setting_it_reads_and_its_value():
    finding = answer_of(NO_EPOCHS)
    assert (finding.cls, finding.name, finding.package) == ("upstream-check", "num_train_epochs", "transformers")
    assert "num_train_epochs=None" in finding.cause


def test_an_upstream_raise_is_read_from_the_installed_function_naming_the_settings_its_condition_reads():
    # trl 1.16.0's GRPOConfig.__post_init__ (installed in the quick env): the message selects the raise.
    log = """num_generations=3 per_device_train_batch_size=4
Traceback (most recent call last):
  File "/workspace/train.py", line 12, in <module>
    args = GRPOConfig(output_dir="out", num_generations=3, per_device_train_batch_size=4)
  File "/usr/local/lib/python3.12/site-packages/trl/trainer/grpo_config.py", line 1132, in __post_init__
    raise ValueError(
ValueError: generation_batch_size (4) must be divisible by num_generations (3).
"""
    (finding,) = [f for f in reason(log, {}).findings if f.cls == "upstream-check"]
    assert "`self.generation_batch_size % self.num_generations != 0`" in finding.cause
    assert "generation_batch_size, num_generations" in finding.cause and "num_generations=3" in finding.cause
    assert re.match(r"the installed trl [\d.]+'s __post_init__", finding.data)


# --- an error inside a package that runs its own copy of upstream code --------------------------------------------


def test_an_error_inside_unsloths_compiled_trainer_is_offered_as_an_unsloth_release_skew():
    log = """Unsloth 2025.3.19: Fast Qwen2 patching. Transformers: 4.51.3. vLLM: 0.8.4.
Traceback (most recent call last):
  File "/content/train.py", line 60, in <module>
    trainer.train()
  File "/usr/local/lib/python3.11/dist-packages/transformers/trainer.py", line 2245, in train
    return inner_training_loop(
  File "/content/unsloth_compiled_cache/UnslothGRPOTrainer.py", line 1721, in _prepare_inputs
    prompt_inputs = super()._prepare_inputs(prompt_inputs)
RuntimeError: shape '[1, 4]' is invalid for input of size 8
"""
    explanation = explain(log, installed={})
    finding = explanation.answer()
    assert (finding.cls, finding.package, finding.importer, finding.certainty) == (
        "version-skew",
        "unsloth",
        "transformers",
        "offered",
    )
    assert "unsloth 2025.3.19" in finding.cause and "pip install --upgrade unsloth unsloth_zoo" in finding.fix
    assert "raised in unsloth 2025.3.19's code (UnslothGRPOTrainer.py, _prepare_inputs)" in finding.code


@pytest.mark.parametrize(
    ("keyword", "fix"),
    [
        ("max_prompt_length", "remove `max_prompt_length`"),  # trl 0.14.0-0.27.2 only: nothing replaced it
        ("vllm_mode", "pip install 'trl>=0.18.0', or remove `vllm_mode`"),  # a field from 0.18.0 on
    ],
)
def test_a_grpoconfig_keyword_of_other_releases_is_answered_from_every_release_of_the_settings_history(keyword, fix):
    finding = answer_of(f"TypeError: GRPOConfig.__init__() got an unexpected keyword argument '{keyword}'\n")
    assert (finding.cls, finding.name, finding.fix, finding.confident) == ("keyword-not-accepted", keyword, fix, True)


def test_a_stated_release_that_takes_the_setting_is_not_said_to_refuse_it():
    # trl 0.16.0 has max_prompt_length: a log stating it and refusing the keyword ran another trl
    explanation = explain(
        "TypeError: GRPOConfig.__init__() got an unexpected keyword argument 'max_prompt_length'\n",
        {"trl": "0.16.0"},
        installed={},
    )
    (finding,) = explanation.reasoned
    assert finding.certainty == "offered" and "trl 0.16.0, which takes `max_prompt_length`" in finding.cause
    assert "is new in" not in finding.cause


def _traceback_of(error: BaseException) -> str:
    import traceback

    try:
        raise error
    except BaseException as raised:  # noqa: BLE001 - formatted as Python prints it
        return "".join(traceback.format_exception(raised))


def test_a_run_grpo_compat_refused_is_answered_by_its_own_message():
    from grpo_compat.core.errors import GRPOSettingsError

    message = "per_device_train_batch_size 3 is not a multiple of num_generations 4. Set per_device_train_batch_size=4"
    log = "[rank0]: " + _traceback_of(GRPOSettingsError(message)).replace("\n", "\n[rank0]: ")
    answer = explain(log, installed={}).answer()
    assert answer.cls == "refused-by-grpo-compat" and answer.confident
    assert answer.name == "GRPOSettingsError" and "Set per_device_train_batch_size=4" in answer.fix


def test_an_error_of_the_same_name_from_another_package_is_not_taken_for_grpo_compats():
    class LaunchError(RuntimeError):
        pass

    log = _traceback_of(LaunchError("the cluster refused the job"))
    assert all(f.cls != "refused-by-grpo-compat" for f in explain(log, installed={}).reasoned)
