"""Known-failure reproducers: one per fix, run in every matrix cell whose versions they target.

Each runs a smoke script with settings that break upstream. Unpatched, the run must fail the way
the field reports say (``upstream``, a regex over the error); patched, it must fail with
grpo_compat's message (``patched``) or, when ``patched`` is None, train.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Reproducer:
    id: str
    patch: str  # the patch id this reproducer proves
    known_failure: str  # KF-n in ../shared/KNOWN_FAILURES.md
    script: str  # a smoke script ("grpo" TRL, "swift" ms-swift) or a probe of matrix/runs.py PROBES
    requires: tuple[str, ...]  # version window of the cell (requirement strings)
    settings: tuple[str, ...]  # --set KEY=VALUE for the smoke script
    upstream: str | None  # regex the unpatched error must match; None: upstream runs on without a word
    patched: str | None  # regex the patched error must match; None: the patched run must train
    flags: tuple[str, ...] = ()  # further smoke-script options


REPRODUCERS = (
    Reproducer(
        id="single-generation",
        patch="trl.grpo-config-check",
        known_failure="KF-2",
        script="grpo",
        requires=("trl>=0.14",),
        settings=("num_generations=1",),
        # 0.14-0.16: the misleading divisibility message; 0.17+: "at least 2 generations", no way forward.
        upstream=r"evenly divisible by the number of generations per prompt \(1\)|requires at least 2 generations",
        patched=r"GRPOSettingsError: GRPO needs at least 2 completions per prompt.*--num_generations 2",
    ),
    Reproducer(
        id="single-generation-swift",
        patch="swift.grpo-arguments-check",
        known_failure="KF-2",
        script="swift",
        requires=("ms-swift>=3.1.1",),
        settings=("num_generations=1",),
        # 3.x: trl's GRPOConfig check; 4.x: swift's own "num_generations must be greater than 1".
        upstream=r"requires at least 2 generations|num_generations must be greater than 1",
        patched=r"GRPOSettingsError: GRPO needs at least 2 completions per prompt.*--num_generations 2",
    ),
    Reproducer(
        id="impossible-batch",
        patch="trl.grpo-config-check",
        known_failure="KF-2",
        script="grpo",
        requires=("trl>=0.15",),
        settings=("num_generations=3", "per_device_train_batch_size=4"),
        upstream=r"divisible by (the number of generations per prompt|num_generations) \(3\)",
        patched=r"GRPOSettingsError: every prompt's 3 completions.*Set per_device_train_batch_size=6",
    ),
    Reproducer(
        id="impossible-batch-swift",
        patch="swift.grpo-arguments-check",  # on ms-swift 3.x, trl.grpo-config-check does it
        known_failure="KF-2",
        script="swift",
        requires=("ms-swift>=3.1.1",),
        settings=("num_generations=3", "per_device_train_batch_size=4"),
        upstream=r"divisible by (the number of generations per prompt|num_generations) \(3\)",
        patched=r"GRPOSettingsError: every prompt's 3 completions.*Set per_device_train_batch_size=6",
    ),
    Reproducer(
        id="late-apply",
        patch="trl.grpo-trainer-check",
        known_failure="KF-2",
        script="grpo",
        # trl < 0.18 checks only in GRPOTrainer, after the model loads; later ones refuse in GRPOConfig.
        requires=("trl>=0.14,<0.18",),
        settings=("num_generations=3", "per_device_train_batch_size=4"),
        flags=("--apply-late",),
        upstream=r"evenly divisible by the number of generations per prompt \(3\)",
        patched=r"GRPOSettingsError: every prompt's 3 completions.*Set per_device_train_batch_size=6",
    ),
    Reproducer(
        id="data-parallel-launch",
        patch="trl.launch-guard",
        known_failure="KF-4",
        script="grpo",
        # Upstream trains on, silently, with DataParallel over the (faked) 2 GPUs.
        requires=("trl>=0.14,<1.15",),
        settings=(),
        flags=("--fake-gpus", "2"),
        upstream=None,
        patched=r"LaunchError: .*accelerate launch --num_processes 2 .*torchrun --nproc_per_node 2",
    ),
    Reproducer(
        id="data-parallel-launch-refused-late",
        patch="trl.launch-guard",
        known_failure="KF-4",
        script="grpo",
        # trl >= 1.15 refuses, but only after loading the model, and without the command to use.
        requires=("trl>=1.15",),
        settings=(),
        flags=("--fake-gpus", "2"),
        upstream=r"does not support `nn.DataParallel`",
        patched=r"LaunchError: .*accelerate launch --num_processes 2 .*torchrun --nproc_per_node 2",
    ),
)
