"""Every output sample the README and the documentation pages show is what the program prints here.

A sample is a ```text block right after a ``<!-- sample: NAME -->`` line; each NAME is produced below, in .venv
(trl 1.16.0, transformers 5.23.0, DeepSpeed 0.19.8: the versions the README names), and every line of the block
must be a whole line of that output. A ```text block without a marker fails the test: a new sample comes with its
producer. A block marked ``<!-- quoted: where and when it ran -->`` is the output of a run in another environment
(an older cell's files, a release newer than this env's), shown as a dated quote. Not covered: generated pages
(docs/failures.md, docs/index.md: the README's own samples) and the dated write-ups of docs/investigations/ and
docs/known_failures.md, which quote the logs of their day.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable
from textwrap import dedent

import pytest

from tests.helpers import REPO, run_python

HAND_WRITTEN = [
    REPO / "README.md",
    *sorted(
        page
        for page in (REPO / "docs").glob("*.md")
        if page.name not in ("index.md", "failures.md", "known_failures.md")
    ),
]
# A block may sit indented in a list item; its marker then has the same indentation.
SAMPLE = re.compile(r"(?:<!-- (sample|quoted): ([^\n]+?) -->\n[ \t]*)?```text\n(.*?)```", re.S)
USER_SCRIPT = REPO / "tests" / "user_scripts" / "train_grpo.py"


def samples() -> list[tuple[str, str | None, str]]:
    """(page, sample name or None, the block's text, unindented) of every ```text block of the hand-written pages
    that is not a quote (``<!-- quoted: where and when it ran -->``: the output of a run in another environment,
    such as an older cell's files or a release newer than this env's, which a test here cannot produce)."""
    return [
        (str(page.relative_to(REPO)), match.group(2) if match.group(1) == "sample" else None, dedent(match.group(3)))
        for page in HAND_WRITTEN
        for match in SAMPLE.finditer(page.read_text())
        if match.group(1) != "quoted"
    ]


def startup_line() -> str:
    return run_python("import grpo_compat; grpo_compat.apply(); import trl.trainer.grpo_trainer").stderr


def settings_refusal() -> str:
    refused = run_python(
        """
        import grpo_compat; grpo_compat.apply()
        from trl import GRPOConfig
        GRPOConfig(output_dir="out", per_device_train_batch_size=3, num_generations=4, use_cpu=True, report_to="none")
        """
    )
    return refused.stderr


def check_settings_not_taken() -> str:
    command = [sys.executable, "-m", "grpo_compat", "check", "max_prompt_length=256", "num_generation=4"]
    return subprocess.run(command, capture_output=True, text=True, cwd=REPO, timeout=300).stdout


def _check(*arguments: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "grpo_compat", "check", *arguments]
    return subprocess.run(command, capture_output=True, text=True, cwd=REPO, timeout=300)


def check_unknown_release() -> str:
    """`check grpo.yaml --trl-version X` for a release the settings data does not hold, shown with its command."""
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as folder:
        config = Path(folder) / "grpo.yaml"
        config.write_text("per_device_train_batch_size: 4\nnum_generations: 4\n")
        shown = []
        for version in ("1.17.0", "0.16"):
            shown += [
                f"$ grpo-compat check grpo.yaml --trl-version {version}",
                _check(str(config), "--trl-version", version).stderr,
            ]
    return "\n".join(shown)


def check_bf16_without_a_gpu() -> str:
    """A config naming no bf16, checked on this CPU-only machine (trl 1.16 turns bf16 on; transformers refuses it)."""
    return _check("per_device_train_batch_size=4", "num_generations=4").stdout


def check_from_bias_correction() -> str:
    return _check("--from", "trl==1.9.2", "beta=0.04", "use_cpu=True").stdout


def check_with_trl_0_29() -> str:
    """The what-if of trl 0.29.1 over this env, which has no requests (tests/test_check_with.py imports it)."""
    return _check("--with", "trl==0.29.1").stdout


FAST: dict[str, Callable[[], str]] = {
    "startup-line": startup_line,
    "settings-refusal": settings_refusal,
    "check-settings-not-taken": check_settings_not_taken,
    "check-unknown-release": check_unknown_release,
    "check-bf16-without-a-gpu": check_bf16_without_a_gpu,
    "check-from-bias-correction": check_from_bias_correction,
    "check-with-trl-0.29": check_with_trl_0_29,
}
SLOW = ("watchdog-lr-zero",)  # a training run: test_the_watchdog_sample_is_what_a_run_at_learning_rate_0_logs
# docs/quickstart.md's samples: its commands' output, checked where tests/test_quickstart.py runs them
SLOW += ("quickstart-run", "quickstart-check-refusal", "quickstart-explain")


def assert_shown_as_printed(name: str, output: str) -> None:
    printed = set(output.splitlines())
    for page, sample, text in samples():
        if sample == name:
            missing = [line for line in text.splitlines() if line not in printed]
            assert not missing, f"{page}'s sample {name} is not what the program prints:\n{missing}\n---\n{output}"


def test_every_output_sample_names_the_producer_that_checks_it():
    found = samples()
    unmarked = [page for page, name, _ in found if name is None]
    assert not unmarked, f"a ```text block without <!-- sample: NAME --> (and a producer here) in {unmarked}"
    unknown = {name for _, name, _ in found} - set(FAST) - set(SLOW)
    assert not unknown, f"samples without a producer in tests/test_doc_samples.py: {unknown}"


@pytest.mark.parametrize("name", sorted(FAST))
def test_a_sample_is_what_the_program_prints(name):
    assert_shown_as_printed(name, FAST[name]())


@pytest.mark.slow  # trains the tiny model for 2 steps
def test_the_watchdog_sample_is_what_a_run_at_learning_rate_0_logs(tmp_path):
    from grpo_compat.testing.tiny_model import build_tiny_qwen2

    model = build_tiny_qwen2(tmp_path / "tiny")
    command = [sys.executable, str(USER_SCRIPT), "--model", str(model), "--output", str(tmp_path / "r.json")]
    trained = subprocess.run(
        [*command, "--apply", "--learning-rate", "0"], capture_output=True, text=True, cwd=tmp_path, timeout=600
    )
    assert trained.returncode == 0, trained.stderr[-3000:]
    assert_shown_as_printed("watchdog-lr-zero", trained.stderr)
    assert_shown_as_printed("startup-line", trained.stderr)  # a training script's line, as the README shows it
