"""trl's own test suites as a do-no-harm oracle: run them plain and with grpo_compat applied, compare.

Runs trl's ``tests/test_grpo_trainer.py`` (``--suite grpo``) or ``tests/test_sft_trainer.py``
(``--suite sft``: the launch guard wraps SFTTrainer too), from the trl git tag that matches the
installed trl, in the interpreter that runs this file (a cell's env), offline, on CPU:

    PY=$(python3 matrix/repository.py ensure trl-1.9)
    $PY matrix/upstream_suite.py --mode plain   --suite grpo --source /path/to/trl.git --output plain.json
    $PY matrix/upstream_suite.py --mode patched --suite grpo --source /path/to/trl.git --output patched.json
    python -m matrix.upstream_suite compare plain.json patched.json     # exit 1 on any difference
    $PY matrix/upstream_suite.py --mode both --suite grpo --source ... --output grpo.json   # all three

``--source`` is a git directory of trl (bare or a checkout) or an unpacked trl tree (its tests are used
as they are). The tag is ``v{version}``, else the highest ``vX.Y.Z`` with the same major.minor not
above the installed version (trl 1.9.2 -> v1.9.0); the result names it. trl's sdists carry no tests.

How the tests run offline (pytest's working directory is a scratch folder, default
``.matrix/upstream/trl-<trl>-tf-<transformers>/``):

* Hub ids resolve to folders of the same relative path there: ``trl-internal-testing/tiny-Qwen2ForCausalLM-2.5``
  (``grpo_compat.testing.tiny_model.build_tiny_qwen2``), its sequence-classification twin
  ``tiny-Qwen2ForSequenceClassification-2.5`` (same backbone, ``num_labels=1``, a seeded score head) and
  the ``trl-internal-testing/zen`` data set (the Zen of Python in every config trl's tests load, as jsonl,
  declared in its README.md). ``HF_HUB_OFFLINE``/``HF_DATASETS_OFFLINE``/``TRANSFORMERS_OFFLINE`` are set.
* In an env with vLLM (the vLLM cells), ``Qwen/Qwen2.5-0.5B-Instruct``, which trl's vLLM tests load, is the
  head-64 tiny Qwen2 (``build_tiny_qwen2(architecture="qwen2-head64")``), and ``VLLM_CPU_KVCACHE_SPACE``
  defaults to 1 (GiB), and the plugin lifts the "test requires accelerator" gate of trl's colocate-mode vLLM
  training test (``test_train_vllm``): it then starts vLLM's CPU engine on that model.
* With ``--qwen-vocab``, ``trl-internal-testing/tiny-Qwen3ForCausalLM``, ``tiny-Qwen3MoeForCausalLM`` and
  ``tiny-Qwen3ForSequenceClassification`` too: tiny models on Qwen's real vocabulary
  (``grpo_compat.testing.qwen_vocab``; its BPE ranks are qwen-agent 0.0.34's ``qwen.tiktoken``, fetched from PyPI
  once into ``.matrix/qwen-vocab/``) with the chat template the installed trl ships (``qwen3.jinja``). trl's tool
  and environment tests name them and fake ``generate`` with Qwen's token ids; where the vocabulary cannot be
  fetched, they are deselected with that reason.
* ``matrix/upstream_pytest_plugin.py`` (same in both passes) turns trl's bf16 default off, records every
  training's loss per test and deselects tests that name a Hub model or data set not built here; the
  patched pass also calls ``grpo_compat.apply()`` when the plugin loads, before trl is imported.
* Test dependencies (pytest, parameterized, pytest-timeout, pytest-datadir, ...) are not part of a cell's
  env: the ones the cell's interpreter lacks are installed, exact pins and no dependencies, with
  ``uv pip install --target`` into ``.matrix/testdeps/<python>-<hash of the pins>/``, which goes on
  PYTHONPATH of the pytest process only. The cell's env itself is left untouched.

The result JSON: {"status": "ok"|"error", "mode", "trl", "tag", "suite", "tests": {nodeid: {"outcome",
"final_loss", ...}}, "counts", "summary", "wall_s", ...}. ``compare`` prints per-test differences in
outcome or final loss (exact: the same seed on the same machine trains bit-identically) and exits 1
when there is any.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import functools
import hashlib
import io
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
PLUGIN_FILE = Path(__file__).resolve().parent / "upstream_pytest_plugin.py"
PLUGIN_MODULE = PLUGIN_FILE.stem
TESTDEPS_DIR = REPO / ".matrix" / "testdeps"
SUITES = {"grpo": "tests/test_grpo_trainer.py", "sft": "tests/test_sft_trainer.py"}
OUTCOMES = ("passed", "failed", "skipped", "error", "xfailed", "xpassed")

# What trl's test modules import beyond a cell's env, pinned exactly. `packaging` (pytest needs it)
# comes with transformers in every cell. Installed without dependencies: this list is the closure.
TEST_DEPS = {
    "pytest": "9.2.0",
    "pluggy": "1.7.0",
    "iniconfig": "2.3.1",
    "pygments": "2.21.0",
    "parameterized": "0.9.0",  # trl <= 0.17's unittest-style tests
    "pytest-timeout": "2.4.0",  # per-test time limit
    "pytest-datadir": "1.8.0",  # trl >= 0.2x SFT tests' lazy_shared_datadir fixture
    "jmespath": "1.0.1",  # trl parses tool calls with it; its tool tests are skipped without it
}
# Loaded explicitly (plugin autoload is off, so whatever else the cell has does not join in).
PYTEST_PLUGINS = ("pytest_timeout", "pytest_datadir.plugin")

CAUSAL_ID = "trl-internal-testing/tiny-Qwen2ForCausalLM-2.5"
SEQCLS_ID = "trl-internal-testing/tiny-Qwen2ForSequenceClassification-2.5"
ZEN_ID = "trl-internal-testing/zen"
# trl's vLLM tests load this model ("tiny models are too small for vLLM"). In an env with vLLM it resolves to
# the head-64 tiny Qwen2 (vLLM's CPU attention refuses the default's 16-wide heads); elsewhere it stays absent,
# so the tests that name it are deselected there as before.
VLLM_MODEL_ID = "Qwen/Qwen2.5-0.5B-Instruct"
# With --qwen-vocab: trl's tiny Qwen3 models, on Qwen's real vocabulary (grpo_compat.testing.qwen_vocab). trl's
# tool and environment tests name them and fake generate() with Qwen's token ids.
QWEN3_ID = "trl-internal-testing/tiny-Qwen3ForCausalLM"
QWEN3_MOE_ID = "trl-internal-testing/tiny-Qwen3MoeForCausalLM"
QWEN3_SEQCLS_ID = "trl-internal-testing/tiny-Qwen3ForSequenceClassification"
QWEN_VOCAB_IDS = (QWEN3_ID, QWEN3_MOE_ID, QWEN3_SEQCLS_ID)
# Where the qwen-agent wheel's files are put (uv pip install --target), once per checkout.
QWEN_VOCAB_DIR = REPO / ".matrix" / "qwen-vocab"
ASSET_MARKER = ".upstream_suite_asset.json"
ASSET_RECIPE = 1  # bump when the assets below change
# Train rows of the local zen data set. trl's has 17 (and 2 test rows); every GRPO test then trains
# 3 epochs x 17 prompts = 51 steps. 6 keeps each of trl's batch layouts and cuts the suite's time
# by about 2.8 (``--zen-train-rows 17`` for trl's size).
ZEN_TRAIN_ROWS = 6
ZEN_TEST_ROWS = 2


# --------------------------------------------------------------------------------------------------
# Which tag


def _version_key(text: str):
    from packaging.version import InvalidVersion, Version

    try:
        return Version(text)
    except InvalidVersion:
        return None


def choose_tag(version: str, tags: list[str]) -> str | None:
    """The trl tag whose tests match ``version``: ``v{version}``, else the highest tag with the same
    major.minor that is not above it (pre-releases only for a pre-release trl); None if there is none."""
    if f"v{version}" in tags:
        return f"v{version}"
    installed = _version_key(version)
    if installed is None:
        return None
    best, best_version = None, None
    for tag in tags:
        if not tag.startswith("v"):
            continue
        candidate = _version_key(tag[1:])
        if candidate is None or candidate.release[:2] != installed.release[:2] or candidate > installed:
            continue
        if candidate.is_prerelease and not installed.is_prerelease:
            continue
        if best_version is None or candidate > best_version:
            best, best_version = tag, candidate
    return best


def git_dir(source: Path) -> Path | None:
    """The git directory of ``source`` (bare repository or checkout), or None for a plain tree."""
    if (source / "HEAD").is_file() and (source / "objects").is_dir():
        return source
    if (source / ".git").exists():
        return source / ".git"
    return None


def _git(gdir: Path, *args: str, binary: bool = False) -> Any:
    result = subprocess.run(["git", f"--git-dir={gdir}", *args], capture_output=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed: {result.stderr.decode(errors='replace').strip()}")
    return result.stdout if binary else result.stdout.decode()


def list_tags(gdir: Path) -> list[str]:
    return _git(gdir, "tag", "--list").split()


def source_version(gdir: Path, ref: str) -> str | None:
    """trl's version at ``ref`` (its VERSION file, else ``__version__`` in trl/__init__.py)."""
    with contextlib.suppress(RuntimeError):
        return _git(gdir, "show", f"{ref}:VERSION").strip()
    with contextlib.suppress(RuntimeError):
        match = re.search(r"__version__\s*=\s*[\"']([^\"']+)", _git(gdir, "show", f"{ref}:trl/__init__.py"))
        if match:
            return match.group(1)
    return None


def extract_source(
    source: Path, version: str, dest_root: Path, tag_override: str | None = None
) -> tuple[Path, str | None, str]:
    """Put trl's tests (and its pyproject.toml, for pytest's options) for ``version`` under ``dest_root``.

    Returns (the folder holding ``tests/``, the tag or None, a note on where they came from).
    ``tag_override`` takes that tag whatever the installed version (the note says so).
    """
    gdir = git_dir(source)
    if gdir is None:
        if not (source / "tests").is_dir():
            raise RuntimeError(f"{source} is neither a git directory nor a trl tree with tests/")
        return source, None, f"the tree {source} as it is (no git: tag unknown)"
    tags = list_tags(gdir)
    tag = tag_override or choose_tag(version, tags)
    if tag_override and tag_override not in tags:
        raise RuntimeError(f"tag {tag_override} is not in {source}")
    if tag is None:
        known = sorted((t for t in tags if _version_key(t[1:]) is not None), key=lambda t: _version_key(t[1:]))
        head = source_version(gdir, "HEAD")
        raise RuntimeError(
            f"no tag for trl {version} in {source} (newest tag {known[-1] if known else 'none'}, "
            f"HEAD is trl {head or 'unknown'})"
        )
    dest = dest_root / f"trl-{tag}"
    done = dest / ".extracted"
    if not done.exists():
        shutil.rmtree(dest, ignore_errors=True)
        dest.mkdir(parents=True)
        paths = ["tests"] + [p for p in ("pyproject.toml", "setup.cfg") if _git_has(gdir, tag, p)]
        archive = _git(gdir, "archive", "--format=tar", tag, *paths, binary=True)
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(dest, filter="data")
        done.write_text(tag)
    forced = f" (forced with --tag; installed trl is {version})" if tag_override else ""
    return dest, tag, f"git tag {tag} of {source}{forced}"


def _git_has(gdir: Path, ref: str, path: str) -> bool:
    try:
        _git(gdir, "cat-file", "-e", f"{ref}:{path}")
        return True
    except RuntimeError:
        return False


def pytest_config_file(src: Path) -> Path:
    """trl's pyproject.toml when it has pytest options (markers, filterwarnings), else an empty ini.

    Either way explicit, so pytest never walks up to another project's configuration."""
    import tomllib

    pyproject = src / "pyproject.toml"
    if pyproject.is_file():
        with contextlib.suppress(ValueError):
            if "ini_options" in tomllib.loads(pyproject.read_text()).get("tool", {}).get("pytest", {}):
                return pyproject
    ini = src / "pytest.ini"
    ini.write_text("[pytest]\n")
    return ini


# --------------------------------------------------------------------------------------------------
# Offline Hub assets


def zen_lines() -> list[str]:
    """The 19 aphorisms of the Zen of Python (PEP 20), from the standard library's ``this``."""
    import codecs

    with contextlib.redirect_stdout(io.StringIO()):
        import this
    text = codecs.decode(this.s, "rot13")
    return [line.strip() for line in text.splitlines()[2:] if line.strip()]


def zen_configs(lines: list[str] | None = None) -> dict[str, list[dict[str, Any]]]:
    """Rows of every ``trl-internal-testing/zen`` config, in the column layout trl's tests expect."""
    lines = lines or zen_lines()
    rows: dict[str, list[dict[str, Any]]] = {}

    def add(config: str, row: dict[str, Any]) -> None:
        rows.setdefault(config, []).append(row)

    for i, line in enumerate(lines):
        words = line.split()
        cut = max(1, len(words) // 2)
        prompt, rest = " ".join(words[:cut]), " ".join(words[cut:])
        wrong = " ".join(reversed(words[cut:]))
        question = f"How does this line go on: {prompt}"
        user = [{"role": "user", "content": question}]
        good, bad = [{"role": "assistant", "content": rest}], [{"role": "assistant", "content": wrong}]
        half = max(1, (len(words) - cut) // 2)
        steps = [" ".join(words[cut : cut + half]), " ".join(words[cut + half :]) or "."]
        add("standard_language_modeling", {"text": line})
        add("standard_prompt_only", {"prompt": prompt})
        add("standard_prompt_completion", {"prompt": prompt, "completion": " " + rest})
        add("standard_preference", {"prompt": prompt, "chosen": " " + rest, "rejected": " " + wrong})
        add("standard_implicit_prompt_preference", {"chosen": line, "rejected": f"{prompt} {wrong}"})
        add("standard_unpaired_preference", {"prompt": prompt, "completion": " " + rest, "label": i % 3 != 1})
        add("standard_stepwise_supervision", {"prompt": prompt, "completions": steps, "labels": [True, i % 2 == 0]})
        add("conversational_language_modeling", {"messages": user + good})
        add("conversational_prompt_only", {"prompt": user})
        add("conversational_prompt_completion", {"prompt": user, "completion": good})
        add("conversational_preference", {"prompt": user, "chosen": good, "rejected": bad})
        add("conversational_implicit_prompt_preference", {"chosen": user + good, "rejected": user + bad})
        add("conversational_unpaired_preference", {"prompt": user, "completion": good, "label": i % 3 != 1})
    return rows


def write_zen(directory: Path, train_rows: int = ZEN_TRAIN_ROWS) -> None:
    """The zen data set as a local folder: one jsonl per config and split, configs in README.md.

    The test split is the last ZEN_TEST_ROWS lines (as trl's: the last 10 %, unshuffled), the train
    split the first ``train_rows`` of the others."""
    configs = zen_configs()
    if not 1 <= train_rows <= len(zen_lines()) - ZEN_TEST_ROWS:
        raise ValueError(f"zen train rows must be 1 to {len(zen_lines()) - ZEN_TEST_ROWS}, not {train_rows}")
    readme = ["---", "configs:"]
    for config, rows in configs.items():
        (directory / config).mkdir(parents=True, exist_ok=True)
        readme += [f"- config_name: {config}", "  data_files:"]
        for split, part in (("train", rows[:train_rows]), ("test", rows[-ZEN_TEST_ROWS:])):
            path = directory / config / f"{split}.jsonl"
            path.write_text("".join(json.dumps(row) + "\n" for row in part))
            readme += [f"  - split: {split}", f"    path: {config}/{split}.jsonl"]
    readme += ["---", "", "The Zen of Python in the layouts of trl's test data set, built offline.", ""]
    (directory / "README.md").write_text("\n".join(readme))


def write_seqcls(causal: Path, out: Path, seed: int = 0) -> None:
    """The causal model's sequence-classification twin: same backbone, one label, a seeded score head."""
    import torch
    from transformers import AutoModelForSequenceClassification
    from transformers.utils import logging

    verbosity = logging.get_verbosity()
    logging.set_verbosity_error()  # "score.weight newly initialized": on purpose, set below
    try:
        with torch.random.fork_rng(devices=[]):
            model = AutoModelForSequenceClassification.from_pretrained(str(causal), num_labels=1)
    finally:
        logging.set_verbosity(verbosity)
    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        model.score.weight.normal_(0.0, 0.02, generator=gen)
    model.config.pad_token_id = model.config.pad_token_id if model.config.pad_token_id is not None else 0
    model.save_pretrained(str(out))
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        if (causal / name).exists():
            shutil.copy(causal / name, out / name)
    for path in out.iterdir():
        path.chmod(0o644)


def _asset_ready(directory: Path, stamp: dict[str, Any]) -> bool:
    try:
        return json.loads((directory / ASSET_MARKER).read_text()) == stamp
    except (OSError, ValueError):
        return False


def _ensure_asset(directory: Path, stamp: dict[str, Any], build: Any) -> None:
    """``build(directory)`` into an empty folder unless its marker holds ``stamp``; the marker last."""
    if _asset_ready(directory, stamp):
        return
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    build(directory)
    (directory / ASSET_MARKER).write_text(json.dumps(stamp))


def build_assets(
    hub_root: Path, zen_train_rows: int = ZEN_TRAIN_ROWS, qwen_vocab: bool = False
) -> tuple[dict[str, str], dict[str, str]]:
    """The Hub folders under ``hub_root`` (pytest's working directory); rebuilt when their recipe or
    the transformers version that built them changes. ``qwen_vocab``: the tiny Qwen3 models too.
    Returns ({hub id: what it is}, {hub id: why it was not built})."""
    import transformers

    from grpo_compat.testing.tiny_model import build_tiny_qwen2

    stamp = {"recipe": ASSET_RECIPE, "transformers": transformers.__version__}
    hub_root.mkdir(parents=True, exist_ok=True)
    with open(hub_root / ".assets.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        causal = hub_root / CAUSAL_ID
        _ensure_asset(causal, stamp, functools.partial(build_tiny_qwen2, seed=0))
        _ensure_asset(hub_root / SEQCLS_ID, stamp, functools.partial(write_seqcls, causal))
        if _vllm_installed():
            head64 = functools.partial(build_tiny_qwen2, seed=0, architecture="qwen2-head64")
            _ensure_asset(hub_root / VLLM_MODEL_ID, stamp, head64)
        zen_stamp = {**stamp, "train_rows": zen_train_rows}
        _ensure_asset(hub_root / ZEN_ID, zen_stamp, functools.partial(write_zen, train_rows=zen_train_rows))
        qwen_assets, unbuilt = build_qwen_vocab_assets(hub_root, stamp) if qwen_vocab else ({}, {})
    vllm_assets = {VLLM_MODEL_ID: 'build_tiny_qwen2(seed=0, architecture="qwen2-head64")'} if _vllm_installed() else {}
    assets = {
        **vllm_assets,
        CAUSAL_ID: "grpo_compat.testing.tiny_model.build_tiny_qwen2(seed=0)",
        SEQCLS_ID: "its AutoModelForSequenceClassification twin (num_labels=1)",
        ZEN_ID: f"the Zen of Python, jsonl, {zen_train_rows} train / {ZEN_TEST_ROWS} test rows, configs: "
        + ", ".join(zen_configs()),
        **qwen_assets,
    }
    return assets, unbuilt


def build_qwen_vocab_assets(hub_root: Path, stamp: dict[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
    """The tiny Qwen3 models on Qwen's vocabulary (under the caller's lock). Without the vocabulary (PyPI out of
    reach) or trl's Qwen3 chat template, none is built and each id says why."""
    from grpo_compat.testing import qwen_vocab

    try:
        tiktoken = ensure_qwen_tiktoken()
        chat_template = trl_chat_template("qwen3")
    except RuntimeError as error:
        return {}, dict.fromkeys(QWEN_VOCAB_IDS, str(error))
    qwen3, moe, seqcls = (hub_root / i for i in QWEN_VOCAB_IDS)
    qwen_stamp = {**stamp, "vocabulary": qwen_vocab.TIKTOKEN_SHA256[:16]}
    for directory, architecture in ((qwen3, "qwen3"), (moe, "qwen3-moe")):
        build = functools.partial(
            qwen_vocab.build_tiny_qwen3, tiktoken_path=tiktoken, chat_template=chat_template, architecture=architecture
        )
        _ensure_asset(directory, qwen_stamp, build)
    _ensure_asset(seqcls, qwen_stamp, functools.partial(write_seqcls, qwen3))
    source = f"Qwen's BPE vocabulary ({' '.join(qwen_vocab.QWEN_AGENT)}'s qwen.tiktoken) and trl's qwen3.jinja"
    return {
        QWEN3_ID: f"grpo_compat.testing.qwen_vocab.build_tiny_qwen3(seed=0): {source}",
        QWEN3_MOE_ID: f'build_tiny_qwen3(architecture="qwen3-moe", seed=0): {source}',
        QWEN3_SEQCLS_ID: "the tiny Qwen3's AutoModelForSequenceClassification twin (num_labels=1)",
    }, {}


def ensure_qwen_tiktoken() -> Path:
    """qwen-agent's ``qwen.tiktoken`` (Qwen's BPE ranks), fetched from PyPI once (``uv pip install --no-deps
    --target``) into QWEN_VOCAB_DIR; RuntimeError saying why when it cannot be had."""
    from grpo_compat.testing import qwen_vocab

    name, version = qwen_vocab.QWEN_AGENT
    target = QWEN_VOCAB_DIR / f"{name}-{version}"
    path = target / qwen_vocab.TIKTOKEN_MEMBER

    def verified() -> bool:
        return path.is_file() and qwen_vocab.tiktoken_digest(path) == qwen_vocab.TIKTOKEN_SHA256

    failed = _install_into(target, [f"{name}=={version}"], verified)
    if failed is not None:
        last = (failed.strip().splitlines() or ["no message"])[-1]
        raise RuntimeError(f"Qwen's vocabulary ({name}=={version} from PyPI) could not be fetched: {last}")
    if not verified():
        raise RuntimeError(f"{name}=={version} has no {qwen_vocab.TIKTOKEN_MEMBER} of the expected sha256")
    return path


def trl_chat_template(name: str) -> str:
    """A chat template the installed trl ships (trl recognises a template by its exact text)."""
    from grpo_compat.testing.multi_turn import shipped_chat_template

    template = shipped_chat_template(name)
    if template is None:
        raise RuntimeError(f"trl {_installed('trl')} ships no chat_templates/{name}.jinja")
    return template


def _vllm_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("vllm") is not None


# --------------------------------------------------------------------------------------------------
# Test dependencies


def _installed(distribution: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def ensure_test_deps(python: str = sys.executable) -> tuple[Path | None, dict[str, str]]:
    """Install the pins of TEST_DEPS that this interpreter lacks into a target folder (for PYTHONPATH).

    Returns (the folder, or None when nothing is missing; {distribution: "env X" | "target X"})."""
    where = {}
    missing = {}
    for name, version in TEST_DEPS.items():
        present = _installed(name)
        if present is None:
            missing[name] = version
            where[name] = f"target {version}"
        else:
            where[name] = f"env {present}"
    if not missing:
        return None, where
    pins = sorted(f"{name}=={version}" for name, version in missing.items())
    tag = f"py{sys.version_info.major}.{sys.version_info.minor}"
    digest = hashlib.sha256(json.dumps([tag, pins]).encode()).hexdigest()[:12]
    target = TESTDEPS_DIR / f"{tag}-{digest}"
    marker = target / ".upstream-suite-testdeps"
    listed = " ".join(pins)

    def ready() -> bool:
        return marker.exists() and marker.read_text() == listed

    failed = _install_into(target, pins, ready, python, installed=lambda: marker.write_text(listed))
    if failed is not None:
        raise RuntimeError(f"installing test dependencies failed: {failed.strip()[-2000:]}")
    return target, where


def _install_into(
    target: Path, pins: list[str], ready: Any, python: str = sys.executable, installed: Any = None
) -> str | None:
    """``pins`` installed without their dependencies into the folder ``target`` (``uv pip install --target``),
    unless ``ready()``, one process at a time, then ``installed()`` under the same lock; uv's error output when it
    fails (the folder is then removed)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f"{target.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if ready():
            return None
        shutil.rmtree(target, ignore_errors=True)
        from grpo_compat.matrix.envs import uv_command

        command = [*uv_command(), "pip", "install", "--quiet", "--no-deps", "--python", python, "--target", str(target)]
        result = subprocess.run([*command, *pins], capture_output=True, text=True, check=False)
        if result.returncode != 0:
            shutil.rmtree(target, ignore_errors=True)
            return result.stderr or "no message"
        if installed is not None:
            installed()
    return None


# --------------------------------------------------------------------------------------------------
# One pass


def count(tests: dict[str, dict[str, Any]]) -> dict[str, int]:
    counts = dict.fromkeys(OUTCOMES, 0)
    counts["none"] = 0
    for entry in tests.values():
        counts[entry.get("outcome") or "none"] = counts.get(entry.get("outcome") or "none", 0) + 1
    counts["selected"] = len(tests)
    counts["with_loss"] = sum(1 for entry in tests.values() if entry.get("final_loss") is not None)
    if not counts["none"]:
        del counts["none"]
    return counts


def default_scratch(trl_version: str) -> Path:
    import transformers

    return REPO / ".matrix" / "upstream" / f"trl-{trl_version}-tf-{transformers.__version__}"


def run_pass(
    mode: str,
    suite: str,
    source: Path,
    output: Path,
    keyword: str | None = None,
    scratch: Path | None = None,
    timeout_s: int = 600,
    extra_pytest_args: list[str] | None = None,
    tag: str | None = None,
    zen_train_rows: int = ZEN_TRAIN_ROWS,
    qwen_vocab: bool = False,
) -> dict[str, Any]:
    """Run one pass of trl's suite and write its result JSON to ``output``; returns the result."""
    started = time.time()
    trl_version = _installed("trl") or "missing"
    result: dict[str, Any] = {
        "status": "error",
        "mode": mode,
        "suite": suite,
        "trl": trl_version,
        "tag": None,
        "transformers": _installed("transformers"),
        "python": sys.executable,
        "keyword": keyword,
        "zen_train_rows": zen_train_rows,
        "qwen_vocab": qwen_vocab,
        "tests": {},
        "counts": {},
        "summary": "",
    }
    try:
        if trl_version == "missing":
            raise RuntimeError(f"trl is not installed in {sys.executable}")
        scratch = (scratch or default_scratch(trl_version)).resolve()
        scratch.mkdir(parents=True, exist_ok=True)
        src, used_tag, origin = extract_source(source.resolve(), trl_version, scratch, tag)
        result.update(tag=used_tag, source=origin, scratch=str(scratch))
        test_file = src / SUITES[suite]
        if not test_file.is_file():
            raise RuntimeError(f"{SUITES[suite]} is not in {origin}")
        hub_root = scratch / "hub"
        result["assets"], result["unbuilt"] = build_assets(hub_root, zen_train_rows, qwen_vocab)
        deps_dir, result["test_deps"] = ensure_test_deps()
        plugin_dir = scratch / "plugin"
        plugin_dir.mkdir(exist_ok=True)
        link = plugin_dir / PLUGIN_FILE.name
        if not (link.is_symlink() and link.resolve() == PLUGIN_FILE):
            link.unlink(missing_ok=True)
            link.symlink_to(PLUGIN_FILE)
        raw = scratch / f"raw-{suite}-{mode}.json"
        raw.unlink(missing_ok=True)
        log = scratch / f"pytest-{suite}-{mode}.log"
        basetemp = scratch / f"tmp-{suite}-{mode}"
        hf_home = scratch / f"hf-home-{suite}-{mode}"
        for folder in (basetemp, hf_home):
            shutil.rmtree(folder, ignore_errors=True)
        env = dict(os.environ)
        for key in [k for k in env if k.startswith(("PYTEST_", "GRPO_COMPAT_DISABLE"))]:
            del env[key]
        env.update(
            PYTHONPATH=os.pathsep.join(str(p) for p in (plugin_dir, deps_dir) if p is not None),
            PYTEST_DISABLE_PLUGIN_AUTOLOAD="1",
            UPSTREAM_SUITE_MODE=mode,
            UPSTREAM_SUITE_SUITE=suite,
            UPSTREAM_SUITE_RAW=str(raw),
            HF_HUB_OFFLINE="1",
            HF_DATASETS_OFFLINE="1",
            TRANSFORMERS_OFFLINE="1",
            # Fresh per pass: datasets' cache key for a local folder leaves the files' contents out.
            HF_HOME=str(hf_home),
            HF_HUB_DISABLE_TELEMETRY="1",
            WANDB_MODE="disabled",
            TOKENIZERS_PARALLELISM="false",
            CUDA_VISIBLE_DEVICES="",
            UPSTREAM_SUITE_QWEN_VOCAB=",".join(i for i in QWEN_VOCAB_IDS if i in result["assets"]),
            UPSTREAM_SUITE_UNBUILT=json.dumps(result["unbuilt"]),
        )
        if _vllm_installed():  # vLLM's CPU engine reserves this many GiB of KV cache (its default, 4, is a lot here)
            env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
            env["UPSTREAM_SUITE_VLLM_ON_CPU"] = "1"  # the plugin lifts the GPU gate of trl's colocate vLLM test
        command = [
            sys.executable,
            "-m",
            "pytest",
            str(test_file),  # absolute: pytest runs in hub_root, where the Hub ids resolve
            "-c",
            str(pytest_config_file(src)),
            "--rootdir",
            str(src),
            "-p",
            PLUGIN_MODULE,
            "-p",
            "no:cacheprovider",
            *[arg for plugin in PYTEST_PLUGINS for arg in ("-p", plugin)],
            f"--timeout={timeout_s}",
            f"--basetemp={basetemp}",
            "-q",
            "-rfE",
            "--tb=short",
            "--color=no",
        ]
        if keyword:
            command += ["-k", keyword]
        command += extra_pytest_args or []
        result["command"] = f"cd {hub_root} && " + " ".join(command)
        with log.open("w") as out:
            out.write("$ " + " ".join(command) + "\n")
            out.flush()
            completed = subprocess.run(command, cwd=hub_root, env=env, stdout=out, stderr=subprocess.STDOUT)
        result["pytest_exit"] = completed.returncode
        result["log"] = str(log)
        shutil.rmtree(basetemp, ignore_errors=True)  # the tests' checkpoints; the log stays
        if not raw.exists():
            raise RuntimeError(f"pytest exited {completed.returncode} without a record; see {log}:\n{_tail(log)}")
        record = json.loads(raw.read_text())
        tests = {nodeid: entry for nodeid, entry in record["tests"].items()}
        result.update(
            tests=tests,
            deselected=record["deselected"],
            collected=record["collected"],
            stray_runs=record["stray_runs"],
            bf16_defaults_turned_off=record["bf16_defaults_turned_off"],
            accelerator_gate_lifted=record.get("accelerator_gate_lifted", []),
            grpo_compat_report=record["grpo_compat_report"],
            patches_applied=applied_patches(record["grpo_compat_report"]),
        )
        result["counts"] = {**count(tests), "collected": record["collected"], "deselected": len(record["deselected"])}
        if completed.returncode not in (0, 1):  # 2 interrupted, 3 internal error, 4 usage, 5 no tests
            raise RuntimeError(f"pytest exited {completed.returncode}; see {log}:\n{_tail(log)}")
        result["status"] = "ok"
    except Exception as error:  # noqa: BLE001 - any failure is a result to record
        result["error"] = f"{type(error).__name__}: {error}"
    result["wall_s"] = round(time.time() - started, 1)
    result["summary"] = summarize(result)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(result, indent=1, sort_keys=True, allow_nan=True))
    return result


def applied_patches(report: str | None) -> list[str] | None:
    """The patch ids that grpo_compat's report lists as applied (None for a plain pass)."""
    if report is None:
        return None
    return re.findall(r"^\s+(\S+)\s+applied\b", report, flags=re.MULTILINE)


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "".join(path.read_text(errors="replace").splitlines(keepends=True)[-lines:])
    except OSError:
        return ""


def summarize(result: dict[str, Any]) -> str:
    head = f"trl {result.get('trl')} (tag {result.get('tag')}) {result.get('suite')} {result.get('mode')}"
    if result.get("status") != "ok":
        return f"{head}: error: {result.get('error', '?').splitlines()[0]}"
    c = result["counts"]
    outcomes = ", ".join(f"{c[k]} {k}" for k in OUTCOMES if c.get(k))
    return (
        f"{head}: {c['selected']} run ({outcomes}); {c['deselected']} of {c['collected']} deselected; "
        f"{c['with_loss']} with a final loss; {result.get('wall_s')} s"
    )


# --------------------------------------------------------------------------------------------------
# Comparison


def same_loss(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is b
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


# trl tests that expect trl's own error after the model loaded, for a cause grpo_compat refuses before it loads (the
# point of the refusal): patched they fail with that refusal, which is no difference. Test name -> the refusal.
REFUSED_EARLIER = {
    # every example names an environment the dict lacks: trl fails at the first batch (ValueError from train())
    "test_train_with_unknown_environment_raises": r"GRPOSettingsError: \d+ example\(s\) of the dataset name an "
    r"environment environment_factory lacks",
}


def refused_earlier(nodeid: str, plain: dict[str, Any], patched: dict[str, Any]) -> bool:
    """Whether a test that passed plain failed patched only by grpo_compat's declared earlier refusal."""
    refusal = REFUSED_EARLIER.get(nodeid.rpartition("::")[2].split("[")[0])
    return (
        refusal is not None
        and (plain.get("outcome"), patched.get("outcome")) == ("passed", "failed")
        and re.search(refusal, patched.get("message") or "") is not None
    )


def compare(plain: dict[str, Any], patched: dict[str, Any]) -> list[str]:
    """Every difference between two results that must agree: per test, outcome and final loss; the
    set of tests run and deselected; trl, tag and suite. Empty when they agree. A declared earlier
    refusal (REFUSED_EARLIER) is no difference."""
    differences = []
    for key in ("trl", "tag", "suite", "keyword", "zen_train_rows", "qwen_vocab"):
        if plain.get(key) != patched.get(key):
            differences.append(f"{key}: {plain.get(key)!r} != {patched.get(key)!r}")
    for name, result in (("plain", plain), ("patched", patched)):
        if result.get("status") != "ok":
            differences.append(f"{name} pass: status {result.get('status')}: {result.get('error', '')}".strip())
    a, b = plain.get("tests", {}), patched.get("tests", {})
    for nodeid in sorted(set(a) | set(b)):
        if nodeid not in b:
            differences.append(f"{nodeid}: only in plain ({a[nodeid].get('outcome')})")
            continue
        if nodeid not in a:
            differences.append(f"{nodeid}: only in patched ({b[nodeid].get('outcome')})")
            continue
        x, y = a[nodeid], b[nodeid]
        if refused_earlier(nodeid, x, y):
            continue
        if x.get("outcome") != y.get("outcome"):
            detail = y.get("message") or x.get("message") or ""
            differences.append(f"{nodeid}: outcome {x.get('outcome')} -> {y.get('outcome')}: {detail}".rstrip(": "))
        if not same_loss(x.get("final_loss"), y.get("final_loss")):
            differences.append(f"{nodeid}: final loss {x.get('final_loss')!r} -> {y.get('final_loss')!r}")
    da, db = plain.get("deselected", {}), patched.get("deselected", {})
    for nodeid in sorted(set(da) ^ set(db)):
        differences.append(f"{nodeid}: deselected only in {'plain' if nodeid in da else 'patched'}")
    return differences


def compare_files(plain_path: Path, patched_path: Path, out=sys.stdout, summaries: bool = True) -> int:
    plain, patched = (json.loads(Path(p).read_text()) for p in (plain_path, patched_path))
    differences = compare(plain, patched)
    if summaries:
        print(plain.get("summary", ""), file=out)
        print(patched.get("summary", ""), file=out)
    if differences:
        print(f"{len(differences)} difference(s) between plain and patched:", file=out)
        for line in differences:
            print(f"  {line}", file=out)
        return 1
    n = len(plain.get("tests", {}))
    print(f"identical: {n} tests, every outcome and final loss the same", file=out)
    return 0


# --------------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["compare"]:
        parser = argparse.ArgumentParser(prog="upstream_suite.py compare", description="plain vs patched results")
        parser.add_argument("plain", type=Path)
        parser.add_argument("patched", type=Path)
        args = parser.parse_args(argv[1:])
        return compare_files(args.plain, args.patched)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", choices=("plain", "patched", "both"), required=True)
    parser.add_argument("--suite", choices=sorted(SUITES), required=True)
    parser.add_argument("--source", type=Path, required=True, help="trl git directory (bare or checkout) or tree")
    parser.add_argument(
        "--output", type=Path, required=True, help="result JSON (both: X.plain.json, X.patched.json, X.json)"
    )
    parser.add_argument("--keyword", "-k", help="pytest -k expression (same in both passes)")
    parser.add_argument("--scratch", type=Path, help="working folder (default .matrix/upstream/trl-<v>-tf-<v>)")
    parser.add_argument("--timeout", type=int, default=600, help="per-test time limit in seconds")
    parser.add_argument("--tag", help="use this trl tag instead of the one matching the installed trl")
    parser.add_argument(
        "--zen-train-rows", type=int, default=ZEN_TRAIN_ROWS, help="train rows of the local zen data set (trl's: 17)"
    )
    parser.add_argument(
        "--qwen-vocab",
        action="store_true",
        help="build trl's tiny Qwen3 models on Qwen's real vocabulary (fetched from PyPI once): its tool tests",
    )
    args = parser.parse_args(argv)
    common = dict(
        suite=args.suite,
        source=args.source,
        keyword=args.keyword,
        scratch=args.scratch,
        tag=args.tag,
        zen_train_rows=args.zen_train_rows,
        qwen_vocab=args.qwen_vocab,
    )
    if args.mode != "both":
        result = run_pass(args.mode, output=args.output, timeout_s=args.timeout, **common)
        print(result["summary"])
        return 0 if result["status"] == "ok" else 1
    stem = args.output.with_suffix("")
    paths = {mode: stem.with_name(f"{stem.name}.{mode}.json") for mode in ("plain", "patched")}
    results = {}
    for mode, path in paths.items():  # one pass at a time
        results[mode] = run_pass(mode, output=path, timeout_s=args.timeout, **common)
        print(results[mode]["summary"], flush=True)
    differences = compare(results["plain"], results["patched"])
    comparison = {
        "status": "ok" if not differences else "error",
        "suite": args.suite,
        "trl": results["plain"]["trl"],
        "tag": results["plain"]["tag"],
        "differences": differences,
        "plain": {k: results["plain"].get(k) for k in ("summary", "counts", "wall_s")},
        "patched": {k: results["patched"].get(k) for k in ("summary", "counts", "wall_s")},
        "files": {mode: str(path) for mode, path in paths.items()},
    }
    args.output.write_text(json.dumps(comparison, indent=1))
    return compare_files(paths["plain"], paths["patched"], summaries=False)


if __name__ == "__main__":
    sys.exit(main())
