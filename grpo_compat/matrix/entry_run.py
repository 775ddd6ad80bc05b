"""Run one entry of a user's matrix inside a cell env, plainly or with grpo_compat, and write its result JSON.

    python -m grpo_compat.matrix.entry_run --mode patched --output result.json --scratch DIR -- python train.py

The runner (grpo_compat.matrix.runner) starts this with the cell's interpreter; the entry's output goes to
the run's log unchanged. The result says whether it exited 0 and, when it did not, the error line; what the
entry itself wrote to $GRPO_COMPAT_MATRIX_RESULT (grpo_compat.matrix.entries.RESULT_KEYS) is merged in.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from grpo_compat.matrix.launchers import accelerate_launch, error_of, torchrun
from grpo_compat.testing.smoke import free_port


def error_line(tail: list[str], exit_code: int) -> str:
    """The line of the first exception a rank raised (launchers.error_of), else a command line's last "error:"
    line, else the exit status."""
    exception = error_of("\n".join(tail))
    if exception:
        return exception.splitlines()[0]
    cli_errors = [line.strip() for line in tail if line.strip().startswith("error:")]
    return (cli_errors or [f"exited with status {exit_code}"])[-1]


def command_line(
    kind: str, command: list[str], mode: str, processes: int, launcher: str, output_dir: Path
) -> list[str]:
    """The entry's command in this env: its interpreter and tools, its launcher, grpo_compat's plugin if patched."""
    here = Path(sys.executable).parent
    first, rest = command[0], command[1:]
    if first == "python":
        program = [sys.executable]
    else:
        tool = shutil.which(first, path=str(here)) or shutil.which(first)
        if tool is None:
            raise FileNotFoundError(f"`{first}` is not installed in this cell's env ({here})")
        program = [tool]
    if kind == "swift_args" and mode == "patched":
        from grpo_compat.swift_plugin import plugin_path

        if "--external_plugins" in rest:  # the user's plugins stay; grpo_compat's is loaded first
            at = rest.index("--external_plugins") + 1
            rest = [*rest[:at], str(plugin_path()), *rest[at:]]
        else:
            rest = [*rest, "--external_plugins", str(plugin_path())]
    if kind == "trl_config":  # each run writes its own model (a config's output_dir would be shared)
        rest = [*rest, "--output_dir", str(output_dir)]
    if kind == "script" and processes > 1:
        if launcher == "torchrun":
            return [*torchrun(Path(sys.executable), processes), *rest]
        return [*accelerate_launch(Path(sys.executable), processes), "--multi_gpu", *rest]
    return [*program, *rest]


def environment(args: argparse.Namespace, result_file: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(item.split("=", 1) for item in args.env)
    env.update(
        GRPO_COMPAT_MATRIX_RESULT=str(result_file),
        GRPO_COMPAT_MATRIX_MODE=args.mode,
        GRPO_COMPAT_MATRIX_SCRATCH=str(args.scratch),
    )
    if args.kind == "swift_args" and args.processes > 1:
        env.update(NPROC_PER_NODE=str(args.processes), MASTER_PORT=str(free_port()))
    if args.mode == "patched" and args.kind != "swift_args":
        from grpo_compat.startup import environment as zero_code_environment

        env = zero_code_environment(strict=False, only=[], skip=[], base=env)
    return env


def run_entry(args: argparse.Namespace) -> dict:
    args.scratch.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(args.scratch / "output", ignore_errors=True)  # nothing of an earlier run is taken for this one's
    result_file = args.scratch / "entry-result.json"
    result_file.unlink(missing_ok=True)
    record: dict = {"mode": args.mode, "command": args.command}
    try:
        argv = command_line(args.kind, args.command, args.mode, args.processes, args.launcher, args.scratch / "output")
    except FileNotFoundError as error:
        return {**record, "status": "error", "error": str(error), "exit_code": None}
    print("$ " + " ".join(argv), flush=True)
    tail: collections.deque[str] = collections.deque(maxlen=200)
    process = subprocess.Popen(
        argv, env=environment(args, result_file), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert process.stdout is not None
    for line in process.stdout:
        sys.stdout.write(line)
        tail.append(line.rstrip("\n"))
    exit_code = process.wait()
    record.update(status="ok" if exit_code == 0 else "error", exit_code=exit_code, command=argv)
    record["error"] = None if exit_code == 0 else error_line(list(tail), exit_code)
    saved = sorted((args.scratch / "output").glob("*.safetensors"))
    if exit_code == 0 and saved:  # `trl grpo` saved the model: a patched run is compared with the plain one
        digest = hashlib.sha256()
        for path in saved:
            digest.update(path.read_bytes())
        record["weights_sha256"] = digest.hexdigest()
    if result_file.exists():
        try:
            reported = json.loads(result_file.read_text())
        except ValueError as error:
            reported = {"result_file_error": f"{result_file}: not JSON: {error}"}
        if isinstance(reported, dict):
            record = {**reported, **record}  # the exit status is the runner's word, not the script's
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", choices=("plain", "patched"), required=True)
    parser.add_argument("--output", type=Path, required=True)
    parser.add_argument("--scratch", type=Path, required=True)
    parser.add_argument("--kind", choices=("script", "trl_config", "swift_args"), default="script")
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--launcher", choices=("accelerate", "torchrun"), default="accelerate")
    parser.add_argument("--env", action="append", default=[], help="KEY=VALUE for the entry's environment")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    args.command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not args.command:
        parser.error("give the entry's command after --")
    record = run_entry(args)
    args.output.write_text(json.dumps(record, indent=2) + "\n")
    return 0 if record["status"] == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
