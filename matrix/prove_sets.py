"""Measure plain `grpo-compat doctor` (a reading) against `doctor --prove` (a run) on the sets of
tests/fixtures/prove_sets.toml: each set built by uv from its pins (torch 2.13 CPU), sequentially.

    python -m matrix.prove_sets [--sets FILE] [--only NAME ...] [--output .matrix/prove-sets.jsonl]
    python -m matrix.prove_sets --what-if [--only NAME ...] [--output ...] [--what-if-output ...]

One JSON line per set: the resolved versions, plain doctor's findings and time (cold: a new set has no cached
reading), the run's verdict and failures, the fixes tried and whether they trained. Then the summary: precision and
recall of the reading against the run, and recall counting only proven fixes.

``--what-if``: the what-if (``check --requirements``, read from the API histories) on each measured set, from this
interpreter's env (not the set's): the set's env as it was built (every distribution and version it holds) written
as a uv lock, the whole set, so that nothing installed here leaks in. Its verdict (exit 1: would not train, 0: reads
clean) is set beside the run's from ``--output``; one JSON line per set, then the agreement.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import tomllib

from grpo_compat.matrix.envs import EnvBuildError, uv_command, uv_error
from grpo_compat.tools.prove import build_env

SETS = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "prove_sets.toml"
ALWAYS = ["torch==2.13.0+cpu", "datasets", "packaging", "PyYAML"]


def cli(python: Path, *arguments: str, timeout: float = 3600, env: dict | None = None
        ) -> tuple[subprocess.CompletedProcess, float]:  # fmt: skip
    started = time.monotonic()
    done = subprocess.run([str(python), "-m", "grpo_compat", *arguments], capture_output=True, text=True,
                          timeout=timeout, env=env)  # fmt: skip
    return done, round(time.monotonic() - started, 2)


def cold_doctor(python: Path) -> tuple[subprocess.CompletedProcess, float, float]:
    """Plain doctor with no grpo_compat cache (a fresh user cache folder): (its run, wall s, CPU s)."""
    with tempfile.TemporaryDirectory() as cache:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        done, wall = cli(python, "doctor", "--json", env={**os.environ, "XDG_CACHE_HOME": cache})
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return done, wall, round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 2)


def measure(entry: dict, reading_only: bool = False, fresh_fix_envs: bool = False) -> dict:
    record: dict = {"name": entry["name"], "pins": entry["pins"]}
    started = time.monotonic()
    try:
        python, resolved = build_env([*entry["pins"], *ALWAYS], progress=lambda m: print(f"  {m}", flush=True))
    except EnvBuildError as error:
        record["unresolvable"] = uv_error(error)
        return record
    record["build_s"] = round(time.monotonic() - started, 1)
    names = ("trl", "transformers", "ms-swift", "torch", "peft", "accelerate")
    record["versions"] = {name: resolved.get(name) for name in names}
    doctor, record["doctor_s"], record["doctor_cpu_s"] = cold_doctor(python)
    diagnosis = json.loads(doctor.stdout) if doctor.stdout.strip().startswith("{") else {}
    record["doctor_exit"] = doctor.returncode
    findings = diagnosis.get("static_check", [])
    record["doctor_findings"] = [f"{f['kind']}: {f['message']} -> {f['fix']}" for f in findings]
    record["doctor_errors"] = [p["message"] for p in diagnosis.get("problems", []) if p["severity"] == "error"]
    if reading_only:
        return record
    if fresh_fix_envs:  # time to a proven fix with a warm cache: uv's wheels cached, the fixes' envs not built yet
        with tempfile.TemporaryDirectory() as cache:
            uv_cache = subprocess.run([*uv_command(), "cache", "dir"], capture_output=True, text=True, check=True)
            fresh = {**os.environ, "XDG_CACHE_HOME": cache, "UV_CACHE_DIR": uv_cache.stdout.strip()}
            proved, record["prove_s"] = cli(python, "doctor", "--prove", "--json", env=fresh)
        record["fix_envs"] = "fresh"
    else:
        proved, record["prove_s"] = cli(python, "doctor", "--prove", "--json")
    proof = json.loads(proved.stdout) if proved.stdout.strip().startswith("{") else {}
    record["prove_exit"] = proved.returncode
    if not proof:
        record["prove_crash"] = (proved.stderr or proved.stdout)[-1500:]
        return record
    probe = proof["probe"]
    record["trains"] = bool(probe.get("trains"))
    record["phase"] = probe.get("phase")
    record["failures"] = [f"{f['kind']} {f['name']}: {f['error'][:300]} (at {f['where']}); reading: "
                          f"{'yes' if f.get('finding') else 'no'}" for f in proof["failures"]]  # fmt: skip
    record["fixes_tried"] = []
    for outcome in proof["fixes_tried"]:
        after = outcome.get("probe") or {}
        still = [m["name"] for m in after.get("missing", [])]
        if after.get("error"):
            still.append(f"{after['error']['type']}: {after['error']['message'][:200]} ({after.get('phase')})")
        kept = ("command", "trains", "seconds", "moved", "error", "lacking", "beside_the_run")
        tried = {k: outcome.get(k) for k in kept}
        record["fixes_tried"].append(tried | {"still": None if outcome["trains"] else still})
    return record


def write_lock(versions: dict[str, str], path: Path) -> Path:
    """``versions`` (a whole environment) as a uv lock: the form ``check --requirements`` reads as the whole set."""
    registry = '{ registry = "https://pypi.org/simple" }'
    packages = "".join(f'\n[[package]]\nname = "{name}"\nversion = "{version}"\nsource = {registry}\n'
                       for name, version in sorted(versions.items()))  # fmt: skip
    path.write_text("version = 1\n" + packages)
    return path


def what_if(entry: dict, folder: Path) -> dict:
    """The what-if's verdict on the set of ``entry`` (its env built, or found in the cache, by ``build_env``)."""
    from grpo_compat.tools.prove import installed_set

    record: dict = {"name": entry["name"]}
    try:
        python, _ = build_env([*entry["pins"], *ALWAYS], progress=lambda m: print(f"  {m}", flush=True))
    except EnvBuildError as error:
        record["unresolvable"] = uv_error(error)
        return record
    lock = write_lock(installed_set(str(python)), folder / f"{entry['name']}.lock")
    done, record["what_if_s"] = cli(Path(sys.executable), "check", "--requirements", str(lock), "--json")
    record["what_if_exit"] = done.returncode
    result = json.loads(done.stdout) if done.stdout.strip().startswith("{") else {}
    if not result:
        record["what_if_crash"] = (done.stderr or done.stdout)[-1500:]
        return record
    record["trainer"] = result["trainer"]
    found = result["import"] + result.get("build", []) + result.get("training", []) + result["requirements"]
    record["what_if_findings"] = [f"{f['kind']}: {f['message']}" for f in found]
    record["what_if_findings"] += [f"known import failure {f['id']}" for f in result["known_import_failures"]]
    return record


def agreement(what_ifs: list[dict], proofs: list[dict]) -> list[dict]:
    """Each set's run verdict (the last record of ``proofs``) beside the what-if's: agree when the what-if exits 1
    exactly where the run cannot train (ms-swift: cannot import, its step being unrun)."""
    runs = {r["name"]: r for r in proofs if "trains" in r}
    rows = []
    for record in what_ifs:
        run = runs.get(record["name"])
        if run is None or "what_if_exit" not in record:
            continue
        trains = run["trains"] or run.get("phase") == "imported"
        fails_reading = record["what_if_exit"] == 1
        rows.append({"set": record["name"], "run": "trains" if trains else f"fails ({run.get('phase')})",
                     "what_if": "would not train" if fails_reading else "clean", "agree": trains != fails_reading,
                     "what_if_s": record["what_if_s"]})  # fmt: skip
    return rows


def summary(records: list[dict], first: list[dict] | None = None) -> dict:
    """Precision and recall of plain doctor's reading against the run, over the last record of each set; the cold
    doctor time from the first (a set measured again has its reading cached)."""
    judged = [r for r in records if "trains" in r]
    failing = [r for r in judged if not r["trains"]]
    flagged = [r for r in judged if r["doctor_findings"] or r["doctor_errors"]]
    true_flags = [r for r in flagged if r in failing]
    proven = [r for r in failing if any(t["trains"] for t in r["fixes_tried"])]
    doctor_times = sorted(r["doctor_s"] for r in (first or records) if "doctor_s" in r)
    return {
        "sets": len(records),
        "unresolvable": [r["name"] for r in records if "unresolvable" in r],
        "judged": len(judged),
        "failing": [r["name"] for r in failing],
        "reading_flags": len(flagged),
        "precision": f"{len(true_flags)}/{len(flagged)}",
        "recall": f"{len(true_flags)}/{len(failing)}",
        "recall_proven_fix": f"{len(proven)}/{len(failing)}",
        "false_findings_on_training_sets": [r["name"] for r in flagged if r not in failing],
        "doctor_cold_s": doctor_times,
        "time_to_proven_fix_s": {r["name"]: r["prove_s"] for r in proven},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", type=Path, default=SETS, help="the TOML file of sets (default: %(default)s)")
    parser.add_argument("--only", nargs="*", help="measure these sets only")
    parser.add_argument("--output", default=".matrix/prove-sets.jsonl")
    parser.add_argument("--summary", action="store_true", help="summarise --output's records (the last of each set)")
    parser.add_argument("--what-if", action="store_true", help="the what-if on each set, against --output's runs")
    parser.add_argument("--reading-only", action="store_true",
                        help="plain doctor (cold) on each set, no run: the reading again (summarise with --runs)")
    parser.add_argument("--runs", help="with --summary: the runs' verdicts and fixes from this file, the reading from "
                        "--output's (a --reading-only measurement)")  # fmt: skip
    parser.add_argument("--what-if-output", default=".matrix/what-if-sets.jsonl")
    parser.add_argument("--fresh-fix-envs", action="store_true",
                        help="doctor --prove with a fresh cache of fix envs (uv's own cache kept warm): the time to "
                        "a proven fix with a warm cache, each fix's env built as a user's first --prove builds it")
    args = parser.parse_args(argv)
    if args.what_if:
        return main_what_if(args)
    if args.summary:
        records = [json.loads(line) for line in Path(args.output).read_text().splitlines()]
        if args.runs:
            runs = {r["name"]: r for r in map(json.loads, Path(args.runs).read_text().splitlines())}
            records = [{**runs.get(r["name"], {}), **r} for r in records]
        latest, first = {r["name"]: r for r in records}, {r["name"]: r for r in reversed(records)}
        print(json.dumps(summary(list(latest.values()), list(first.values())), indent=1))
        return 0
    entries = [e for e in tomllib.loads(args.sets.read_text())["set"] if not args.only or e["name"] in args.only]
    output = Path(args.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    records = []
    for entry in entries:
        print(f"{entry['name']}: {', '.join(entry['pins'])}", flush=True)
        record = measure(entry, args.reading_only, args.fresh_fix_envs)
        records.append(record)
        with output.open("a") as out:
            out.write(json.dumps(record) + "\n")
        print(json.dumps(record, indent=1), flush=True)
    print(json.dumps(summary(records), indent=1))
    return 0


def main_what_if(args: argparse.Namespace) -> int:
    entries = [e for e in tomllib.loads(args.sets.read_text())["set"] if not args.only or e["name"] in args.only]
    output = Path(args.what_if_output)
    folder = output.parent / "what-if-sets"
    folder.mkdir(parents=True, exist_ok=True)
    records = []
    for entry in entries:
        print(f"{entry['name']}: {', '.join(entry['pins'])}", flush=True)
        records.append(what_if(entry, folder))
        with output.open("a") as out:
            out.write(json.dumps(records[-1]) + "\n")
        print(json.dumps(records[-1], indent=1), flush=True)
    proofs = [json.loads(line) for line in Path(args.output).read_text().splitlines()]
    rows = agreement(records, proofs)
    print(json.dumps(rows, indent=1))
    print(f"agree: {sum(row['agree'] for row in rows)}/{len(rows)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
