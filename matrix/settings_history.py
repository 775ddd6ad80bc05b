"""Write grpo_compat/settings/trl.json and ms-swift.json: the settings of every release, read from its wheel.

    python -m matrix.settings_history                 # both libraries, every release since the floor
    python -m matrix.settings_history --package trl   # one library
    python -m matrix.settings_history --offline       # only the wheels already in the cache

Each release's wheel is fetched once with ``pip download --no-deps`` into .matrix/settings-wheels/<package>/
and read by AST (grpo_compat.settings.extract): nothing is installed or imported. The release list is pip's
(``pip index versions``), final releases from the floor on. tests/test_settings_history.py checks that the
committed data for the installed trl is what the same reader gives for its installed source.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

from packaging.version import Version

from grpo_compat.settings import extract, history

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".matrix" / "settings-wheels"
# pip, the ordinary client: this interpreter's, else the one on PATH (a uv-built .venv carries none)
PIP = [sys.executable, "-m", "pip"] if importlib.util.find_spec("pip") else [shutil.which("pip3") or "pip"]
FLOORS = {"trl": "0.14.0", "ms-swift": "3.4.0"}
READS = {
    "trl": "GRPOConfig with its trl base classes, and the other dataclasses `trl grpo --config` fills "
    "(script, model, dataset arguments); transformers' TrainingArguments is read from the installed transformers",
    "ms-swift": "RLHFArguments (`swift rlhf`) with its ms-swift base classes and mixins (GRPO, rollout / vLLM, "
    "model, data, training); transformers' Seq2SeqTrainingArguments is read from the installed transformers",
}


def released_versions(package: str) -> list[str]:
    out = subprocess.run([*PIP, "index", "versions", package], capture_output=True, text=True, check=True).stdout
    line = next(line for line in out.splitlines() if line.startswith("Available versions:"))
    versions = [Version(v.strip()) for v in line.split(":", 1)[1].split(",")]
    floor = Version(FLOORS[package])
    return [str(v) for v in sorted(v for v in versions if v >= floor and not v.is_prerelease and not v.is_devrelease)]


def cached_wheels(package: str) -> dict[str, Path]:
    prefix = package.replace("-", "_") + "-"
    return {path.name[len(prefix) :].split("-")[0]: path for path in (CACHE / package).glob(f"{prefix}*.whl")}


def wheel_of(package: str, version: str) -> Path:
    wheels = cached_wheels(package)
    if version not in wheels:
        print(f"  downloading {package}=={version}", file=sys.stderr, flush=True)
        subprocess.run(
            [
                *PIP,
                "download",
                "-q",
                "--no-deps",
                "--only-binary",
                ":all:",
                f"{package}=={version}",
                "-d",
                str(CACHE / package),
            ],
            check=True,
        )
        wheels = cached_wheels(package)
    return wheels[version]


def generate(package: str, offline: bool) -> Path:
    if offline:
        versions = sorted(cached_wheels(package), key=Version)
    else:
        versions = released_versions(package)
    read = extract.READERS[package]
    per_release = {}
    for i, version in enumerate(versions, 1):
        print(f"[{i}/{len(versions)}] {package} {version}", file=sys.stderr, flush=True)
        per_release[version] = read(wheel_of(package, version))["settings"]
    target = history.DATA / f"{package}.json"
    target.write_text(history.dump(package, versions, history.spans_of(per_release), READS[package]))
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m matrix.settings_history", description=__doc__.splitlines()[0])
    parser.add_argument("--package", choices=history.PACKAGES, action="append", help="default: both")
    parser.add_argument("--offline", action="store_true", help="read only the wheels already cached")
    args = parser.parse_args(argv)
    for package in args.package or history.PACKAGES:
        target = generate(package, args.offline)
        data = json.loads(target.read_text())
        print(f"{target.relative_to(ROOT)}: {len(data['releases'])} releases, {len(data['settings'])} settings")
    return 0


if __name__ == "__main__":
    sys.exit(main())
