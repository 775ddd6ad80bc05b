"""ms-swift's command line: the file for ``--external_plugins``, and what it does in each process.

    swift rlhf --rlhf_type grpo ... --external_plugins "$(grpo-compat plugin-path)" [your_plugin.py ...]

``swift rlhf`` starts new processes (one per rank under NPROC_PER_NODE), so ``grpo_compat.apply()``
in the user's shell reaches none of them. Every ms-swift version imports the ``--external_plugins``
files in each of those processes while it parses the arguments (``BaseArguments.__post_init__``),
before it builds the GRPOConfig and long before the model loads. The shipped file calls
:func:`activate`, which applies grpo_compat, refuses impossible GRPO arguments there and then, and
logs the report once (rank 0) when swift's GRPO trainer module has loaded and every status is final.

Importing this module imports neither torch nor swift: ``grpo-compat plugin-path`` uses it.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

# Alone in its folder: ms-swift puts the plugin's folder first on sys.path for the rest of the run,
# and imports the file by its base name on 3.x (so not "plugin", and no dot before ".py").
PLUGIN_FILE = Path(__file__).resolve().parent / "swift_plugin_file" / "grpo_compat_swift_plugin.py"
# The non-Megatron RLHFArguments (4.x, 3.x): Megatron's GRPO arguments have other batch fields.
RLHF_ARGUMENT_MODULES = ("swift.arguments.rlhf_args", "swift.llm.argument.rlhf_args")
ARGUMENTS_CHECKED_IN = "RLHFArguments.__post_init__"  # what the arguments-time patches wrap
IMPORTING_FUNCTION = "_import_external_plugins"  # BaseArguments' method, in ms-swift 3.x and 4.x


def plugin_path() -> str:
    """The absolute path of the plugin file to pass to ``swift ... --external_plugins``."""
    return str(PLUGIN_FILE)


def arguments_being_parsed() -> Any:
    """The swift arguments object whose ``__post_init__`` is importing the plugins, or None.

    The patch on ``RLHFArguments.__post_init__`` comes too late for this object: apply() wraps the
    class while that very call is running. So the plugin takes the object from the importing frame.
    """
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == IMPORTING_FUNCTION and hasattr(frame.f_locals.get("self"), "external_plugins"):
            return frame.f_locals["self"]
        frame = frame.f_back
    return None


def is_swift_grpo(arguments: Any) -> bool:
    """``swift rlhf --rlhf_type grpo`` arguments (not rollout, deploy, sft or Megatron ones)."""
    classes = [getattr(sys.modules.get(name), "RLHFArguments", None) for name in RLHF_ARGUMENT_MODULES]
    known = tuple(cls for cls in classes if isinstance(cls, type))
    return bool(known) and isinstance(arguments, known) and getattr(arguments, "rlhf_type", None) == "grpo"


def activate() -> None:
    """Apply grpo_compat in this process and check the GRPO arguments swift is parsing."""
    import multiprocessing

    if multiprocessing.parent_process() is not None:
        # ms-swift 4.x re-imports plugins in spawned DataLoader workers; the rank itself already did this.
        return
    import grpo_compat
    from grpo_compat.core.logs import log
    from grpo_compat.fixes.detectors import SWIFT_GRPO_TRAINER_MODULES

    arguments = arguments_being_parsed()
    grpo = is_swift_grpo(arguments)
    if not grpo_compat.report().active:  # the user's own script may have applied it already
        if grpo:  # logged once swift's GRPO trainer (and through it trl's) has loaded: every status is final
            grpo_compat._engine.defer_report(SWIFT_GRPO_TRAINER_MODULES)
        grpo_compat.apply()
    if arguments is None:
        log("debug", "swift plugin: imported outside ms-swift's argument parsing; no arguments to check")
    elif grpo:
        check_arguments_being_parsed(arguments, grpo_compat.report())


def check_arguments_being_parsed(arguments: Any, report: Any) -> None:
    """Run the applied patches on ``RLHFArguments.__post_init__`` for ``arguments``, outermost first.

    apply() wrapped the class while this object's ``__post_init__`` was already running, so their
    wrappers are called here with a ``__post_init__`` that does nothing: upstream's is under way.
    """
    from grpo_compat.core.registry import declared_patches, declared_wrapping_order
    from grpo_compat.core.report import Status

    position = {patch_id: index for index, patch_id in enumerate(declared_wrapping_order())}
    patches = sorted(declared_patches(), key=lambda p: position.get(p.id, len(position)))
    for declared in patches:
        if report.status_of(declared.id) is not Status.APPLIED:
            continue
        patch = declared.load()  # already imported: an applied patch's module was loaded to wrap its target
        for target in patch.targets:
            if target.module in RLHF_ARGUMENT_MODULES and target.qualname == ARGUMENTS_CHECKED_IN:
                target.wrapper(_post_init_under_way, arguments)


def _post_init_under_way(*args: Any, **kwargs: Any) -> None:
    return None
