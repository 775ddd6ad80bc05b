"""A log read once into the evidence every reasoner of ``explain`` works from.

The errors that were raised, each with the traceback frames above it and the distribution each frame's code
belongs to (an install's site- or dist-packages, Windows and conda included; unsloth's generated
``unsloth_compiled_cache/``; an editable checkout such as ``/trl/trl/...`` or ``ms-swift/swift/...``), the platform,
the logged metrics, the settings the log shows with their values, and the launch command. Imports no upstream
library.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from grpo_compat.catalogue.environment import distribution_of_import, platform_of

# A traceback frame: Python's `File "path", line N, in f`, IPython's `File path.py:N, in f` and `path.py in f`
# (Colab renders the path as a markdown link: `[path.py](url) in <module>`).
FRAME = re.compile(
    r"""(?:File "(?P<path>[^"\n]+)", line (?P<line>\d+)(?:, in (?P<function>[\w<>.]+))?"""
    r"""|File (?P<ipath>\S+\.py):(?P<iline>\d+)(?:, in (?P<ifunction>[\w<>.]+))?"""
    r"""|\[?(?P<npath>[^\s\[\]()]+\.py)\]?(?:\([^)\s]*\))? in <?(?P<nfunction>\w+))"""
)
# The line that ends a traceback: `SomeError: message` (a dotted module prefix allowed), at a line's start.
ERROR_LINE = re.compile(
    r"^(?:[\w.]+\.)?(?P<type>[A-Z]\w*(?:Error|Exception|Exit|Interrupt)|AssertionError|KeyError|StopIteration)"
    r"(?::[ \t]*(?P<message>[^\n]*))?$",
    re.M,
)
TRACEBACK_HEAD = "Traceback (most recent call last)"
# Top-level import names an editable checkout is recognised by: ``<repo>/<name>/...`` or ``src/<name>/...``.
_CHECKOUT_NAMES = {
    "trl": "trl",
    "swift": "ms-swift",
    "transformers": "transformers",
    "accelerate": "accelerate",
    "peft": "peft",
    "vllm": "vllm",
    "unsloth": "unsloth",
    "unsloth_zoo": "unsloth-zoo",
    "deepspeed": "deepspeed",
    "verl": "verl",
    "open_r1": "open-r1",
}
_CHECKOUT_PARENTS = {"trl": "trl", "swift": "ms-swift", "unsloth_zoo": "unsloth-zoo"}
_INSTALL = re.compile(r"[/\\](?:site|dist)-packages[/\\](?P<top>[A-Za-z_]\w*)(?P<rest>[/\\.][^\s\"']*)?")
COMPILED_CACHE = "unsloth_compiled_cache"


@dataclass(frozen=True)
class Frame:
    path: str
    line: int | None
    function: str | None
    distribution: str | None  # whose code the frame runs; None for the user's own code
    module: str | None  # the dotted module of an installed file (trl.trainer.grpo_trainer)
    source: str | None = None  # the line of code the traceback prints under the frame


@dataclass(frozen=True)
class RaisedError:
    type: str  # "ImportError"
    message: str
    position: int  # where its line starts in the text
    line: str
    frames: tuple[Frame, ...]  # the traceback above it, outermost first

    @property
    def raised_by(self) -> str | None:
        """The distribution whose code raised: the innermost frame that is in an install."""
        innermost = self.frames[-1] if self.frames else None
        return innermost.distribution if innermost else None

    def whose_code(self, versions: dict[str, str], callee: str | None = None) -> str:
        """ "raised in trl 0.16.1's code (grpo_trainer.py, _get_train_sampler), called from transformers 4.52.4's:
        the transformers / trl release pair is in question" (empty when no frame is in an install). With ``callee``
        (a call that did not bind), the innermost frame made the call into the callee's code."""
        raiser = self.raised_by
        frame = self.frames[-1] if self.frames else None
        if frame is None or (raiser is None and callee is None):
            return ""
        file = frame.path.replace("\\", "/").rsplit("/", 1)[-1]
        where = f"{file}, {frame.function}" if frame.function else file

        def named(distribution: str | None) -> str:
            if distribution is None:
                return "the script"
            return f"{distribution} {versions[distribution]}" if distribution in versions else distribution

        if callee is not None and callee != raiser:
            text = f"the call in {named(raiser)}'s code ({where}) into {named(callee)}'s"
            return text + (f": the {raiser} / {callee} release pair is in question" if raiser else "")
        caller = self.called_by
        text = f"raised in {named(raiser)}'s code ({where}), called from {named(caller)}"
        if caller is None:
            return text
        return text + f"'s: the {caller} / {raiser} release pair is in question"

    @property
    def called_by(self) -> str | None:
        """The distribution whose code called into the raiser's: the nearest outer frame of another distribution."""
        raiser = self.raised_by
        for frame in reversed(self.frames[:-1]):
            if frame.distribution != raiser:
                return frame.distribution
        return None


def distribution_of_path(path: str) -> tuple[str | None, str | None]:
    """(distribution, module) whose code a traceback path holds; (None, None) for the user's own code."""
    path = path.replace("\\", "/")
    if COMPILED_CACHE in path:  # unsloth's compiled copies of trl's trainers (UnslothGRPOTrainer.py)
        return "unsloth", None
    installed = _INSTALL.search(path)
    if installed:
        top = installed.group("top")
        rest = (installed.group("rest") or "").lstrip("/.")
        module = None
        if rest.endswith(".py"):
            parts = [top, *rest[:-3].split("/")]
            module = ".".join(part for part in parts if part != "__init__")
        distribution = distribution_of_import(module or top) or top.replace("_", "-")
        return distribution, module
    parts = [part for part in path.split("/") if part]
    for i in range(len(parts) - 2, 0, -1):  # the innermost package folder of a checkout
        top, parent = parts[i], parts[i - 1]
        if top in _CHECKOUT_NAMES and parent in (top, "src", _CHECKOUT_PARENTS.get(top), _CHECKOUT_NAMES[top]):
            module = ".".join(parts[i:])[:-3].removesuffix(".__init__") if path.endswith(".py") else None
            return _CHECKOUT_NAMES[top], module
    return None, None


def frames_in(text: str, start: int, end: int, chained: bool = False) -> tuple[Frame, ...]:
    """The frames of the traceback that ends at ``end``: those after the last traceback head before it (with
    ``chained``, every frame from ``start``: the tracebacks a worker's error was re-raised through too)."""
    head = -1 if chained else text.rfind(TRACEBACK_HEAD, start, end)
    frames = []
    for m in FRAME.finditer(text, head if head != -1 else start, end):
        path = m.group("path") or m.group("ipath") or m.group("npath") or ""
        line = m.group("line") or m.group("iline")
        function = m.group("function") or m.group("ifunction") or m.group("nfunction")
        distribution, module = distribution_of_path(path)
        line_end = text.find("\n", m.end())
        next_end = text.find("\n", line_end + 1) if line_end != -1 else -1
        below = text[line_end + 1 : next_end if next_end != -1 else len(text)] if line_end != -1 else ""
        source = below.strip() if below.startswith((" ", "\t")) and not FRAME.match(below.strip()) else None
        frames.append(Frame(path, int(line) if line else None, function, distribution, module, source))
    return tuple(frames)


# A setting and its value as logs show them: `--name value` / `--name=value` (a launch), `name=value` (a repr or a
# call), `'name': value` (a config dict), `name: value` (YAML).
_VALUE = r"""(?:'[^'\n]*'|"[^"\n]*"|-?[\w.+-]+)"""
_SETTING_VALUE = re.compile(
    rf"""--(?P<cli>[a-z][a-z0-9_]{{2,}})[ =](?P<cli_value>{_VALUE})"""
    rf"""|\b(?P<kw>[a-z][a-z0-9_]{{2,}})=(?P<kw_value>{_VALUE})"""
    rf"""|['"](?P<key>[a-z][a-z0-9_]{{2,}})['"]:\s*(?P<key_value>{_VALUE})"""
    rf"""|^\s*(?P<yaml>[a-z][a-z0-9_]{{2,}}):[ \t]+(?P<yaml_value>{_VALUE})[ \t]*$""",
    re.M,
)
_LAUNCH = re.compile(
    r"^[$#>]?\s*(?P<command>(?:(?:CUDA_VISIBLE_DEVICES|NPROC_PER_NODE|ASCEND_RT_VISIBLE_DEVICES)=\S+\s+)*"
    r"(?:accelerate launch|torchrun|deepspeed|swift rlhf|swift sft|trl grpo|python3? -m|python3?)\s[^\n]*)$",
    re.M,
)


@dataclass
class Evidence:
    text: str  # the normalised log (its tail)
    errors: list[RaisedError] = field(default_factory=list)
    has_traceback: bool = False
    platform: str | None = None
    launch: str | None = None

    def settings_shown(self) -> dict[str, str]:
        """``name=value`` / ``--name value`` pairs the log shows (a config dump, a launch command), first wins."""
        shown: dict[str, str] = {}
        for m in _SETTING_VALUE.finditer(self.text[-200_000:]):
            kind = next(kind for kind in ("cli", "kw", "key", "yaml") if m.group(kind))
            shown.setdefault(m.group(kind), m.group(f"{kind}_value").strip("'\""))
        return shown

    def error_at(self, position: int) -> RaisedError | None:
        """The raised error whose line holds ``position``, else the first one after it."""
        for error in self.errors:
            if error.position <= position <= error.position + len(error.line) or error.position >= position:
                return error
        return None


def read_evidence(text: str) -> Evidence:
    """The errors (with their attributed frames), the platform and the launch command of a normalised log."""
    evidence = Evidence(text, has_traceback=TRACEBACK_HEAD in text, platform=platform_of(text))
    previous_end = 0
    for m in ERROR_LINE.finditer(text):
        if m.group("type") in ("Warning",) or (m.group("message") is None and TRACEBACK_HEAD not in text):
            continue
        frames = frames_in(text, max(previous_end, m.start() - 20_000), m.start())
        evidence.errors.append(
            RaisedError(m.group("type"), (m.group("message") or "").strip(), m.start(), m.group().strip(), frames)
        )
        previous_end = m.end()
    launch = _LAUNCH.search(text)
    evidence.launch = launch.group("command").strip() if launch else None
    return evidence


def frames_before(text: str, position: int, chained: bool = False) -> tuple[Frame, ...]:
    """The frames of the traceback just above ``position`` (the error line a reasoner matched)."""
    return frames_in(text, max(0, position - 20_000), position, chained)
