"""Write grpo_compat/histories/data/top-level-modules.json.gz: the top-level modules each distribution provides.

    python -m matrix.module_providers                   # uv's unpacked wheels, prove's and the matrix's envs,
                                                        # pip's find-links
    python -m matrix.module_providers FOLDER|WHEEL ...  # site folders, folders of wheels, wheel files

Read from each distribution's ``RECORD`` (grpo_compat.histories.providers.top_level_of_paths): the installed
files of a wheel, nothing imported. What an earlier run wrote is kept and added to (a release read once stays
read), so the table only grows with the environments this machine has built.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import io
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

from grpo_compat.core.versions import canonicalize_name, distribution_folders
from grpo_compat.histories import providers
from grpo_compat.matrix.envs import pip_find_links

ROOT = Path(__file__).resolve().parent.parent


def default_sources() -> list[Path]:
    """uv's cache of unpacked wheels (one wheel's files per folder), prove's environments, the matrix's cells."""
    sources: list[Path] = []
    try:
        cache = subprocess.run(["uv", "cache", "dir"], capture_output=True, text=True, check=True).stdout.strip()
        sources += sorted(Path(cache, "archive-v0").glob("*"))
    except (OSError, subprocess.CalledProcessError):
        pass
    from grpo_compat.tools.prove import prove_envs_folder

    for base in (prove_envs_folder(), ROOT / ".matrix" / "envs"):
        sources += sorted(base.glob("*/lib/python*/site-packages"))
    return sources + [Path(link) for link in pip_find_links()]  # the CPU torch wheels


def read_wheel(path: Path) -> tuple[str, str, set[str]] | None:
    """(name, version, top-level modules) of a wheel file, from its RECORD."""
    name, version = path.name.split("-")[:2]
    try:
        with zipfile.ZipFile(path) as wheel:
            record = next((n for n in wheel.namelist() if n.endswith(".dist-info/RECORD")), None)
            if record is None:
                return None
            rows = csv.reader(io.StringIO(wheel.read(record).decode("utf-8")))
            return name, version, providers.top_level_of_paths(row[0] for row in rows if row)
    except (OSError, zipfile.BadZipFile, UnicodeDecodeError):
        return None


def read_source(source: Path) -> list[tuple[str, str, set[str]]]:
    """(name, version, modules) of each distribution a site folder (or uv's unpacked wheel) holds, or a wheel."""
    if source.suffix == ".whl":
        found = read_wheel(source)
        return [found] if found else []
    read = []
    for name, version, folder in distribution_folders([str(source)]).values():
        modules = providers.top_level_of_metadata(folder)
        if modules:
            read.append((name, version, modules))
    read += [found for wheel in sorted(source.glob("*.whl")) if (found := read_wheel(wheel))]
    return read


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m matrix.module_providers", description=__doc__.splitlines()[0])
    parser.add_argument("sources", nargs="*", type=Path, help="default: uv's cache, prove's and the matrix's envs")
    parser.add_argument("--output", type=Path, default=providers.PATH, help="default: the shipped table")
    args = parser.parse_args(argv)
    table: dict[str, dict[str, set[str]]] = {}
    if args.output.exists():
        with gzip.open(args.output, "rt", encoding="utf-8") as stream:
            for name, entry in json.load(stream)["distributions"].items():
                table[name] = {"modules": set(entry["modules"]), "releases": set(entry["releases"])}
    before = sum(len(entry["releases"]) for entry in table.values())
    for source in args.sources or default_sources():
        for name, version, modules in read_source(source):
            entry = table.setdefault(canonicalize_name(name), {"modules": set(), "releases": set()})
            entry["modules"] |= modules
            entry["releases"].add(version)
    data = {"distributions": {name: {key: sorted(values) for key, values in entry.items()}
                              for name, entry in sorted(table.items())}}  # fmt: skip
    text = json.dumps(data, separators=(",", ":"), sort_keys=True)
    args.output.write_bytes(gzip.compress(text.encode(), compresslevel=9, mtime=0))  # same data, same bytes
    releases = sum(len(entry["releases"]) for entry in table.values())
    print(
        f"{args.output}: {len(table)} distributions, {releases} releases "
        f"({releases - before} new), {args.output.stat().st_size} bytes",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    sys.exit(main())
