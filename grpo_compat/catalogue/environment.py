"""Facts about the machine a log came from: its platform, the standard library, import names against distribution
names, the CUDA / ROCm / Ascend build of its compiled packages, and compiled extensions built against another torch.

Used by ``explain`` (reasoning.py, log_matching.py) so that it never answers ``pip install`` for a module no
distribution provides (``resource`` on Windows is POSIX-only standard library), and names the build a native
library error belongs to. Imports no upstream library.
"""

from __future__ import annotations

import re
import sys
from functools import cache

from grpo_compat.core.versions import canonicalize_name

# Standard-library modules that exist on one platform only (the documentation's "Availability" notes).
POSIX_ONLY = frozenset(
    {"resource", "fcntl", "termios", "pwd", "grp", "posix", "pty", "tty", "crypt", "spwd", "nis", "syslog", "readline"}
    | {"curses", "_curses", "ossaudiodev", "_posixsubprocess", "_posixshmem"}
)
WINDOWS_ONLY = frozenset({"msvcrt", "winreg", "winsound", "_winapi", "nt", "msilib", "_overlapped"})
# Modules a later Python removed from its standard library (PEP 632, PEP 594): release -> names. distutils is the
# one a distribution still provides (setuptools ships a copy of it).
REMOVED_FROM_STDLIB = {
    "3.12": ("distutils", "imp", "asynchat", "asyncore", "smtpd"),
    "3.13": (
        *("aifc", "audioop", "cgi", "cgitb", "chunk", "crypt", "imghdr", "mailcap", "msilib", "nis", "nntplib"),
        *("ossaudiodev", "pipes", "sndhdr", "spwd", "sunau", "telnetlib", "uu", "xdrlib", "lib2to3"),
    ),
}
PROVIDED_BY_A_DISTRIBUTION = {"distutils": "setuptools"}

# Import names whose distribution is named otherwise, for packages a GRPO stack commonly imports. The installed
# environment's own metadata (packages_distributions) and the API histories are read first; this covers a machine
# where the package is absent, which is exactly when a log says "No module named".
IMPORT_NAME_DISTRIBUTIONS = {
    "cv2": "opencv-python",
    "yaml": "PyYAML",
    "sklearn": "scikit-learn",
    "PIL": "Pillow",
    "bs4": "beautifulsoup4",
    "attr": "attrs",
    "dateutil": "python-dateutil",
    "google.protobuf": "protobuf",
    "flash_attn": "flash-attn",
    "flash_attn_2_cuda": "flash-attn",
    "torch_npu": "torch-npu",
    "swift": "ms-swift",
    "dotenv": "python-dotenv",
    "Levenshtein": "python-Levenshtein",
    "jwt": "PyJWT",
    "fitz": "PyMuPDF",
    "docx": "python-docx",
    "Crypto": "pycryptodome",
    "skimage": "scikit-image",
    "faiss": "faiss-cpu",
    "mpi4py": "mpi4py",
    "google.generativeai": "google-generativeai",
}


def stdlib_names() -> frozenset[str]:
    """Every standard-library top-level module of any platform and of Pythons that have since dropped one."""
    removed = {name for names in REMOVED_FROM_STDLIB.values() for name in names}
    return frozenset(sys.stdlib_module_names) | POSIX_ONLY | WINDOWS_ONLY | removed


@cache
def _installed_mapping() -> dict[str, list[str]]:
    from importlib.metadata import packages_distributions

    try:
        return packages_distributions()
    except Exception:  # noqa: BLE001 - a broken metadata folder must not break explain
        return {}


# The histories whose releases' requirements name distributions a GRPO run may lack (loaded only when needed).
_REQUIRING = ("trl", "ms-swift", "transformers", "accelerate", "peft", "vllm", "datasets", "huggingface-hub")


@cache
def required_distributions() -> frozenset[str]:
    """Every distribution a release of the GRPO stack requires (Requires-Dist of the API histories), normalised:
    names that exist on PyPI."""
    from grpo_compat.histories import load

    names = set()
    for distribution in _REQUIRING:
        history = load(distribution)
        for _, _, lines in history._data["requires"] if history else ():
            for line in lines:
                name = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", line)
                if name:
                    names.add(canonicalize_name(name.group()))
    return frozenset(names)


def distribution_of_import(module: str) -> str | None:
    """The distribution that provides an import name (``cv2`` -> ``opencv-python``), None when nothing here says.

    Read from the API histories' import names, this environment's installed metadata, then the short table above.
    """
    from grpo_compat.histories import distribution_of_module

    top = module.split(".", 1)[0]
    for name in (module, top):
        if name in IMPORT_NAME_DISTRIBUTIONS:
            return IMPORT_NAME_DISTRIBUTIONS[name]
    known = distribution_of_module(top)
    if known:
        return known
    installed = _installed_mapping().get(top)
    if installed and len(set(installed)) == 1:
        return installed[0]
    return None


def known_distribution(module: str) -> str | None:
    """``distribution_of_import``, else a distribution some GRPO release requires under the module's own name
    (``math_verify`` -> ``math-verify``): a name known to exist. None when nothing says which distribution it is."""
    found = distribution_of_import(module)
    if found:
        return found
    name = canonicalize_name(module.split(".", 1)[0])
    return name if name in required_distributions() else None


# --- the platform a log came from ----------------------------------------------------------------------------

_WINDOWS = re.compile(r"""(?:^|[\s"'(])[A-Za-z]:\\|\\(?:Lib\\)?site-packages\\|\bwin(?:32|_amd64)\b|\.pyd\b""", re.M)
_MACOS = re.compile(r"/Users/[^/\s]+/|darwin|\.dylib\b|\bmacOS\b")
_LINUX = re.compile(r"/(?:usr|home|opt|root|workspace|content)/|\blinux\b|\.so\b")


PLATFORM_SPAN = 200_000


def platform_of(text: str) -> str | None:
    """The platform a log's paths and build names show ("windows", "macos", "linux"), else None. Reads the log's
    last 200 KB (the traceback that ended it) and first 50 KB (the environment a report pastes first)."""
    ends = text if len(text) <= PLATFORM_SPAN else text[:50_000] + "\n" + text[-PLATFORM_SPAN:]
    for name, pattern in (("windows", _WINDOWS), ("macos", _MACOS), ("linux", _LINUX)):
        if pattern.search(ends):
            return name
    return None


# --- native libraries: CUDA / ROCm / Ascend builds, and extensions built against another torch ----------------

# The shared libraries each accelerator stack ships, by the name a loader error shows.
NATIVE_STACKS = (
    (
        re.compile(r"lib(?:cudart|cublas\w*|cudnn\w*|cusparse\w*|cufft\w*|curand|nvrtc|nccl|nvJitLink|cusolver\w*)"),
        "CUDA",
    ),
    (re.compile(r"lib(?:amdhip64|rocm\w*|hipblas\w*|rccl|MIOpen)"), "ROCm"),
    (re.compile(r"lib(?:ascendcl|hccl|acl_op_compiler|ge_runner|torch_npu)|torch_npu"), "Ascend NPU (CANN)"),
)
_LIBRARY_VERSION = re.compile(r"\.so\.(\d+)")


def native_stack(library: str) -> tuple[str, str | None] | None:
    """(stack, major) of a shared library name: ``libcudart.so.12`` -> ("CUDA", "12")."""
    for pattern, stack in NATIVE_STACKS:
        if pattern.search(library):
            major = _LIBRARY_VERSION.search(library)
            return stack, major.group(1) if major else None
    return None


def local_build(version: str | None) -> str | None:
    """The accelerator build a version's local part names: ``2.5.1+cu121`` -> "CUDA 12.1"."""
    if not version or "+" not in version:
        return None
    tag = version.split("+", 1)[1]
    cuda = re.fullmatch(r"cu(\d+?)(\d)", tag)
    if cuda:
        return f"CUDA {cuda.group(1)}.{cuda.group(2)}"
    rocm = re.fullmatch(r"rocm([\d.]+)", tag)
    return f"ROCm {rocm.group(1)}" if rocm else ("CPU" if tag == "cpu" else None)
