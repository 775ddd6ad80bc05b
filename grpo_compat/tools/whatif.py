"""``grpo-compat check --with PIN`` / ``--requirements FILE``: what a set of versions would do before anyone installs
it, read from the API histories (grpo_compat.static_check.hypothetical): what would stop the GRPO trainer's import,
what the packages declare that the set breaks, and which settings the change of trl / ms-swift changes.

Exit status as ``check``'s: 1 when something would stop training, 0 when the reading finds nothing, 2 for input it
cannot use (an unknown release, a requirement it cannot parse). With ``--prove`` the set is built and run
(grpo_compat.tools.prove.prove_hypothetical), and the run decides: 0 when it trains, 1 when it cannot, as
``doctor --prove``.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable

    from grpo_compat.static_check.hypothetical import HypotheticalSet

SETTINGS_PACKAGES = ("trl", "ms-swift")
READING = "read from the API histories: nothing installed, nothing imported"


def report(hypothetical: HypotheticalSet) -> dict:
    """Everything the what-if says about a set, as one JSON-serialisable dict (``ok``: nothing stops training)."""
    from grpo_compat.static_check import hypothetical as reading

    versions = hypothetical.versions
    trainer = reading.trainer_in_use(versions)
    imports = reading.import_findings(versions, reading.SetModules.of(hypothetical))
    # which of them the installed set has too (the walk of the installed set only where there is something to tell)
    installed = reading.SetModules.installed(hypothetical) if imports else None
    already = {f.message for f in reading.import_findings(hypothetical.installed, installed)} if imports else set()
    training = reading.training_findings(versions) if not imports else []  # a trainer that cannot load never steps
    requirements = reading.requirement_findings(hypothetical)
    # what building the trainer reads on its arguments: the installed trainer's code, where the set keeps its release
    build = reading.what_if_findings(versions, hypothetical.installed) if not imports else []  # nothing built then
    stopping, entered = _known_failures(hypothetical)
    return {
        "ok": not imports and not build and not training and not requirements and not stopping,
        "trainer": f"{trainer} {versions[trainer]}" if trainer else None,
        "changed": {name: {"installed": old, "set": new} for name, (old, new) in sorted(hypothetical.changed.items())},
        "picked": hypothetical.picked,
        "not_judged": hypothetical.unread,
        "dependencies_not_judged": sorted(hypothetical.unjudged),
        "import": [{**f.to_dict(), "installed_too": f.message in already} for f in imports],
        "build": build,
        "training": [f.to_dict() for f in training],
        "requirements": [f.to_dict() for f in requirements],
        "known_import_failures": stopping,
        "known_failures": entered,
        "settings": _settings_changes(hypothetical),
        "versions": dict(sorted(versions.items())),
    }


# The packages of the GRPO trainers' modules, as a catalogue record's error pattern writes them (``trl\.trainer``).
TRAINER_PACKAGES = ("trl.trainer", "swift.rlhf_trainers", "swift.trainers.rlhf_trainer")


def stops_the_trainer_import(failure) -> bool:
    """A catalogue record that says the GRPO trainer's own module fails to import: a crash no patch fixes, not tied
    to settings (no hints), whose error pattern is an import failure of the trainer's package. Whatever the config,
    such a set does not train (trl 0.19-0.28 on transformers >= 5.3: an always-true availability check, which the
    import reading now evaluates from the histories' guard statements too, and names as one finding); or one that says
    so itself (``stops = "import"``: pyarrow 26 beside NumPy 1.x raises in compiled code)."""
    if failure.stops_the_import:
        return True
    if failure.kind != "crash" or failure.handling == "fixed" or failure.hints:
        return False
    for pattern in failure.patterns:
        text = pattern.replace("\\.", ".")
        if re.search(r"import|No module named", text) and any(package in text for package in TRAINER_PACKAGES):
            return True
    return False


def _known_failures(hypothetical: HypotheticalSet) -> tuple[list[dict], list[dict]]:
    """(records that stop the trainer's import, the other records the set newly enters) of the failure catalogue."""
    from grpo_compat.catalogue import load_failures

    failures = load_failures()
    before = {failure.id for failure in failures if failure.affects_versions(hypothetical.installed)}
    stopping, entered = [], []
    for failure in (failure for failure in failures if failure.affects_versions(hypothetical.versions)):
        record = {"id": failure.id, "kind": failure.kind, "handling": failure.handling, "title": failure.title}
        record["fix"] = failure.fix
        if stops_the_trainer_import(failure):
            stopping.append({**record, "installed_too": failure.id in before})
        elif failure.id not in before and failure.kind != "misleading":
            entered.append(record)
    return stopping, entered


def _settings_changes(hypothetical: HypotheticalSet, config: dict | None = None) -> list[dict]:
    """What the change of trl / ms-swift changes under a config (its defaults, without one): ``check --from``'s."""
    from grpo_compat.settings import upgrade
    from grpo_compat.settings.history import load

    found = []
    for package in SETTINGS_PACKAGES:
        old, new = hypothetical.installed.get(package), hypothetical.versions.get(package)
        if not old or not new or old == new:
            continue
        history = load(package)
        old_release, new_release = history.nearest(old), history.nearest(new)
        if old_release is None or new_release is None or old_release == new_release:
            continue
        changes = upgrade.changes(config or {}, package, old_release, new_release)
        found.append(
            {
                **upgrade.as_json(changes, package, old_release, new_release),
                "table": upgrade.table(changes, package, old_release, new_release),
            }
        )
    return found


def format_report(result: dict, hypothetical: HypotheticalSet) -> str:
    lines = [f"What-if ({READING}):"]
    if result["changed"]:
        lines += [
            f"  {name} {c['installed'] or '(not installed)'} -> {c['set']}" for name, c in result["changed"].items()
        ]
    else:
        lines.append("  the installed set, unchanged")
    lines += [f"  picked: {line}" for line in result["picked"]]
    lines += [f"  not judged: {line}" for line in result["not_judged"]]
    if result["dependencies_not_judged"]:
        names = result["dependencies_not_judged"]
        more = f" and {len(names) - 12} more (--json lists them)" if len(names) > 12 else ""
        lines.append(f"  dependencies it adds or moves with no API history, not judged: {', '.join(names[:12])}{more}")
    trainer = result["trainer"]
    if trainer is None:
        lines.append("No trl or ms-swift in the set: no GRPO trainer to read.")
    else:
        lines.append(f"Loading {trainer.split()[0]}'s GRPO trainer ({trainer}):")
        for finding in result["import"]:
            already = " (so with the installed set too)" if finding["installed_too"] else ""
            lines.append(f"  error: {finding['message']} ({finding['where']}){already}")
            lines.append(f"    fix: {finding['fix']}")
        for failure in result["known_import_failures"]:
            already = " (so with the installed set too)" if failure["installed_too"] else ""
            lines.append(f"  error: known failure {failure['id']}: {failure['title']}{already}")
            lines.append(f"    fix: {failure['fix']}")
        if not result["import"] and not result["known_import_failures"]:
            lines.append("  nothing the histories record fails")
        if result["build"]:
            read = "its API history" if trainer.split()[0] in result["changed"] else "its installed code"
            lines.append(f"Building {trainer.split()[0]}'s GRPO trainer ({read}, {trainer}):")
        for finding in result["build"]:
            already = " (so with the installed set too)" if finding["installed_too"] else ""
            lines.append(f"  error: {finding['message']} ({finding['where']}){already}")
            lines.append(f"    fix: {finding['fix']}")
        if result["training"]:
            lines.append("Its first training step:")
        for finding in result["training"]:
            lines.append(f"  error: {finding['message']} ({finding['where']})")
            lines.append(f"    fix: {finding['fix']}")
    if result["requirements"]:
        lines.append("Declared requirements the set breaks (pip refuses the set, or installs it with a conflict):")
        for finding in result["requirements"]:
            lines.append(f"  error: {finding['message']}")
            lines.append(f"    fix: {finding['fix']}")
    if result["known_failures"]:
        lines.append("Known failures these versions enter (some need a model or settings; grpo-compat doctor "
                     "--failure ID):")  # fmt: skip
        for failure in result["known_failures"]:
            fixed = " (grpo_compat's patches fix it)" if failure["handling"] == "fixed" else ""
            lines.append(f"  {failure['id']}: {failure['title']}{fixed}")
    for changes in result["settings"]:
        lines += ["", changes["table"]]
    lines.append(verdict(result))
    return "\n".join(lines)


def verdict(result: dict) -> str:
    if result["ok"]:
        trainer = result["trainer"] or "the set"
        return (
            f"ok: nothing the API histories record stops {trainer}'s GRPO trainer from importing with this set "
            "(a reading, not a run)"
        )
    imports = len(result["import"]) + len(result["known_import_failures"])
    requirements = len(result["requirements"])
    reasons = []
    if imports:
        reasons.append(f"{result['trainer']}'s GRPO trainer would fail to import ({imports} finding(s))")
    if result["build"]:
        reasons.append(f"{result['trainer']}'s GRPO trainer could not be built ({len(result['build'])} finding(s))")
    if result["training"]:
        reasons.append(f"its first training step would fail ({len(result['training'])} finding(s))")
    if requirements:
        reasons.append(f"{requirements} declared requirement(s) broken")
    return "would not train: " + "; ".join(reasons)


def run(args: argparse.Namespace, check_settings: Callable[[argparse.Namespace], int]) -> int:
    """``check --with`` / ``--requirements``, with a config or settings: ``check_settings`` (``check`` itself) judges
    them against the set's trl / ms-swift, and the upgrade's drift is listed for that config."""
    from grpo_compat.static_check.hypothetical import UnusableInput, hypothetical_set
    from grpo_compat.tools.errors import InputError

    if args.trl_version or args.swift_version:
        raise InputError("--with / --requirements choose the versions: leave --trl-version / --swift-version out")
    try:
        hypothetical = hypothetical_set(args.with_pins, args.requirements)
    except UnusableInput as error:
        raise InputError(str(error)) from None
    result = report(hypothetical)
    settings_status, settings_output = 0, None
    settings = _probe_settings(args) if args.prove else {}
    if args.arguments:
        settings_status, settings_output = _check_settings(args, hypothetical, check_settings)
        result["settings"] = []  # the settings check lists the drift for the config itself (--from)
    if settings_output is not None and not args.json:
        print(settings_output.rstrip("\n"))
        print()
    if not args.json:
        print(format_report(result, hypothetical), flush=True)
    verdict_status = 0 if result["ok"] else 1
    if args.prove:
        from grpo_compat.tools.prove import format_hypothetical_proof, prove_hypothetical

        def progress(message: str) -> None:
            print(message, file=sys.stderr, flush=True)

        result["prove"] = prove_hypothetical(hypothetical, settings, None if args.json else progress)
        verdict_status = 0 if result["prove"]["trains"] else 1  # the run decides, as doctor --prove
        if not args.json:
            print(format_hypothetical_proof(result["prove"]))
    if args.json:
        if settings_output is not None:
            result["settings_check"] = json.loads(settings_output)
        print(json.dumps(result, indent=2))
    return max(settings_status, verdict_status)


def _probe_settings(args: argparse.Namespace) -> dict:
    """The settings the run trains with: the config file given to check, if one is (its trl settings), else none."""
    from pathlib import Path

    if args.swift or len(args.arguments) != 1 or not Path(args.arguments[0]).is_file():
        return {}
    from grpo_compat.tools.preflight import load_config_file

    return load_config_file(Path(args.arguments[0]))


def _check_settings(
    args: argparse.Namespace, hypothetical: HypotheticalSet, check_settings: Callable[[argparse.Namespace], int]
) -> tuple[int, str]:
    """``check``'s own judgement of the config against the set's trl (or ms-swift), and --from the installed one."""
    from grpo_compat.settings.history import load

    package = "ms-swift" if args.swift else "trl"
    new, old = hypothetical.versions.get(package), hypothetical.installed.get(package)
    known = load(package).releases
    args.with_pins, args.requirements = [], None
    if new and new != old and new in known:
        setattr(args, "swift_version" if args.swift else "trl_version", new)
        if old and not args.from_version and load(package).nearest(old):
            args.from_version = f"{package}=={load(package).nearest(old)}"
    captured = io.StringIO()
    with contextlib.redirect_stdout(captured):
        status = check_settings(args)
    return status, captured.getvalue()
