"""``grpo-compat doctor --prove``: whether the installed set trains, found by running it, and fixes printed only after
they ran.

The probe (grpo_compat.testing.trainer_probe) runs in a subprocess of the checked interpreter: it imports the GRPO
trainer the stack uses, recording every missing module and name the import meets, then trains one GRPO step on the
tiny local Qwen2. Each failure is named with the static check's cause where the reading has one (same module, same
name). A fix the reading proposes is then proven: the installed set plus the change, resolved together by uv (so
every installed package's declared bounds hold, and the installed versions stay where the change allows), is
built into a throwaway env cached by the resolved set, and the probe runs there. Only a change that trains is printed
as proven, with the command to run; otherwise what was tried and what still failed.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

PROBE_TIMEOUT_S = 900
MAX_TRIED_FIXES = 3  # each try builds an env (a minute or two from uv's cache) and trains a step
PROBE_MODULE = "grpo_compat.testing.trainer_probe"
Progress = Callable[[str], None]


class Stopped(Exception):
    """The work was called off (``stop`` was set): a speculative try the run made unneeded."""


def run_probe(
    python: str,
    stack: str,
    settings: dict[str, Any] | None = None,
    throwaway: bool = False,
    stop: threading.Event | None = None,
) -> dict[str, Any]:
    """The probe's result in the interpreter ``python`` (see trainer_probe.probe); a crash is a failure to train.
    ``throwaway``: ``python`` is one of our throwaway envs, where the probe may write bytecode (PYTHONDONTWRITEBYTECODE
    is the user's choice for their own env): a second probe of the same env then imports in a third of the time.
    ``stop`` set: the probe is ended and Stopped raised."""
    command = [python, "-m", PROBE_MODULE, "--trainer", stack, "--settings", json.dumps(settings or {})]
    offline = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "MODELSCOPE_OFFLINE": "1"}
    environment = {**os.environ, **offline, "CUDA_VISIBLE_DEVICES": ""}
    if throwaway:
        environment.pop("PYTHONDONTWRITEBYTECODE", None)
    started = time.monotonic()
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment) as child:
        while True:
            try:
                stdout, stderr = child.communicate(timeout=1)
                break
            except subprocess.TimeoutExpired:  # communicate() again loses no output (subprocess's documentation)
                if (stop is not None and stop.is_set()) or time.monotonic() - started > PROBE_TIMEOUT_S:
                    child.kill()
                    child.communicate()
                    if stop is not None and stop.is_set():
                        raise Stopped from None
                    message = f"the probe ran past {PROBE_TIMEOUT_S} s"
                    return {"stack": stack, "trains": False, "phase": "timeout", "missing": [],
                            "error": {"type": "Timeout", "message": message, "where": ""}}  # fmt: skip
    lines = stdout.strip().splitlines()
    try:
        result = json.loads(lines[-1])
    except (IndexError, ValueError):
        tail = (stderr or stdout).strip().splitlines()[-3:]
        error = {"type": f"exit {child.returncode}", "message": " | ".join(tail), "where": ""}
        result = {"stack": stack, "trains": False, "phase": "crashed", "missing": [], "error": error}
    result["wall_s"] = round(time.monotonic() - started, 1)
    return result


# -- the probe's failures, with the reading's causes -----------------------------------------------------------------


def _static_cause(item: dict[str, str], findings: list[dict[str, str]]) -> dict[str, str] | None:
    """The static finding about the same missing module (or the same name of the same module), if any."""
    if item["kind"] == "missing-module":
        said = f"No module named '{item['name']}'"
        return next((f for f in findings if f["kind"] == "missing-module" and said in f["message"]), None)
    module, _, name = item["name"].rpartition(".")
    said = f"cannot import name '{name}' from '{module}'"
    return next((f for f in findings if f["kind"] == "missing-name" and said in f["message"]), None)


def failures(probe: dict[str, Any], findings: list[dict[str, str]]) -> list[dict[str, Any]]:
    """What stops training, in the order the run met it: each with the reading's finding where it has one."""
    named = []
    for item in probe.get("missing") or []:
        what = (
            f"No module named '{item['name']}'"
            if item["kind"] == "missing-module"
            else (f"cannot import name '{item['name'].rpartition('.')[2]}' from '{item['name'].rpartition('.')[0]}'")
        )
        named.append({**item, "error": what, "finding": _static_cause(item, findings)})  # fmt: skip
    error = probe.get("error")
    if error:
        said = error["message"] + (" (met after standing in for the missing above: may be their consequence)"
                                   if error.get("after_stand_ins") else "")  # fmt: skip
        named.append({"kind": error["type"], "name": "", "where": error["where"], "error": said,
                      "finding": _finding_about(error["message"], findings), "phase": probe.get("phase")})  # fmt: skip
    return named


def _finding_about(message: str, findings: list[dict[str, str]]) -> dict[str, str] | None:
    """The reading's override / keyword finding on what an error names: a qualified name (``Class.method``) or a
    quoted name (an unexpected keyword), where exactly one finding names it; the reading's attribute finding on the
    attribute an AttributeError names (the run names the model's concrete class, the reading its annotated base); first,
    the known failure whose patterns match the error."""
    known = [f for f in findings if any(re.search(pattern, message) for pattern in f.get("patterns", ()))]
    if known:
        return known[0]
    missing = re.search(r"has no attribute '(\w+)'", message)
    if missing:
        said = f"has no attribute '{missing.group(1)}'"
        about = [f for f in findings if f["kind"] == "attribute" and f["message"].endswith(said)]
        if len(about) == 1:
            return about[0]
    qualified = re.findall(r"\b[A-Za-z_]\w*\.[A-Za-z_]\w*\b", message)
    names = {*qualified, *re.findall(r"'([A-Za-z_]\w{3,})'", message)}
    about = [f for f in findings if f["kind"] in ("override", "keyword") and any(n in f["message"] for n in names)]
    return about[0] if len(about) == 1 else None


def proposed_changes(
    failed: list[dict[str, Any]],
    findings: list[dict[str, str]],
    newer_stack: str | None = None,
    raiser_as_of_stack: str | None = None,
) -> list[list[str]]:
    """Changes to try, best first: the version pins of the reading's fixes (those of the findings that caused what
    the run met first, in its order), then ``raiser_as_of_stack`` (the package that raised the run's error, at a
    release from when the installed trainer release came out: one package moved, where the reading had no cause),
    then ``newer_stack`` (a newer release of the trainer's own package, where uv's resolution with the rest of the
    set allows one), then the packages the fixes install."""
    ordered = [item["finding"] for item in failed if item.get("finding")] + findings
    changes: list[list[str]] = []
    for finding in ordered:
        for change in requirement_options(finding.get("fix", "")):
            if change not in changes:
                changes.append(change)
    pins = [change for change in changes if any(re.search(r"[<>=!~]", spec) for spec in change)]
    moves = [[spec] for spec in (raiser_as_of_stack, newer_stack) if spec]
    return pins + moves + [change for change in changes if change not in pins]


PYPI_JSON = "https://pypi.org/pypi/{name}/json"


def _upload_dates(name: str) -> dict[str, str]:
    """Each final, not yanked release of ``name`` on PyPI and its first upload (ISO 8601); {} when PyPI is out of
    reach (the change is then simply not proposed)."""
    import urllib.request

    from packaging.version import InvalidVersion, Version

    try:
        with urllib.request.urlopen(PYPI_JSON.format(name=name), timeout=30) as response:
            releases = json.load(response).get("releases", {})
    except (OSError, ValueError):
        return {}
    dates = {}
    for version, files in releases.items():
        try:
            final = not Version(version).is_prerelease
        except InvalidVersion:
            continue
        uploads = [f["upload_time_iso_8601"] for f in files if not f.get("yanked") and f.get("upload_time_iso_8601")]
        if final and uploads:
            dates[version] = min(uploads)
    return dates


def raiser_as_of(probe: dict[str, Any], stack: str) -> str | None:
    """The package whose own code raised the run's error, pinned to its newest release from no later than the
    installed trainer release (``pyarrow==19.0.1``): a release that trainer release could have run with. A package
    that checks its dependencies only when it loads goes past a bound the trainer set (ms-swift 3.2.2 requires
    numpy<2; pyarrow 26, released after it, requires NumPy 2 at import and does not declare it). None when the error
    is the trainer's own, torch's, a missing module's, or its package or dates cannot be told."""
    import importlib.metadata

    from grpo_compat.core.versions import installed_version

    error = probe.get("error") or {}
    module = (error.get("where") or "").rpartition(":")[0] or (error.get("where") or "")
    providers = importlib.metadata.packages_distributions().get(module.split(".")[0], []) if module else []
    if error.get("type") in (None, "ModuleNotFoundError") or len(set(map(_name, providers))) != 1:
        return None
    raiser = _name(providers[0])
    stack_version, raiser_version = installed_version(stack), installed_version(raiser)
    if raiser in (_name(stack), "torch") or not stack_version or not raiser_version:
        return None
    released = _upload_dates(stack).get(stack_version)
    older = newest_release_as_of(_upload_dates(raiser), released, raiser_version) if released else None
    return f"{raiser}=={older}" if older else None


def newest_release_as_of(dates: dict[str, str], moment: str, below: str) -> str | None:
    """The newest release uploaded no later than ``moment`` and older than ``below``: ``dates`` maps each release
    to its first upload (ISO 8601, so that text order is time order)."""
    from packaging.version import Version

    older = [v for v, date in dates.items() if date <= moment and Version(v) < Version(below)]
    return max(older, key=Version) if older else None


def requirement_options(fix: str) -> list[list[str]]:
    """``pip install 'a<2' or 'b>=3'`` -> [['a<2'], ['b>=3']]. Where a fix offers several options, or says more than
    names, only quoted requirements or ones with a version specifier count: ``pip install "trl>=0.29" (ms-swift 4.x
    takes it), or pip install "transformers<5.3"`` -> [['trl>=0.29'], ['transformers<5.3']] (no package "pip" or
    "install"), and ``..., or call model.enable_input_require_grads()`` proposes nothing; a bare ``pip install vllm``
    is vllm. A fix in words proposes nothing to run."""
    if not fix.startswith("pip install "):
        return []
    options = re.split(r"[,;]?\s+or\s+", fix.removeprefix("pip install "))
    bare_names_allowed = len(options) == 1 and not re.search(r"[(;]", fix)
    found = []
    for option in options:
        option = re.sub(r"\([^)]*\)", " ", option.strip().removeprefix("pip install ")).split(";")[0]
        tokens = re.findall(r"""(['"])(.+?)\1|([^\s'"]+)""", option)
        specs = [quoted or bare.rstrip(",;") for _, quoted, bare in tokens]
        named = all(quoted or re.search(r"[<>=!~]", bare) for _, quoted, bare in tokens)
        if specs and (named or bare_names_allowed) and all(_is_requirement(spec) for spec in specs):
            found.append(specs)
    return found


def _is_requirement(text: str) -> bool:
    """A requirement pip installs (``trl>=0.29``), not a setting written beside one (``use_reentrant=True``)."""
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        return not Requirement(text).url and not Requirement(text).marker
    except InvalidRequirement:
        return False


# -- throwaway envs: a set resolved by uv, cached by the resolved set ------------------------------------------------


def prove_envs_folder() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base, "grpo_compat", "prove-envs")


def installed_set(python: str) -> dict[str, str]:
    """Every distribution of the interpreter ``python``'s environment and its version (pip freeze, as a dict)."""
    code = "import importlib.metadata as m, json; print(json.dumps({d.metadata['Name']: d.version for d in m.distributions() if d.metadata['Name']}))"  # noqa: E501
    done = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _name(spec: str) -> str:
    from grpo_compat.matrix.cells import normalised_name

    return normalised_name(re.split(r"[<>=!~\[; ]", spec, maxsplit=1)[0])


def resolve(requirements: list[str], preferred: dict[str, str], folder: Path, progress: Progress | None = None) -> str:
    """uv's resolution of ``requirements``, keeping ``preferred`` versions where they allow (pip-compile's output file
    seeded with them is what uv prefers); torch from pip's find-links (the CPU wheel). The resolved pins, as text."""
    from grpo_compat.matrix.envs import _run, pip_find_links, uv_command

    folder.mkdir(parents=True, exist_ok=True)
    wanted, resolved, log = folder / "requirements.in", folder / "requirements.txt", folder / "resolve.log"
    wanted.write_text("\n".join(requirements) + "\n")
    resolved.write_text("".join(f"{name}=={version}\n" for name, version in sorted(preferred.items())))
    log.write_text("")
    links = [arg for link in pip_find_links() for arg in ("--find-links", link)]
    compile_ = [*uv_command(), "pip", "compile", "--quiet", "--python", sys.executable, "--no-header", *links]
    _run([*compile_, str(wanted), "-o", str(resolved)], log, "resolving the set with uv", progress)
    return pins_only(resolved.read_text())


def pins_only(compiled: str) -> str:
    """The pin lines of uv's compiled output, without its annotations: ``# via -r <scratch>/requirements.in`` names
    the temporary folder of each resolution, and this text is the env's cache key."""
    lines = (line.strip() for line in compiled.splitlines())
    return "".join(line + "\n" for line in lines if line and not line.startswith("#"))


def build_env(
    requirements: list[str], preferred: dict[str, str] | None = None, progress: Progress | None = None
) -> tuple[Path, dict[str, str]]:
    """The python of a throwaway env holding ``requirements`` resolved by uv (``preferred``: versions kept where the
    requirements allow) and grpo_compat from the source this process runs; reused while the resolved set is the same.
    Returns (python, the resolved pins)."""
    pins = resolved_pins(requirements, preferred, progress)
    return env_of(pins, progress), _pinned(pins)


def resolved_pins(
    requirements: list[str], preferred: dict[str, str] | None = None, progress: Progress | None = None
) -> str:
    """uv's resolution of ``requirements`` (see resolve) in a scratch folder, its log kept as last-resolve.log."""
    root = prove_envs_folder()
    scratch = Path(tempfile.mkdtemp(prefix="resolve-", dir=_made(root)))
    try:
        return resolve(requirements, preferred or {}, scratch, progress)
    finally:
        log = (scratch / "resolve.log").read_text() if (scratch / "resolve.log").exists() else ""
        shutil.rmtree(scratch, ignore_errors=True)
        (root / "last-resolve.log").write_text(log)


def _pinned(pins: str) -> dict[str, str]:
    from grpo_compat.matrix.envs import _pin

    return dict(pin for pin in map(_pin, pins.splitlines()) if pin)


def env_of(pins: str, progress: Progress | None = None) -> Path:
    """The python of the throwaway env holding exactly ``pins`` (uv's resolved set), built unless cached."""
    from grpo_compat.matrix.envs import _run, pip_find_links, uv_command

    root = prove_envs_folder()
    key = hashlib.sha256(f"{sys.version}\n{pins}".encode()).hexdigest()[:16]
    env = root / key
    python = env / "bin" / "python"
    if (env / ".grpo-compat-prove-env").exists() and python.exists():
        _link_grpo_compat(env)
        return python
    shutil.rmtree(env, ignore_errors=True)
    log = root / f"{key}.log"
    log.write_text("")
    uv = uv_command()
    _run([*uv, "venv", "--quiet", "--python", sys.executable, str(env)], log, "creating the env", progress)
    (env / "requirements.txt").write_text(pins)
    links = [arg for link in pip_find_links() for arg in ("--find-links", link)]
    install = [*uv, "pip", "install", "--quiet", "--no-deps", "--python", str(python), *links]
    _run([*install, "-r", str(env / "requirements.txt")], log, f"installing {len(_pinned(pins))} packages", progress)
    _link_grpo_compat(env)
    (env / ".grpo-compat-prove-env").write_text(pins)
    return python


def lacking_in(resolved: dict[str, str]) -> list[str]:
    """What the what-if says the resolved set lacks when its GRPO trainer loads: the packages the reading's fixes
    install that the set does not hold (ms-swift 4.5.3 imports msgspec and does not declare it), read from the API
    histories in about a second; built with the set, they spare a try that would only meet them. Fixes that move a
    package the set holds are left to the proposals' order."""
    from grpo_compat.static_check.hypothetical import SetModules, UnusableInput, import_findings

    versions = {_name(name): version for name, version in resolved.items()}
    try:
        found = import_findings(versions, SetModules.closed(versions, set(), here=False))
    except UnusableInput:
        return []
    lacking: list[str] = []
    for finding in found:
        options = requirement_options(finding.fix)
        for spec in options[0] if options else []:
            if _name(spec) not in versions and spec not in lacking:
                lacking.append(spec)
    return lacking


def _made(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _link_grpo_compat(env: Path) -> None:
    """grpo_compat in the env: this process's own package, by a link (nothing installed, its code live)."""
    import grpo_compat

    source = env / "grpo_compat_source"
    link = source / "grpo_compat"
    package = Path(grpo_compat.__file__).resolve().parent
    if not (link.is_symlink() and link.resolve() == package):
        source.mkdir(exist_ok=True)
        link.unlink(missing_ok=True)
        link.symlink_to(package, target_is_directory=True)
    where = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    done = subprocess.run([str(env / "bin" / "python"), "-c", where], capture_output=True, text=True, check=True)
    Path(done.stdout.strip(), "_grpo_compat_source.pth").write_text(f"{source}\n")


def _own_dependencies() -> list[str]:
    from grpo_compat.matrix.envs import _own_dependencies as own

    return own() or ["packaging", "PyYAML"]


def with_change(installed: dict[str, str], change: list[str]) -> tuple[list[str], dict[str, str]]:
    """The requirements and preferences of ``installed`` plus ``change``: every installed distribution by name (its
    version preferred), a changed one by the change's specifier; torch stays the installed build."""
    changed = {_name(spec) for spec in change}
    kept = {name: version for name, version in installed.items() if _name(name) not in {*changed, "grpo-compat"}}
    requirements = [f"torch=={kept['torch']}" if _name(name) == "torch" else name for name in sorted(kept)]
    return [*requirements, *change, *_own_dependencies()], kept


def prove_change(
    python: str | None,
    stack: str,
    change: list[str],
    settings: dict[str, Any],
    progress: Progress | None = None,
    complete: bool = False,
    stop: threading.Event | None = None,
) -> dict[str, Any]:
    """Build the set of ``python`` plus ``change`` (``python`` None: ``change`` alone, a whole set) and probe it:
    {change, command, trains, probe | error, seconds, lacking}. ``complete``: what the what-if says the resolved set
    would lack at the trainer's import is added to the change before anything is built (lacking_in). ``stop`` set:
    Stopped is raised."""
    from grpo_compat.matrix.envs import EnvBuildError, uv_error

    started = time.monotonic()
    command = "pip install " + " ".join(f"'{spec}'" for spec in change)
    outcome: dict[str, Any] = {"change": change, "command": command, "trains": False}
    installed = {_name(name): version for name, version in installed_set(python).items()} if python else {}
    requirements, preferred = with_change(installed, change)
    try:
        pins = resolved_pins(requirements, preferred, progress)
        lacking = lacking_in(_pinned(pins)) if complete else []
        if lacking:
            if progress:
                progress(f"the reading says the resolved set lacks {', '.join(lacking)}: added before building")
            outcome["lacking"] = lacking
            pins = resolved_pins([*requirements, *lacking], preferred, progress)
        if stop is not None and stop.is_set():
            raise Stopped
        env_python, resolved = env_of(pins, progress), _pinned(pins)
    except EnvBuildError as error:
        outcome["error"] = f"uv cannot build it: {uv_error(error)}"
    else:
        moved = {name: version for name, version in resolved.items() if installed.get(name) != version}
        outcome["moved"] = {name: f"{installed.get(name, 'none')} -> {version}" for name, version in moved.items()}
        # what ran, exactly: a range ("trl>=0.17") left to the user's pip could resolve to another set
        outcome["command"] = "pip install " + " ".join(
            f"'{name}=={version}'" for name, version in sorted(moved.items())
        )
        outcome["probe"] = run_probe(str(env_python), stack, settings, throwaway=True, stop=stop)
        outcome["trains"] = passes(outcome["probe"])
    outcome["seconds"] = round(time.monotonic() - started, 1)
    return outcome


def prove_hypothetical(hypothetical, settings: dict[str, Any], progress: Progress | None = None) -> dict[str, Any]:
    """``check --with ... --prove``: the what-if's set built by uv in a throwaway env (this interpreter's set plus the
    requirements asked for; a lock's set alone) and the probe run there, its failures named with the what-if's
    findings. {stack, change, trains, probe | error, failures, moved, seconds}: prove_change's outcome."""
    from grpo_compat.static_check.hypothetical import (
        SetModules,
        import_findings,
        trainer_in_use,
        training_findings,
        what_if_findings,
    )

    stack = trainer_in_use(hypothetical.versions) or "trl"
    change = [spec for spec in hypothetical.requested if _name(spec) != "grpo-compat"]  # grpo_compat: this source
    if progress:
        progress(f"building the set with uv and running the probe: import {stack}'s GRPO trainer, then one GRPO step")
    outcome = prove_change(None if hypothetical.whole else sys.executable, stack, change, settings, progress)
    found = import_findings(hypothetical.versions, SetModules.of(hypothetical)) or training_findings(
        hypothetical.versions
    )
    findings = [finding.to_dict() for finding in found]
    findings += what_if_findings(hypothetical.versions, hypothetical.installed)
    outcome["failures"] = failures(outcome["probe"], findings) if "probe" in outcome else []
    return {"stack": stack, "whole": hypothetical.whole, **outcome}


def format_hypothetical_proof(outcome: dict[str, Any]) -> str:
    """The run of ``check --with ... --prove``: doctor --prove's wording for the built set, without fixes."""
    if "probe" not in outcome:
        return f"Run: cannot train: {outcome['error']}"  # uv cannot build the set
    proof = {"stack": outcome["stack"], "probe": outcome["probe"], "failures": outcome["failures"], "fixes_tried": []}
    if outcome["whole"]:
        built = f"the locked set of {len(outcome['moved'])} packages"
    else:
        moves = ", ".join(f"{name} {move}" for name, move in outcome["moved"].items()) or "nothing"
        built = f"this env's set plus the change, resolved by uv (moves: {moves})"
    return f"{format_run(proof)}\n  ran in {built}, built in a throwaway env; {outcome['seconds']} s in all"


def passes(probe: dict[str, Any]) -> bool:
    """The run's success: the stack's GRPO trainer (trl's, or ms-swift's through its pipeline) trained its step."""
    return bool(probe.get("trains"))


# How far a probe got, in the order it runs: the import, then the tiny model, the config, the trainer, the step.
PHASES = ("import", "model", "config", "trainer", "step", "trained")


def progress_of(probe: dict[str, Any]) -> int:
    """How far a probe got (PHASES' index; -1 for a probe that did not run)."""
    return PHASES.index(probe["phase"]) if probe.get("phase") in PHASES else -1


def on_top_of(change: list[str], furthest: list[str], stack: str) -> list[str]:
    """``change`` tried on top of the change that got furthest so far: its requirements on the packages ``change``
    does not name are kept (ms-swift 3.10: msgspec and trl>=0.17.0,<0.25 pass the import and the step fails in
    ms-swift's own code, on a machine without CUDA; the next try, a newer ms-swift, keeps them, where alone it meets
    the import failures they fixed again). Where ``change`` moves the trainer's own package, the kept requirements
    keep their lower bounds only: an upper bound came from what the old release allowed (ms-swift 3.10's trl<0.25;
    ms-swift 4.5 wants trl>=0.26), and the new release's own declarations bound the resolution instead."""
    named = {_name(spec) for spec in change}
    moves_stack = _name(stack) in named
    kept = [_lower_bounds(spec) if moves_stack else spec for spec in furthest if _name(spec) not in named]
    return [*change, *kept]


def _lower_bounds(spec: str) -> str:
    """``trl>=0.17.0,<0.25`` -> ``trl>=0.17.0``; ``msgspec`` -> ``msgspec``."""
    from packaging.requirements import Requirement

    requirement = Requirement(spec)
    lower = ",".join(str(s) for s in requirement.specifier if s.operator in (">=", ">", "!="))
    return f"{requirement.name}{lower}"


def _with_remaining_fixes(change: list[str], probe: dict[str, Any] | None, findings: list[dict[str, str]]) -> list[str]:
    """``change`` plus the reading's fix of the first failure still met after it (ms-swift 3.10 + trl 0.15:
    trl>=0.17.0 leaves msgspec missing, which the reading says to install): a change that got further, completed."""
    for item in failures(probe or {}, findings):
        options = requirement_options((item.get("finding") or {}).get("fix", ""))
        extra = [spec for spec in options[0] if _name(spec) not in {_name(c) for c in change}] if options else []
        if extra:
            return [*change, *extra]
    return []


# -- doctor --prove ---------------------------------------------------------------------------------------------------


def known_import_failures(versions: dict[str, str | None] | None = None) -> list[dict[str, Any]]:
    """The catalogue's known failures of ``versions`` (default: the installed ones) that stop the GRPO trainer's
    import (checks in compiled code the reading cannot see; doctor's errors too), as findings: their fixes are
    proposed like the reading's, and a run's error that one's patterns match is joined with it."""
    from grpo_compat.catalogue import affecting_this_install

    return [
        {"kind": "known-failure", "message": f"known failure {record.id}: {record.title}", "where": record.id,
         "fix": record.fix, "patterns": list(record.patterns)}
        for record in affecting_this_install(versions)
        if record.stops_the_import
    ]  # fmt: skip


class Speculation:
    """The fixes the reading proposes, tried while the probe of the installed set runs (a reading that finds what
    stops training is right on every measured set: the run will most likely need a fix, and the try's env build and
    probe, about as long as the run's, then overlap it on the second core). In the proposals' order, up to the first
    that builds and runs; each outcome is taken by the fix search when it tries the same change, and everything still
    running is ended when the run trains or the search needs another change."""

    def __init__(self, changes: list[list[str]], stack: str, settings: dict[str, Any], progress: Progress | None):
        self.changes = [tuple(change) for change in changes]
        self.current: tuple[str, ...] | None = None  # the change under way
        self.under_way_done = threading.Event()
        self.outcomes: dict[tuple[str, ...], dict[str, Any]] = {}
        self.stop = threading.Event()
        told = (lambda message: progress(f"(beside the run) {message}")) if progress else None
        self.thread = threading.Thread(target=self._try, args=(stack, settings, told), daemon=True)
        self.thread.start()

    def _try(self, stack: str, settings: dict[str, Any], progress: Progress | None) -> None:
        for change in self.changes:
            self.under_way_done = threading.Event()
            self.current = change  # after its event: whoever sees it under way waits on its own
            if progress:
                progress(f"proving the fix pip install {' '.join(change)}: the installed set plus it, built by uv")
            try:
                outcome = prove_change(sys.executable, stack, list(change), settings, progress, complete=True,
                                       stop=self.stop)  # fmt: skip
                self.outcomes[change] = {**outcome, "beside_the_run": True}
            except Stopped:
                return
            except Exception:  # noqa: BLE001 - the search tries the change itself, where the error surfaces
                return
            finally:
                self.under_way_done.set()
            if "probe" in self.outcomes[change]:
                return

    def outcome(self, change: list[str]) -> dict[str, Any] | None:
        """The outcome of trying ``change``, waiting for it where it is under way; None where it was not tried
        (whatever runs is then ended: the search needs another change, on the same cores)."""
        key = tuple(change)
        under_way, finished = self.current, self.under_way_done
        if key not in self.outcomes and key == under_way:
            finished.wait()
        if key not in self.outcomes:
            self.end()
        return self.outcomes.get(key)

    def end(self) -> None:
        self.stop.set()
        self.thread.join()


def prove(
    settings: dict[str, Any] | None = None, progress: Progress | None = None, fixes: int = MAX_TRIED_FIXES
) -> dict[str, Any]:
    """``grpo-compat doctor --prove``: the probe of this interpreter's set, its failures with causes, fixes tried."""
    import grpo_compat.static_check as static_check
    from grpo_compat.core.versions import installed_version
    from grpo_compat.static_check.files import Install
    from grpo_compat.static_check.imports import trainers_in_use

    settings = settings or {}
    stack = trainers_in_use(Install())[0]
    read = [finding.to_dict() for finding in static_check.check()]
    findings = read + known_import_failures()
    newer = f"{stack}>{installed_version(stack)}" if installed_version(stack) else None
    speculation = None
    if findings and fixes:
        speculation = Speculation(proposed_changes([], findings, newer)[:fixes], stack, settings, progress)
    if progress:
        progress(f"running the probe: import {stack}'s GRPO trainer, then one GRPO step on a tiny local model")
    try:
        probe = run_probe(sys.executable, stack, settings)
        failed = failures(probe, findings)
        tried = [] if passes(probe) else _fix_search(probe, failed, findings, stack, settings, progress, fixes,
                                                     newer, speculation)  # fmt: skip
    finally:
        if speculation:
            speculation.end()
    return {"stack": stack, "probe": probe, "failures": failed, "fixes_tried": tried, "static_check": read}


def _fix_search(
    probe: dict[str, Any],
    failed: list[dict[str, Any]],
    findings: list[dict[str, Any]],
    stack: str,
    settings: dict[str, Any],
    progress: Progress | None,
    fixes: int,
    newer: str | None,
    speculation: Speculation | None,
) -> list[dict[str, Any]]:
    """The changes tried after a run that does not train, best first, up to the first that trains (at most
    ``fixes``): each built with what the reading says the resolved set lacks, and the next kept on top of the one
    that got furthest."""
    tried: list[dict[str, Any]] = []
    queue = proposed_changes(failed, findings, newer, raiser_as_of(probe, stack))
    furthest: tuple[int, list[str]] = (progress_of(probe), [])  # the change that got furthest, and how far
    while queue and len(tried) < fixes:
        change = on_top_of(queue.pop(0), furthest[1], stack)
        if any(change == t["change"] for t in tried):
            continue
        outcome = speculation.outcome(change) if speculation else None
        if outcome is None:
            if progress:
                progress(f"proving the fix pip install {' '.join(change)}: the installed set plus it, built by uv")
            outcome = prove_change(sys.executable, stack, change, settings, progress, complete=True)
        tried.append(outcome)
        if outcome["trains"]:
            break
        if progress_of(outcome.get("probe") or {}) > furthest[0]:
            furthest = (progress_of(outcome["probe"]), change)
        further = _with_remaining_fixes(change, outcome.get("probe"), findings)
        if further and further not in queue and all(further != t["change"] for t in tried):
            queue.insert(0, further)
    return tried


def format_proof(proof: dict[str, Any]) -> str:
    lines = [format_run(proof)]
    if passes(proof["probe"]):
        return lines[0]
    for outcome in proof["fixes_tried"]:
        if outcome["trains"]:
            moved = ", ".join(f"{n} {v}" for n, v in outcome["moved"].items()) or "nothing else"
            lines.append(f"Proven fix: {outcome['command']}")
            lines.append(f"  trained one GRPO step in the installed set plus this change, resolved by uv "
                         f"(moves: {moved}; {outcome['seconds']} s)")  # fmt: skip
            if outcome.get("lacking"):
                them = "it" if len(outcome["lacking"]) == 1 else "them"
                lines.append(f"  with {', '.join(outcome['lacking'])}: the reading of the resolved set said its GRPO "
                             f"trainer imports {them} and nothing in it provides {them}")  # fmt: skip
        else:
            still = outcome.get("error") or _first_failure(outcome["probe"])
            lines.append(f"Tried {outcome['command']} (the installed set plus it, resolved by uv): still fails: "
                         f"{still}")  # fmt: skip
    if not proof["fixes_tried"]:
        lines.append("No fix tried: none is printed as proven")
    elif not any(outcome["trains"] for outcome in proof["fixes_tried"]):
        lines.append("No proven fix")
    return "\n".join(lines)


def format_run(proof: dict[str, Any]) -> str:
    """The probe's verdict, and each failure with the reading's cause where it has one."""
    probe = proof["probe"]
    trainer = probe.get("trainer", proof["stack"])
    if probe.get("trains"):
        return f"Run: trains: {trainer} imported and trained one GRPO step on a tiny local model ({probe['wall_s']} s)"
    missing = probe.get("missing") or []
    where = f"the import of {trainer}" if probe.get("phase") == "import" else f"the {probe.get('phase')} phase"
    lines = [f"Run: cannot train: {where} fails ({probe.get('wall_s')} s)"]
    if missing:
        lines.append(f"  the import meets {len(missing)} missing, in order:")
    for number, item in enumerate(proof["failures"], 1):
        lines.append(f"  {number}. {item['error']} (at {item['where'] or '?'})")
        if item.get("finding"):
            lines.append(f"     why: {item['finding']['message']} ({item['finding']['where']})")
    return "\n".join(lines)


def _first_failure(probe: dict[str, Any]) -> str:
    missing = probe.get("missing") or []
    if missing:
        return f"{missing[0]['kind']} {missing[0]['name']} (and {len(missing) - 1} more)" if len(missing) > 1 else (
            f"{missing[0]['kind']} {missing[0]['name']}")  # fmt: skip
    error = probe.get("error") or {}
    return f"{error.get('type')}: {str(error.get('message'))[:200]} ({probe.get('phase')})"
