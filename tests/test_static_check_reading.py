"""The static check's reading of installed code (grpo_compat.static_check), each behaviour on a small package tree
written into tmp_path (the shapes upstream releases have), and on the real releases that have them (slow: the files
of exact resolved sets, CellEnvs.file_only)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

import grpo_compat.static_check as static_check
from grpo_compat.matrix.cells import Cell
from grpo_compat.static_check.fixes import bounded
from matrix.repository import ENVS, REPO, cells_file

# transformers' probe, as 4.x wrote it (a bool unless asked for the version) and as 5.3+ writes it (always a tuple)
PROBE_4 = """
    import importlib.util

    def _is_package_available(pkg_name, return_version=False):
        package_exists = importlib.util.find_spec(pkg_name) is not None
        package_version = "N/A"
        if return_version:
            return package_exists, package_version
        else:
            return package_exists
"""
PROBE_5_3 = """
    import importlib.util

    def _is_package_available(pkg_name, return_version=False):
        spec = importlib.util.find_spec(pkg_name)
        if return_version:
            return spec is not None, "N/A"
        return spec is not None, None
"""


def _tree(root, distributions: dict[str, str], files: dict[str, str], requires: dict[str, list[str]] | None = None):
    """Installed distributions (name -> version, with their Requires-Dist) and module files under ``root``."""
    for name, version in distributions.items():
        info = root / f"{name.replace('-', '_')}-{version}.dist-info"
        info.mkdir(parents=True)
        declared = [f"Requires-Dist: {r}" for r in (requires or {}).get(name, [])]
        lines = [f"Name: {name}", f"Version: {version}", *declared]
        (info / "METADATA").write_text("\n".join(lines) + "\n")
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(textwrap.dedent(text))
    return str(root)


def _trl(root, import_utils: str, trainer: str, probe: str = PROBE_5_3, extra_files=None, distributions=None,
         requires=None):  # fmt: skip
    """A trl tree: trl/import_utils.py and trl/trainer/grpo_trainer.py as given, transformers with ``probe``."""
    files = {
        "transformers/__init__.py": "",
        "transformers/utils/__init__.py": "",
        "transformers/utils/import_utils.py": probe,
        "trl/__init__.py": "",
        "trl/import_utils.py": "from transformers.utils.import_utils import _is_package_available\n"
        + textwrap.dedent(import_utils),
        "trl/trainer/__init__.py": "",
        "trl/trainer/grpo_trainer.py": textwrap.dedent(trainer) + "\nclass GRPOTrainer:\n    pass\n",
        **(extra_files or {}),
    }
    return _tree(root, {"trl": "0.27.2", "transformers": "5.10.4", **(distributions or {})}, files, requires)


def _findings(folder: str) -> list[static_check.Finding]:
    return static_check.find(static_check.Install([folder]))


REQUESTS_DIRECT = """
    def is_requests_available():
        return _is_package_available("requests")
"""
REQUESTS_TRAINER = """
    from ..import_utils import is_requests_available

    if is_requests_available():
        import requests
"""


def test_a_check_returning_the_probe_directly_is_always_true_where_the_probe_returns_a_tuple(tmp_path):
    """trl 0.27-0.28 write `return _is_package_available("requests")`: on transformers >= 5.3 a tuple, so the
    import runs without requests; on 4.x's probe (a bool) it does not."""
    found = _findings(_trl(tmp_path / "tf5", REQUESTS_DIRECT, REQUESTS_TRAINER))
    assert [f.kind for f in found] == ["missing-module"], [f.line() for f in found]
    assert "No module named 'requests'" in found[0].message and "always true" in found[0].message
    assert _findings(_trl(tmp_path / "tf4", REQUESTS_DIRECT, REQUESTS_TRAINER, probe=PROBE_4)) == []


LIGER = """
    from packaging import version

    LIGER_KERNEL_MIN_VERSION = "0.5.8"
    _is_liger_kernel_available, _liger_kernel_version = _is_package_available("liger_kernel", return_version=True)

    def is_liger_kernel_available(min_version=LIGER_KERNEL_MIN_VERSION):
        return _is_liger_kernel_available and version.parse(_liger_kernel_version) >= version.parse(min_version)
"""
LIGER_TRAINER = """
    from ..import_utils import is_liger_kernel_available

    if is_liger_kernel_available():
        from liger_kernel.chunked_loss import LigerFusedLinearGRPOLoss
"""


@pytest.mark.parametrize(("liger", "finds"), [("0.5.2", False), ("0.5.9", True)])
def test_an_availability_check_is_evaluated_with_its_version_test(tmp_path, liger, finds):
    """trl 0.18's is_liger_kernel_available() also requires liger-kernel >= 0.5.8: below it the import does not run
    (no LigerFusedLinearGRPOLoss finding on a set that trains); at 0.5.9 without the class it does."""
    folder = _trl(
        tmp_path, LIGER, LIGER_TRAINER, probe=PROBE_4,
        extra_files={"liger_kernel/__init__.py": "", "liger_kernel/chunked_loss/__init__.py": "X = 1\n",
                     "packaging/__init__.py": "", "packaging/version.py": "def parse(text):\n    pass\n"},
        distributions={"liger-kernel": liger},
    )  # fmt: skip
    found = _findings(folder)
    assert [f.kind for f in found] == (["missing-name"] if finds else []), [f.line() for f in found]


def test_a_handler_that_re_raises_is_no_guard(tmp_path):
    """ms-swift 4.0's `try: import vllm ... except Exception: raise`: the import's error goes through."""
    trainer = """
        try:
            import vllm
        except Exception:
            raise
    """
    found = _findings(_trl(tmp_path / "raise", "", trainer))
    assert [(f.kind, f.where) for f in found] == [("missing-module", "trl/trainer/grpo_trainer.py:3")]
    swallowed = trainer.replace("raise", "vllm = None")
    assert _findings(_trl(tmp_path / "swallow", "", swallowed)) == []


def test_imports_inside_with_blocks_are_walked_and_only_contextlib_suppress_hides_them(tmp_path):
    """trl 0.26 imports mergekit's callback under `with suppress_experimental_warning():`, which lets the error
    through; `with contextlib.suppress(ImportError):` does not."""
    warning_only = """
        import contextlib

        def suppress_experimental_warning():
            return contextlib.nullcontext()

        with suppress_experimental_warning():
            import mergekit
    """
    found = _findings(_trl(tmp_path / "warning", "", warning_only))
    assert [f.where for f in found] == ["trl/trainer/grpo_trainer.py:8"], [f.line() for f in found]
    suppressed = "import contextlib\nwith contextlib.suppress(ImportError):\n    import mergekit\n"
    assert _findings(_trl(tmp_path / "suppress", "", suppressed)) == []


def test_a_lazy_init_is_followed_to_the_submodule_it_names_under_type_checking(tmp_path):
    """ms-swift 4.0's `swift.infer_engine` binds its names under TYPE_CHECKING and lists them in _import_structure:
    `from swift.infer_engine import TransformersEngine` runs the submodule, whose `import vllm` fails."""
    files = {
        "swift/__init__.py": "",
        "swift/rlhf_trainers/__init__.py": "",
        "swift/rlhf_trainers/grpo_trainer.py": "from swift.infer_engine import TransformersEngine\n"
        "class GRPOTrainer:\n    pass\n",
        "swift/infer_engine/__init__.py": """
            from typing import TYPE_CHECKING

            if TYPE_CHECKING:
                from .transformers_engine import TransformersEngine
            else:
                _import_structure = {"transformers_engine": ["TransformersEngine"]}
        """,
        "swift/infer_engine/transformers_engine.py": "import vllm\nclass TransformersEngine:\n    pass\n",
    }
    found = _findings(_tree(tmp_path, {"ms-swift": "4.0.4"}, files))
    assert [(f.kind, f.where) for f in found] == [("missing-module", "swift/infer_engine/transformers_engine.py:1")]


def test_the_findings_of_one_always_true_guard_are_one_finding_in_import_order(tmp_path):
    """Three imports that always-true checks let run, one of them twice: one finding naming each module once, in
    the order the import meets them, whose fix is not a leaf install."""
    check = "def is_{0}_available():\n    return _is_package_available('{0}')\n"
    checks = check.format("weave") + check.format("requests")
    trainer = """
        from ..import_utils import is_requests_available, is_weave_available

        if is_weave_available():
            import weave
            from weave import EvaluationLogger
        if is_requests_available():
            import requests
    """
    found = _findings(_trl(tmp_path, checks, trainer))
    assert len(found) == 1, [f.line() for f in found]
    assert "imports weave, requests when" in found[0].message
    assert found[0].where == "trl/trainer/grpo_trainer.py:5"
    assert "pip install weave" not in found[0].fix and "pip install requests" not in found[0].fix


def test_an_import_line_that_lacks_several_names_is_one_finding(tmp_path):
    files = {"liger_kernel/__init__.py": "", "liger_kernel/chunked_loss.py": "X = 1\n"}
    folder = _trl(tmp_path, "", "from liger_kernel.chunked_loss import A, B\n", extra_files=files,
                  distributions={"liger-kernel": "0.5.2"})  # fmt: skip
    (found,) = _findings(folder)
    assert " imports A, B from liger_kernel.chunked_loss" in found.message


def test_a_proposed_upgrade_carries_the_upper_bound_the_other_installed_packages_declare(tmp_path):
    """ms-swift 3.10 declares trl<0.25: `'trl>=0.17.0'` alone let uv move trl to 1.16, past what ms-swift takes."""
    folder = _tree(tmp_path, {"ms-swift": "3.10.3", "trl": "0.15.2"}, {}, {"ms-swift": ["trl<0.25,>=0.15"]})
    install = static_check.Install([folder])
    assert bounded(install, "pip install 'trl>=0.17.0'") == "pip install 'trl>=0.17.0,<0.25'"
    # no room under the bound: that option is dropped, the other stays
    assert bounded(install, "pip install 'trl>=0.26.0' or 'x<2'") == "pip install 'x<2'"


def test_a_module_declared_only_in_an_extra_is_said_so(tmp_path):
    folder = _trl(tmp_path, "", "import vllm\n", requires={"trl": ['vllm>=0.10.2; extra == "vllm"']})
    (found,) = _findings(folder)
    assert "trl declares it only in the extra [vllm]" in found.message


TORCHVISION_CASES = [
    ("0.28.0", "torch==2.13.0", sys.platform == "linux"),  # PyPI's Linux build is a CUDA one, beside a CPU torch
    ("0.28.0+cpu", "torch==2.13.0", False),
    ("0.24.0+cpu", "torch==2.9.0", True),  # built for another torch release
]


@pytest.mark.parametrize(("torchvision", "pin", "finds"), TORCHVISION_CASES)
def test_a_torchvision_built_for_another_torch_is_found(tmp_path, torchvision, pin, finds):
    folder = _tree(
        tmp_path,
        {"torch": "2.13.0+cpu", "torchvision": torchvision, "transformers": "5.10.4", "trl": "1.16.0"},
        {"trl/__init__.py": "", "torch/__init__.py": "", "torchvision/__init__.py": "", "transformers/__init__.py": ""},
        {"torchvision": [pin]},
    )
    found = _findings(folder)
    assert [f.kind for f in found] == (["build"] if finds else []), [f.line() for f in found]
    if finds:
        assert found[0].fix.startswith("pip uninstall -y torchvision")


KERNEL_UTILS = """
    try:
        from ..kernels import ChunkedLogProbFunction as _ChunkedLogProbFunction
    except ImportError:
        _ChunkedLogProbFunction = None

    def add_fused_lm_head(model):
        def forward(hidden):
            return {use}
        model.forward = forward
"""
KERNEL_TRAINER = """
    from .utils import add_fused_lm_head

    class GRPOTrainer:
        def __init__(self, model):
            add_fused_lm_head(model)
"""


@pytest.mark.parametrize(
    ("use", "triton", "finds"),
    [
        ("_ChunkedLogProbFunction.apply(hidden)", False, True),
        ("_ChunkedLogProbFunction.apply(hidden)", True, False),  # the kernel imports: not None
        ("_ChunkedLogProbFunction.apply(hidden) if _ChunkedLogProbFunction is not None else hidden", False, False),
    ],
)
def test_an_optional_kernel_set_to_none_and_called_untested_on_the_trainer_path_is_found(tmp_path, use, triton, finds):
    """trl 1.15.0: `_ChunkedLogProbFunction = None` without Triton, then `.apply` in the forward the trainer's
    __init__ installs: the first step fails on a CPU torch."""
    files = {
        "trl/__init__.py": "",
        "trl/kernels/__init__.py": "from .chunked import ChunkedLogProbFunction\n",
        "trl/kernels/chunked.py": "import triton\nclass ChunkedLogProbFunction:\n    pass\n",
        "trl/trainer/__init__.py": "",
        "trl/trainer/utils.py": textwrap.dedent(KERNEL_UTILS).format(use=use),
        "trl/trainer/grpo_trainer.py": textwrap.dedent(KERNEL_TRAINER),
        **({"triton/__init__.py": ""} if triton else {}),
    }
    found = _findings(_tree(tmp_path, {"trl": "1.15.0"}, files))
    assert [f.kind for f in found] == (["kernel"] if finds else []), [f.line() for f in found]
    if finds:
        assert "triton" in found[0].message and found[0].where == "trl/trainer/utils.py:9"


ATTRIBUTE_FILES = {
    "transformers/__init__.py": "",
    "transformers/trainer.py": """
        class Trainer:
            def __init__(self, model):
                self.model = model

            def train(self):
                return self.training_step()

            def training_step(self):
                return self.compute_loss()
    """,
    "trl/__init__.py": "",
    "trl/trainer/__init__.py": "",
    "trl/trainer/grpo_trainer.py": """
        from transformers.trainer import Trainer

        class GRPOTrainer(Trainer):
            def __init__(self, model, args):
                super().__init__(model)
                self.temperature = args.temperature
                {read}

            def compute_loss(self):
                return self.model(self._get_per_token_logps())

            def _get_per_token_logps(self):
                return 1 / self.temperature
    """,
    "swift/__init__.py": "",
    "swift/rlhf_trainers/__init__.py": "",
    "swift/rlhf_trainers/grpo_trainer.py": """
        from transformers.trainer import Trainer
        from trl.trainer.grpo_trainer import GRPOTrainer as HFGRPOTrainer

        {delete}

        class GRPOTrainer(HFGRPOTrainer):
            def __init__(self, model, args):
                super().__init__(model, args)
    """,
}


@pytest.mark.parametrize(
    ("swift", "delete", "read", "finds"),
    [
        (True, "del HFGRPOTrainer.__init__", "", ["temperature"]),  # ms-swift 3.2.0 with trl 0.16
        (True, "", "", []),  # trl's __init__ runs through super(): it sets the temperature
        (False, "", "self.warnings_issued['estimate_tokens'] = True", ["warnings_issued"]),  # a base removed it
        (False, "", "if hasattr(self, 'warnings_issued'): self.warnings_issued['x'] = True", []),
    ],
)
def test_an_attribute_the_trainer_reads_and_nothing_that_runs_sets_is_found(tmp_path, swift, delete, read, finds):
    files = {path: textwrap.dedent(text).format(delete=delete, read=read) for path, text in ATTRIBUTE_FILES.items()}
    if not swift:
        files = {path: text for path, text in files.items() if not path.startswith("swift")}
    versions = {"transformers": "4.49.0", "trl": "0.16.1", **({"ms-swift": "3.2.0"} if swift else {})}
    found = _findings(_tree(tmp_path, versions, files))
    assert [f.kind for f in found] == ["attribute"] * len(finds), [f.line() for f in found]
    for finding, attribute in zip(found, finds, strict=True):
        assert f"has no attribute '{attribute}'" in finding.message


# -- the commands: a finding is an error, and a reading says so -----------------------------------------------------


def _cli(tmp_path, *args):
    """The command over this env with a torchvision built for another torch ahead on the path (a real finding)."""
    folder = _tree(tmp_path / "site", {"torchvision": "0.24.0+cpu"}, {}, {"torchvision": ["torch==2.9.0"]})
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), folder]), "XDG_CACHE_HOME": str(tmp_path)}
    return subprocess.run([sys.executable, "-m", "grpo_compat", *args], capture_output=True, text=True, env=env)


def test_check_never_says_ok_and_exits_1_when_the_install_cannot_train(tmp_path):
    run = _cli(tmp_path, "check", "num_generations=2", "per_device_train_batch_size=2", "bf16=False")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "ok: these settings can train" not in run.stdout
    assert "torchvision 0.24.0+cpu does not match torch" in run.stdout
    assert static_check.READ_NOT_RUN in run.stdout


def test_doctor_exits_1_on_a_finding_and_says_it_read_and_did_not_run(tmp_path):
    run = _cli(tmp_path, "doctor")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "[error] torchvision 0.24.0+cpu does not match torch" in run.stdout
    assert static_check.READ_NOT_RUN in run.stdout


# -- on real releases ---------------------------------------------------------------------------------------------

REAL = {
    # trl 0.27.2's direct `return _is_package_available("requests")` on transformers 5.10.4: fails at import
    "trl-0.27-tf5.10": (
        Cell("case-trl-0.27-tf5.10", {"torch": "2.13.0", "trl": "0.27.2", "transformers": "5.10.4"},
             exclude_newer="2026-11-21"),
        [("missing-module", "imports requests, weave when")],
    ),
    # trl 0.26.2 imports mergekit under `with suppress_experimental_warning():`; its constructor then writes
    # model.warnings_issued, which transformers set on PreTrainedModel up to 5.0 only
    "trl-0.26-tf5.5": (
        Cell("case-trl-0.26-tf5.5", {"torch": "2.13.0", "trl": "0.26.2", "transformers": "5.5.0"},
             exclude_newer="2026-11-21"),
        [("missing-module", "mergekit"), ("attribute", "no attribute 'warnings_issued'")],
    ),
    # trl 0.18.2 with liger-kernel 0.5.2 (no LigerFusedLinearGRPOLoss, below trl's 0.5.8): the import never runs
    "trl-0.18-liger-0.5.2": (
        Cell("case-trl-0.18-liger0.5.2", {"torch": "2.13.0", "trl": "0.18.2", "transformers": "4.52.4"},
             extra=("liger-kernel==0.5.2",), exclude_newer="2025-06-30"),
        [],
    ),
    # ms-swift 4.0.4: swift.infer_engine's lazy table leads to vllm_engine.py, whose `except Exception: raise`
    "swift-4.0.4": (
        Cell("case-swift-4.0.4", {"torch": "2.13.0", "ms-swift": "4.0.4"}, extra=("msgspec",),
             exclude_newer="2026-11-21"),
        [("missing-module", "No module named 'vllm'")],
    ),
    # ms-swift 3.2.0 deletes trl 0.16's GRPOTrainer.__init__, the only code that sets self.temperature; the
    # catalogue's record of it gives the fix and names the patch that refuses it
    "swift-3.2-trl0.16": (
        cells_file().cells["swift-3.2-trl0.16"],
        [("attribute", "has no attribute 'temperature'")],
    ),
    # ms-swift 3.10.3 with trl 0.15.2: one import line lacking four names is one finding; the upgrade it proposes
    # carries ms-swift 3.10's own bound on trl (an open trl>=0.17.0 let uv move to trl 1.16, which fails in peft)
    "swift-3.10-trl0.15": (
        Cell("case-swift-3.10-trl0.15", {"torch": "2.13.0", "ms-swift": "3.10.3", "trl": "0.15.2"},
             extra=("msgspec",), exclude_newer="2025-12-05"),
        [("missing-name", "imports RepeatSampler, nanmax, nanmin, nanstd from trl.trainer.grpo_trainer")],
        "pip install 'trl>=0.17.0,<0.25' or 'ms-swift>=4.0.0'",
    ),
    # trl 1.15.0 on a CPU torch (no Triton): _ChunkedLogProbFunction is None at the first step
    "trl-1.15": (
        Cell("case-trl-1.15", {"torch": "2.13.0", "trl": "1.15.0"}, exclude_newer="2026-11-21"),
        [("kernel", "_ChunkedLogProbFunction = None")],
    ),
}  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("case", list(REAL))
def test_the_reading_on_real_releases(case):
    cell, expected, *fix = REAL[case]
    found = _findings(str(ENVS.file_only(cell)))
    assert len(found) == len(expected), [f.line() for f in found]
    for finding, (kind, text) in zip(found, expected, strict=True):
        assert finding.kind == kind and text in finding.message, finding.line()
    if fix:
        assert found[0].fix == fix[0]
