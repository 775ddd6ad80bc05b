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
    launcher: str = "python"  # python | ddp | zero2 | zero3 (see matrix/runs.py command())


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
    Reproducer(
        id="logps-full-length",
        patch="trl.logps-alignment",
        known_failure="KF-1",
        script="logps",
        requires=("trl>=0.15",),
        settings=(),
        # trl 0.15-1.13: the gather error (KF-1's signature); trl >= 1.15: L - 1 columns for K = L.
        upstream=r"Size does not match at dimension \d+ expected index \[[\d, ]+\] to be (smaller|no larger) than self"
        r"|returned \(\d+, \d+\) for logits_to_keep=\d+",
        patched=None,
    ),
    Reproducer(
        id="logps-untrimmed-logits",
        patch="trl.logps-trim-logits",
        known_failure="KF-1",
        script="logps",
        requires=("trl>=0.19.0,<0.20",),
        settings=("bf16=false",),  # fp32 on GPU cells too: in bf16 the log-probs come out shifted, no error
        flags=("--model-ignores-logits-to-keep",),
        upstream=r"The size of tensor a \(\d+\) must match the size of tensor b",
        patched=None,
    ),
    Reproducer(
        id="untrimmed-logits-training",
        patch="trl.logps-trim-logits",
        known_failure="KF-1",
        script="grpo",
        requires=("trl>=0.19.0,<0.20",),
        settings=("bf16=false",),  # fp32 on GPU cells too: in bf16 upstream trains on shifted log-probs silently
        flags=("--model-ignores-logits-to-keep",),
        upstream=r"The size of tensor a \(\d+\) must match the size of tensor b",
        patched=None,
    ),
    Reproducer(
        id="liger-logits-as-hidden",
        patch="trl.liger-lm-head-guard",
        known_failure="KF-3",
        script="lm-head",
        requires=("trl>=0.17,<1.14", "liger-kernel>=0.5.8"),
        settings=(),
        # liger-kernel < 0.8 compiles its loss: the FakeTensor message of KF-3; 0.8 runs the matmul eagerly.
        upstream=r"must have same reduction dim, but got \[[^\]]*\] X \[\d+, \d+\]|shapes cannot be multiplied",
        patched=None,
    ),
    Reproducer(
        id="unsloth-logits-as-hidden",
        patch="unsloth.lm-head-guard",
        known_failure="KF-3",
        script="lm-head-unsloth",
        # Unsloth imports only on a GPU and no cell carries it yet: planned nowhere for now (GPU proof pending).
        # zoo 2026.1.2+ only: the probe calls the generated module's chunked_hidden_states_selective_log_softmax.
        requires=("unsloth-zoo>=2026.1.2,<2026.5.4",),
        settings=(),
        upstream=r"must have same reduction dim|shapes cannot be multiplied",
        patched=None,
    ),
    Reproducer(
        id="labels-from-column-0-swift3",
        patch="swift.logps-alignment-3x",
        known_failure="KF-1",
        script="logps-swift",
        requires=("ms-swift>=3.5,<4,!=3.7.*",),
        settings=(),
        upstream=r"Size does not match at dimension \d+ expected index \[[\d, ]+\] to be (smaller|no larger) than self",
        patched=None,
    ),
    Reproducer(
        id="labels-from-column-0-swift4",
        patch="swift.logps-alignment",
        known_failure="KF-1",
        script="logps-swift",
        requires=("ms-swift>=4.4",),
        settings=(),
        upstream=r"Size does not match at dimension \d+ expected index \[[\d, ]+\] to be (smaller|no larger) than self",
        patched=None,
    ),
    Reproducer(
        id="padding-free-bf16-swift3",
        patch="swift.logps-alignment-3x",
        known_failure="KF-1",
        script="logps-swift",
        requires=("ms-swift>=3.12,<4",),
        # padding_free is set on the template (no flash attention on CPU); bf16 weights, no mixed precision.
        settings=("torch_dtype=bfloat16", "bf16=false", "padding_free=true"),
        upstream=r"ProbeFailed: misaligned",  # upstream returns log-probs shifted by one token, without an error
        patched=None,
    ),
    Reproducer(
        id="padding-free-bf16-swift4",
        patch="swift.logps-alignment",
        known_failure="KF-1",
        script="logps-swift",
        requires=("ms-swift>=4.4",),
        settings=("torch_dtype=bfloat16", "bf16=false", "padding_free=true"),
        upstream=r"zip\(\) argument 2 is longer than argument 1",
        patched=None,
    ),
    Reproducer(
        id="sequence-parallel-padding-swift3",
        patch="swift.logps-alignment-3x",
        known_failure="KF-1",
        script="logps-swift",
        requires=("ms-swift>=3.11,<4",),
        # The probe runs as 2 CPU processes and pads the batch to an odd length: swift pads it for 2 ranks.
        settings=("sequence_parallel_size=2",),
        upstream=r"ProbeFailed: misaligned: .* of the local forward",  # shifted by the padding, no error upstream
        patched=None,
    ),
    Reproducer(
        id="sequence-parallel-padding-swift4",
        patch="swift.logps-alignment",
        known_failure="KF-1",
        script="logps-swift",
        requires=("ms-swift>=4.4",),
        settings=("sequence_parallel_size=2",),
        upstream=r"ProbeFailed: misaligned: .* of the local forward",
        patched=None,
    ),
    Reproducer(
        id="labels-from-column-0-training-swift3",
        patch="swift.logps-alignment-3x",
        known_failure="KF-1",
        script="swift",
        requires=("ms-swift>=3.5,<4,!=3.7.*",),
        settings=(),
        flags=("--labels-from-column-0",),
        upstream=r"Size does not match at dimension \d+ expected index \[[\d, ]+\] to be (smaller|no larger) than self",
        patched=None,
    ),
    Reproducer(
        id="labels-from-column-0-training-swift4",
        patch="swift.logps-alignment",
        known_failure="KF-1",
        script="swift",
        requires=("ms-swift>=4.4",),
        settings=(),
        flags=("--labels-from-column-0",),
        upstream=r"Size does not match at dimension \d+ expected index \[[\d, ]+\] to be (smaller|no larger) than self",
        patched=None,
    ),
)
