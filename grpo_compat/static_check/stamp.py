"""The launch-time lookup of the static check's result: a name of the installed set cheap enough for every apply().

Naming the set by its distributions and versions (the full check's key) reads every metadata folder and hashes the
list: about 15 ms on a trl env, most of apply()'s cost. Installing, upgrading or removing a distribution adds or
removes its metadata folder, which changes its import folder's modification time, so the folders and their times
name the set as well, for a few stat() calls. A stale name only means the check runs again.
"""

from __future__ import annotations

import os
import sys

CHECK_VERSION = 5  # bump when what the check finds changes: cached results of older checks are not reused


def installed_stamp(paths: list[str] | None = None) -> str:
    """The import folders of this interpreter with their modification times (one line, no newline).

    The script's own folder, which Python puts first, is named without its time: a run writing its outputs there
    changes it at every launch, and installs do not go there.
    """
    if paths is None:
        paths = sys.path if sys.flags.safe_path else ["", *sys.path[1:]]
        parts = [f"check {CHECK_VERSION}", sys.version.split()[0], sys.path[0] if sys.path else ""]
    else:
        parts = [f"check {CHECK_VERSION}", sys.version.split()[0]]
    for path in paths:
        try:
            parts.append(f"{path}@{os.stat(path).st_mtime_ns}")
        except (OSError, ValueError):  # a missing folder, or a zip's path that is not a folder
            continue
    return "|".join(parts).replace("\n", " ")


def _stamp_file(folder: str, stamp: str) -> str:
    # FNV-1a, 32 bits: a tenth of a millisecond here, where importing zlib for its crc32 took half of one. The file
    # holds its stamp, so two stamps of one name only mean the check runs again.
    name = 0x811C9DC5
    for byte in stamp.encode():
        name = ((name ^ byte) * 0x01000193) & 0xFFFFFFFF
    return os.path.join(folder, "stamps", f"fnv-{name:08x}.txt")


def read_lines(folder: str, stamp: str) -> list[str] | None:
    """The finding lines saved for this stamp, or None when the set has not been checked under it."""
    try:
        with open(_stamp_file(folder, stamp), encoding="utf-8") as handle:
            saved, _, lines = handle.read().partition("\n")
    except OSError:
        return None
    return lines.splitlines() if saved == stamp else None


def save_lines(folder: str, stamp: str, lines: list[str]) -> None:
    path = _stamp_file(folder, stamp)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        temporary = f"{path}.{os.getpid()}"
        with open(temporary, "w", encoding="utf-8") as handle:
            handle.write("\n".join([stamp, *lines]))
        os.replace(temporary, path)
    except OSError:
        pass  # a read-only home: the check is looked up by versions next time
