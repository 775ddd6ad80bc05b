"""docs/quickstart.md, as written: every command of the page runs, in the page's order, in one shell (a `cd`
carries over), and exits as the page's marker before its block says (``<!-- quickstart: exit N -->``); the page's
output samples (``<!-- sample: quickstart-... -->``) are lines that run printed. The commands are read from the
page, never retyped here. The install block (``<!-- quickstart: install -->``) is left to this env (.venv has trl
and this checkout); tests/test_readme_install.py installs grpo-compat in a fresh venv the README's ways.

A fresh machine's run, install included (docs/developing/quickstart-fresh-clone.log):

    python tests/test_quickstart.py --with-install [--replace OLD NEW]... > quickstart.sh && bash quickstart.sh
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PAGE = REPO / "docs" / "quickstart.md"
BLOCK = re.compile(r"<!-- quickstart: (install|exit (\d+)) -->\n```bash\n(.*?)```", re.S)
SAMPLE = re.compile(r"<!-- sample: (quickstart-[\w-]+) -->\n```text\n(.*?)```", re.S)


def quickstart_blocks(page: str) -> list[tuple[int | None, list[str]]]:
    """(the exit status the page gives its block, None for the install block; its command lines) in page order."""
    return [
        (int(status) if status else None, [line for line in text.splitlines() if line.strip()])
        for _, status, text in BLOCK.findall(page)
    ]


def quickstart_script(page: str, with_install: bool = False, replace: tuple[tuple[str, str], ...] = ()) -> str:
    """A bash script running the page's commands in order: after each line, its exit status against the block's;
    the first mismatch stops it (exit 99) naming the line."""
    lines = []
    for status, commands in quickstart_blocks(page):
        if status is None and not with_install:
            continue
        for command in commands:
            for old, new in replace:
                command = command.replace(old, new)
            quoted = shlex.quote(command)
            lines += [
                f'echo "\\$ "{quoted}; SECONDS=0',
                command,
                'found=$?; echo "[exit $found, $SECONDS s]"',
                f'[ "$found" -eq {status or 0} ] || {{ echo "quickstart: "{quoted}" exited $found, '
                f'the page says {status or 0}" >&2; exit 99; }}',
            ]
    return "\n".join(["set -u", *lines, ""])


def test_every_command_block_of_the_quickstart_says_how_it_exits():
    page = PAGE.read_text()
    marked = len(BLOCK.findall(page))
    assert marked == page.count("```bash"), "a ```bash block of docs/quickstart.md without <!-- quickstart: ... -->"
    statuses = [status for status, _ in quickstart_blocks(page)]
    assert statuses.count(None) == 1 and 0 in statuses and 1 in statuses  # installed, trained, refused


@pytest.mark.slow  # trains the tiny model for 2 steps (about 30 s in all)
def test_the_quickstart_runs_as_written_and_prints_its_samples(tmp_path):
    page = PAGE.read_text()
    environment = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    environment.update(
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{environment['PATH']}",  # this env's grpo-compat, python
        PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), environment.get("PYTHONPATH")])),
        HF_HUB_OFFLINE="1",  # nothing reads the Hub
    )
    done = subprocess.run(
        ["bash", "-c", quickstart_script(page)],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    printed = set((done.stdout + "\n" + done.stderr).splitlines())
    samples = SAMPLE.findall(page)
    assert samples
    for name, text in samples:
        missing = [line for line in text.splitlines() if line not in printed]
        assert not missing, f"docs/quickstart.md's sample {name} is not what the run printed: {missing}"
    assert (tmp_path / "grpo-quickstart" / "grpo.yaml").read_text().count("per_device_train_batch_size: 4") == 1


if __name__ == "__main__":
    arguments = sys.argv[1:]
    pairs = []
    while "--replace" in arguments:
        at = arguments.index("--replace")
        pairs.append((arguments[at + 1], arguments[at + 2]))
        del arguments[at : at + 3]
    sys.stdout.write(quickstart_script(PAGE.read_text(), "--with-install" in arguments, tuple(pairs)))
