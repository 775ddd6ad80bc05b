"""The static check of the installed set: what loading trl's or ms-swift's GRPO trainer would trip over, found by
reading the installed files (no import of trl, transformers, vLLM ...).

It walks the modules of trl (and ms-swift) that ``trl.trainer.grpo_trainer`` / ``from trl import GRPOTrainer`` (and
ms-swift's GRPO trainer) reach through module-level imports, and finds:

- ``missing-module``: an import whose module is not installed, where its guard holds here (``try/except
  ImportError`` never requires it unless the handler re-raises; ``if is_vllm_available():`` evaluated from the
  check's installed body, guards.py); the distribution's Requires-Dist says whether it declares it (or only in an
  extra);
- ``attribute``: ``self.X`` read by a method that runs, which only an ``__init__`` that does not run sets
  (attributes.py), or an attribute a running ``__init__`` reads on an annotated parameter that a release of its class
  had and the installed one no longer sets (objects.py: trl 0.24's ``model.warnings_issued``); ``kernel``: an
  optional compiled kernel set to None here and called untested; ``build``: a torchvision / torchaudio made for
  another torch (builds.py);
- ``missing-name``: ``from M import name`` where the installed M neither defines, re-exports nor lazily exports it;
- ``override``: a method trl's trainer overrides (ms-swift's: trl's or transformers') that the installed base calls
  with arguments the override does not take (``self.m(...)``, ``super().m(...)``, or ``self.m`` handed to a base
  method that calls it);
- ``keyword``: a keyword trl / ms-swift passes to a transformers / vLLM / peft function or class that the installed
  one does not take.

Precision over recall: whatever cannot be resolved statically (a ``__getattr__`` module, a compiled module, a call
under a version or signature test) is left alone, since a false finding on a stack that trains is harm.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from grpo_compat.static_check.files import Finding, Install

__all__ = ["CHECK_VERSION", "READ_NOT_RUN", "Finding", "Install", "check", "find", "log_findings_once"]

TRAINER_CLASSES = {
    "trl": ("trl.trainer.grpo_trainer", "GRPOTrainer"),
    "ms-swift": ("swift.rlhf_trainers.grpo_trainer", "GRPOTrainer"),
}
SWIFT_TRAINER_3X = ("swift.trainers.rlhf_trainer.grpo_trainer", "GRPOTrainer")


def __getattr__(name: str):
    # Finding, Install and CHECK_VERSION load with the reader they belong to: apply()'s cached lookup needs neither.
    if name in ("Finding", "Install"):
        import grpo_compat.static_check.files as files

        return getattr(files, name)
    if name == "CHECK_VERSION":
        from grpo_compat.static_check.stamp import CHECK_VERSION

        return CHECK_VERSION
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def find(install: Install) -> list[Finding]:
    """Every finding of an installed set, uncached: the import walk, then the trainers' overrides and keywords."""
    import gc

    # The parsed trees hold no cycles; the cyclic collector, run again and again over hundreds of thousands of live
    # nodes, was more than half the time (ms-swift 4.6: 2.6 s of CPU with it, 1.0 s without).
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _find(install)
    finally:
        install.drop_sources()  # before the collector runs again: see Install.drop_sources
        if collecting:
            gc.enable()


def _find(install: Install) -> list[Finding]:
    import grpo_compat.static_check.calls as calls
    from grpo_compat.static_check.attributes import attribute_findings
    from grpo_compat.static_check.imports import ImportWalk, trainers_in_use
    from grpo_compat.static_check.objects import object_attribute_findings

    walk = ImportWalk(install)
    walk.run()
    findings = list(walk.findings)
    for distribution in trainers_in_use(install):
        entry = TRAINER_CLASSES[distribution]
        if distribution == "ms-swift" and install.find(entry[0]) is None:
            entry = SWIFT_TRAINER_3X
        if install.version(distribution) and install.find(entry[0]):
            findings += calls.override_findings(install, entry)
            findings += attribute_findings(install, entry, walk.walked)
            findings += object_attribute_findings(install, entry, walk.walked)
    for module in list(walk.walked.values()):
        findings += calls.keyword_findings(install, module)
    from grpo_compat.static_check.builds import build_findings, kernel_findings

    findings = build_findings(install) + findings  # torchvision is met when transformers loads, before the trainer
    for distribution in trainers_in_use(install):
        findings += kernel_findings(install, walk.walked, TRAINER_CLASSES[distribution][0])
    from grpo_compat.static_check.fixes import collapse

    return collapse(install, findings)


# -- the check, its cache, and how the tools show it -----------------------------------------------------------------


def cache_folder() -> str:
    from grpo_compat.core.paths import user_cache_folder

    return user_cache_folder("static-check")


def check(paths: list[str] | None = None, use_cache: bool = True) -> list[Finding]:
    """The findings of the installed set (``sys.path``, or the given folders), cached by its versions."""
    import json

    from grpo_compat.static_check.files import Finding, Install

    install = Install(paths)
    if not any(install.version(d) for d in TRAINER_CLASSES):
        return []
    path = os.path.join(cache_folder(), f"{install.key()}.json")
    if use_cache:
        try:
            with open(path, encoding="utf-8") as handle:
                return [Finding(**item) for item in json.load(handle)]
        except (OSError, ValueError, TypeError):
            pass
    findings = find(install)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        temporary = f"{path}.{os.getpid()}"
        with open(temporary, "w", encoding="utf-8") as handle:
            json.dump([f.to_dict() for f in findings], handle)
        os.replace(temporary, path)
    except OSError:
        pass  # a read-only home: the check runs again next time
    return findings


# Said with every answer of the check: a reading of the installed files, not a run of the trainer.
READ_NOT_RUN = "read from the installed code, not run; `grpo-compat doctor --prove` runs it"

REPORTED_ENV = "GRPO_COMPAT_STATIC_CHECKED"  # set by `grpo-compat run`: its processes do not log the findings again


def log_findings_once() -> None:
    """apply() / ``grpo-compat run``: each finding as one warning, once per launch (never a refusal)."""
    if os.environ.get(REPORTED_ENV) == "1":
        return
    from grpo_compat.core.logs import is_main_process, log

    os.environ[REPORTED_ENV] = "1"  # the processes this one starts have been told
    if not is_main_process():
        return
    from grpo_compat.static_check import stamp

    installed = stamp.installed_stamp()
    lines = stamp.read_lines(cache_folder(), installed)
    if lines is None:
        try:
            lines = [finding.line() for finding in check()]
        except Exception as error:  # noqa: BLE001 - the check must never stop a run upstream would start
            log("debug", "static check of the installed set failed: %s: %s", type(error).__name__, error)
            return
        stamp.save_lines(cache_folder(), installed, lines)
    for line in lines:
        log("warning", "static check: %s (%s)", line, READ_NOT_RUN)
