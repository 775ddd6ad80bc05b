"""ms-swift's GRPO settings as each version reads them, and the refusal of those that cannot train.

Used at run time by the ms-swift patch (swift.grpo-arguments-check) and the ms-swift plugin, and by
``grpo-compat check --swift``. ms-swift's defaults differ from TRL's and between its versions.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable

from grpo_compat.core.versions import release
from grpo_compat.fixes.validation import (
    GRPOSettings,
    eval_is_enabled,
    field_getter,
    launched_world_size,
    refuse_unless_valid,
    rules_for,
    settings_from,
)

DEEPSPEED_STAGES = {"zero0": 0, "zero1": 1, "zero2": 2, "zero2_offload": 2, "zero3": 3, "zero3_offload": 3}


def swift_settings(source: object, world_size: int, swift_version: str) -> GRPOSettings:
    """Settings of `swift rlhf` arguments (a mapping, or swift's RLHFArguments), with ms-swift's own GRPO
    defaults: they differ from TRL's and between versions."""
    get = field_getter(source)
    pdbs = get("per_device_train_batch_size", 1)
    ga = get("gradient_accumulation_steps", None)
    if ga is None:  # 3.12+ default to 1 for GRPO; earlier versions to ceil(16 / batch / processes)
        ga = (
            1
            if release(swift_version) >= (3, 12) or not isinstance(pdbs, int) or pdbs < 1
            else max(1, math.ceil(16 / pdbs / world_size))
        )
    # Evaluation needs validation data: a val_dataset, or a split (default 1% before 3.12, none after).
    split = get("split_dataset_ratio", 0.01 if release(swift_version) < (3, 12) else 0)
    has_eval_data = bool(get("val_dataset", None)) or split not in (0, "0", "0.0", None)
    deepspeed = get("deepspeed", None)
    return settings_from(
        source,
        per_device_train_batch_size=pdbs,
        gradient_accumulation_steps=ga,
        per_device_eval_batch_size=get("per_device_eval_batch_size", 1),
        world_size=world_size,
        eval_enabled=has_eval_data and eval_is_enabled(get("eval_strategy", None) or "steps"),
        deepspeed_stage=DEEPSPEED_STAGES.get(str(deepspeed)) if deepspeed else None,
        has_teacher=has_teacher(get),
        has_rewards=has_rewards(get),
    )


def has_teacher(get: Callable[..., object]) -> bool:
    return bool(get("teacher_model", None) or get("teacher_model_server", None))


def has_rewards(get: Callable[..., object]) -> bool:
    """Whether something may score the completions: a reward function or model, a gym environment (4.3's
    --use_gym_env), or a vLLM server, whose gym environment swift's GRPOTrainer asks about only once it is built."""
    server = bool(get("use_vllm", False)) and get("vllm_mode", None) == "server"
    gym = bool(get("use_gym_env", None) or get("gym_env", None))
    return bool(get("reward_funcs", None) or get("reward_model", None) or gym or server)


def swift_settings_to_check(arguments: object, swift_version: str) -> GRPOSettings:
    """What grpo_compat checks of ms-swift's RLHFArguments: every rule on 4.x; sequence parallel and a teacher
    without rewards on 3.x.

    ms-swift 3.x builds trl's GRPOConfig from them, which trl.grpo-config-check refuses before any
    model loads; the defaults for the rest pass every batch rule. 4.x skips trl's checks.
    """
    if release(swift_version) < (4,):
        get = field_getter(arguments)
        return GRPOSettings(
            sequence_parallel_size=get("sequence_parallel_size", 1),
            has_teacher=has_teacher(get),
            has_rewards=has_rewards(get),
        )
    return swift_settings(arguments, launched_world_size(), swift_version)


# Arguments objects already checked: an in-process apply() and the swift plugin may both see one.
_checked_swift_arguments: weakref.WeakValueDictionary[int, object] = weakref.WeakValueDictionary()


def refuse_impossible_swift_grpo(arguments: object) -> None:
    """Raise GRPOSettingsError when ms-swift GRPO arguments cannot train (naming a fix); once per object."""
    if getattr(arguments, "rlhf_type", None) != "grpo" or _checked_swift_arguments.get(id(arguments)) is arguments:
        return
    from grpo_compat.core import versions  # read at call time: a test stands in an older ms-swift release there

    swift_version = versions.installed_version("ms-swift") or "4"  # swift's own arguments: it is installed
    rules = rules_for(versions.installed_version("trl"), swift_version)
    refuse_unless_valid(swift_settings_to_check(arguments, swift_version), rules)
    try:
        _checked_swift_arguments[id(arguments)] = arguments
    except TypeError:  # an object without weak references is checked again next time, which is harmless
        pass


# ms-swift 3.5 (where --vllm_mode came) to 3.11 take --vllm_mode server with use_vllm false and fail at the first
# generation (ms-swift #5185); 3.12 refuses any --vllm_mode without --use_vllm true while it parses.
SERVER_ROLLOUT_WITHOUT_VLLM = "ms-swift>=3.5,<3.12"
SWIFT_REFUSES_VLLM_MODE_WITHOUT_VLLM = "ms-swift>=3.12"


def vllm_mode_without_vllm(source: object, swift_version: str) -> str | None:
    """Why GRPO arguments that name a vllm_mode but leave use_vllm false cannot train on this ms-swift; or None."""
    from grpo_compat.core.versions import window_problem

    get = field_getter(source)
    mode, use_vllm = get("vllm_mode", None), str(get("use_vllm", False)).lower() in ("true", "1")
    if get("rlhf_type", "grpo") != "grpo" or use_vllm or mode is None:
        return None
    swift = {"ms-swift": swift_version}
    if mode == "server" and window_problem((SERVER_ROLLOUT_WITHOUT_VLLM,), swift) is None:
        return (
            f"--vllm_mode server without --use_vllm true cannot train on ms-swift {swift_version}: with use_vllm "
            "false swift generates with the model itself and never creates the vLLM server client, yet sends the "
            "rollout to it, so the first generation fails with \"'GRPOTrainer' object has no attribute "
            "'vllm_client'\" after the model loaded (ms-swift 3.12 refuses this pair). Set --use_vllm true with "
            "--vllm_server_host / --vllm_server_port of a running `swift rollout`; or remove --vllm_mode server to "
            "generate without vLLM."
        )
    if window_problem((SWIFT_REFUSES_VLLM_MODE_WITHOUT_VLLM,), swift) is None:
        return (
            f"ms-swift {swift_version} refuses --vllm_mode {mode} without --use_vllm true while it parses its "
            'arguments ("vllm_mode is not supported when use_vllm is false"). Set --use_vllm true (server mode: '
            "with --vllm_server_host of a running `swift rollout`); or remove --vllm_mode to generate without vLLM."
        )
    return None
