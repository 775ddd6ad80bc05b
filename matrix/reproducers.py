"""Known-failure reproducers: one per fix, run in every matrix cell whose versions they target.

Each runs a smoke script with settings that break upstream. Unpatched, the run must fail the way
the field reports say (``upstream``, a regex over the error); patched, it must fail with
grpo_compat's message (``patched``) or, when ``patched`` is None, train.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

# KF-5's field report (ms-swift #4348: batch 1, GA 32, ZeRO-3, nothing trains) at smoke size.
FIELD_SHAPE = ("per_device_train_batch_size=1", "gradient_accumulation_steps=8", "num_generations=2")
# Judge checks of a smoke result that trained (matrix/runs.py failed_checks): every rank's own parameters
# moved; KL is above 0 once the policy was updated; DeepSpeed accumulated and stepped as the trainer did.
CHECKS = ("ranks", "kl", "accumulation")


@dataclass(frozen=True)
class Reproducer:
    id: str
    patch: str  # the patch id this reproducer proves
    script: str  # a smoke script ("grpo" TRL, "swift" ms-swift) or a probe: a key of matrix/runs.py SCRIPTS
    requires: tuple[str, ...]  # version window of the cell (requirement strings)
    settings: tuple[str, ...]  # --set KEY=VALUE for the smoke script
    upstream: str | None  # regex the unpatched error must match; None: upstream runs on without a word
    patched: str | None  # regex the patched error must match; None: the patched run must train
    flags: tuple[str, ...] = ()  # further smoke-script options
    launcher: str = "python"  # python | ddp | zero2 | zero3 (see matrix/runs.py command())
    checks: tuple[str, ...] = ()  # judge checks of matrix/runs.py CHECKS; `upstream` may match what they find
    # A version skew: upstream fails every run of a cell in the window, so the cell's plain smoke runs expect
    # `upstream` too (a probe's skew is silent: they train, wrongly) and their patched twins `patched` (or train).
    breaks_every_run: bool = False
    # A skew that stops trl's trainer from importing: the cell's effects run can show only this patch's effect
    # (the other patches' probes import what the cell cannot); their effects are shown in cells that import it.
    breaks_import: bool = False
    # The id of its record in grpo_compat/catalogue/failures.toml: given only when the patch names several
    # (its catalogue=); otherwise the patch's one record.
    failure: str = ""
    # A failure that needs more than the versions (CPU_PACKS_BF16: a CPU with bf16 matmul): where the machine lacks
    # it, upstream trains, and the pair is judged as a do-no-harm pair (patched: weights identical to plain).
    only_where: str = ""

    def __post_init__(self) -> None:
        if not self.failure:
            object.__setattr__(self, "failure", _only_record_of(self.patch))


def _only_record_of(patch_id: str) -> str:
    """The record a patch names when it names one; "" otherwise (tests/test_patch_declarations.py says why)."""
    from grpo_compat.core.registry import declared_patches

    records = [p.catalogue for p in declared_patches() if p.id == patch_id]
    return records[0][0] if records and len(records[0]) == 1 else ""


# vLLM's CPU build packs trl's bf16 engine weights away only on a CPU with bf16 matmul (AVX512-BF16 / AMX):
# grpo_compat.fixes.vllm_cpu_prepack.cpu_packs_bf16(). There trl's colocate sync fails at its first call.
CPU_PACKS_BF16 = "cpu-packs-bf16"
PREPACKED_SYNC = r"AttributeError: 'Parameter' object has no attribute 'weight_loader'"
PREPACKED_WINDOW = ("trl>=1.0", "vllm>=0.18")
SWIFT_PREPACKED_WINDOW = ("ms-swift>=4.5", "vllm>=0.18")

# DeepSpeed < 0.19.8 ZeRO-3 on CPU corrupts parameters at load in some runs: ZeRO-3 runs need this window here.
ZERO3_ON_CPU = ("deepspeed>=0.19.8",)

REPRODUCERS = (
    Reproducer(
        id="single-generation",
        patch="trl.grpo-config-check",
        script="grpo",
        requires=("trl>=0.15",),
        settings=("num_generations=1",),
        # 0.15-0.16: the misleading divisibility message; 0.17+: "at least 2 generations", no way forward.
        upstream=r"evenly divisible by the number of generations per prompt \(1\)|requires at least 2 generations",
        patched=r"GRPOSettingsError: GRPO needs at least 2 completions per prompt.*--num_generations 2",
    ),
    Reproducer(
        id="single-generation-unchecked",
        patch="trl.grpo-config-check",
        script="grpo",
        # trl 0.14 checks nothing: the group of one's reward std is NaN, so are the advantages and, after the
        # first update, the weights, and the next generation fails to sample.
        requires=("trl>=0.14,<0.15",),
        settings=("num_generations=1",),
        upstream=r"probability tensor contains either `inf`, `nan`",
        patched=r"GRPOSettingsError: GRPO needs at least 2 completions per prompt.*--num_generations 2",
    ),
    # ms-swift 3.x builds trl's GRPOConfig, whose check refuses it; 4.x skips that check, and the swift patch does.
    Reproducer(
        id="single-generation-swift",
        patch="trl.grpo-config-check",
        script="swift",
        requires=("ms-swift>=3.1.1,<4", "trl>=0.14"),
        settings=("num_generations=1",),
        # trl >= 0.17's message; trl 0.15-0.16's divisibility message (ms-swift 3.3 on trl 0.16: cell swift-3.3)
        upstream=r"requires at least 2 generations|evenly divisible by the number of generations per prompt \(1\)",
        patched=r"GRPOSettingsError: GRPO needs at least 2 completions per prompt.*--num_generations 2",
    ),
    Reproducer(
        id="single-generation-swift4",
        patch="swift.grpo-arguments-check",
        failure="batch-rules-misleading",
        script="swift",
        requires=("ms-swift>=4.0",),
        settings=("num_generations=1",),
        upstream=r"num_generations must be greater than 1",
        patched=r"GRPOSettingsError: GRPO needs at least 2 completions per prompt.*--num_generations 2",
    ),
    Reproducer(
        id="impossible-batch",
        patch="trl.grpo-config-check",
        script="grpo",
        requires=("trl>=0.15",),
        settings=("num_generations=3", "per_device_train_batch_size=4"),
        upstream=r"divisible by (the number of generations per prompt|num_generations) \(3\)",
        patched=r"GRPOSettingsError: every prompt's 3 completions.*Set per_device_train_batch_size=6",
    ),
    Reproducer(
        id="impossible-batch-swift",
        patch="trl.grpo-config-check",
        script="swift",
        requires=("ms-swift>=3.1.1,<4", "trl>=0.14"),
        settings=("num_generations=3", "per_device_train_batch_size=4"),
        upstream=r"divisible by (the number of generations per prompt|num_generations) \(3\)",
        patched=r"GRPOSettingsError: every prompt's 3 completions.*Set per_device_train_batch_size=6",
    ),
    Reproducer(
        id="impossible-batch-swift4",
        patch="swift.grpo-arguments-check",
        failure="batch-rules-misleading",
        script="swift",
        requires=("ms-swift>=4.0",),
        settings=("num_generations=3", "per_device_train_batch_size=4"),
        upstream=r"divisible by (the number of generations per prompt|num_generations) \(3\)",
        patched=r"GRPOSettingsError: every prompt's 3 completions.*Set per_device_train_batch_size=6",
    ),
    Reproducer(
        id="late-apply",
        patch="trl.grpo-trainer-check",
        script="grpo",
        # trl 0.15-0.17 check only in GRPOTrainer, after the model loads; later ones refuse in GRPOConfig. trl 0.14
        # checks nothing and counts prompts per device: 3 generations of 4 prompts train there.
        requires=("trl>=0.15,<0.18",),
        settings=("num_generations=3", "per_device_train_batch_size=4"),
        flags=("--apply-late",),
        upstream=r"evenly divisible by the number of generations per prompt \(3\)",
        patched=r"GRPOSettingsError: every prompt's 3 completions.*Set per_device_train_batch_size=6",
    ),
    Reproducer(
        id="data-parallel-launch",
        patch="trl.launch-guard",
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
        script="logps-swift",
        requires=("ms-swift>=3.5,<4,!=3.7.*",),
        settings=(),
        upstream=r"Size does not match at dimension \d+ expected index \[[\d, ]+\] to be (smaller|no larger) than self",
        patched=None,
    ),
    Reproducer(
        id="labels-from-column-0-swift4",
        patch="swift.logps-alignment",
        script="logps-swift",
        requires=("ms-swift>=4.4",),
        settings=(),
        upstream=r"Size does not match at dimension \d+ expected index \[[\d, ]+\] to be (smaller|no larger) than self",
        patched=None,
    ),
    Reproducer(
        id="padding-free-bf16-swift3",
        patch="swift.logps-alignment-3x",
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
        script="logps-swift",
        requires=("ms-swift>=4.4",),
        settings=("torch_dtype=bfloat16", "bf16=false", "padding_free=true"),
        upstream=r"zip\(\) argument 2 is longer than argument 1",
        patched=None,
    ),
    Reproducer(
        id="sequence-parallel-padding-swift3",
        patch="swift.logps-alignment-3x",
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
        script="logps-swift",
        requires=("ms-swift>=4.4",),
        settings=("sequence_parallel_size=2",),
        upstream=r"ProbeFailed: misaligned: .* of the local forward",
        patched=None,
    ),
    Reproducer(
        id="labels-from-column-0-training-swift3",
        patch="swift.logps-alignment-3x",
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
        script="swift",
        requires=("ms-swift>=4.4",),
        settings=(),
        flags=("--labels-from-column-0",),
        upstream=r"Size does not match at dimension \d+ expected index \[[\d, ]+\] to be (smaller|no larger) than self",
        patched=None,
    ),
    Reproducer(
        id="deepspeed-accumulation-contradiction",
        patch="trl.deepspeed-agreement",
        script="grpo",
        requires=("trl>=0.14", "deepspeed>=0.14"),
        # The field report's batch with a ds.json that hard-codes 4: upstream refuses only once the policy has
        # loaded (DeepSpeed's assertion while TRL prepares the reference model, or transformers in train()).
        settings=(
            *FIELD_SHAPE,
            'deepspeed={"zero_optimization": {"stage": 2}, "train_micro_batch_size_per_gpu": "auto", '
            '"gradient_accumulation_steps": 4, "train_batch_size": "auto"}',
        ),
        upstream=r"Check batch related parameters.* 16 != 1 \* 4 \* 2"
        r"|Please correct the following DeepSpeed config values that mismatch.*gradient_accumulation_steps=4",
        patched=r"GRPOSettingsError: The DeepSpeed config \(deepspeed=<dict>\) contradicts the trainer's batch"
        r".*gradient_accumulation_steps: 4 in the DeepSpeed config, but --gradient_accumulation_steps 8"
        r".*phase: config",  # refused while GRPOConfig is built, before any model loads
        launcher="zero2",
    ),
    Reproducer(
        id="deepspeed-accumulation-absent",
        patch="trl.deepspeed-agreement",
        script="grpo",
        # accelerate < 1.8 lets DeepSpeed's own accumulation decide when the optimizer steps: 1, which accelerate
        # inserts for the absent key, so the optimizer steps on every micro-batch. No error, no warning.
        requires=("trl>=0.14", "deepspeed>=0.14", "accelerate<1.8"),
        settings=(*FIELD_SHAPE, 'deepspeed={"zero_optimization": {"stage": 2}, "train_micro_batch_size_per_gpu": 1}'),
        upstream=r"DeepSpeed took \d+ optimizer steps for 3 trainer steps \(gradient_accumulation_steps: DeepSpeed 1, "
        r"trainer 8\)",  # trains silently; the accumulation check shows it
        patched=None,
        launcher="zero2",
        checks=CHECKS,
    ),
    Reproducer(
        id="deepspeed-accumulation-contradiction-swift4",
        patch="swift.deepspeed-agreement",
        script="swift",
        # swift-4.6-deepspeed, 2 CPU processes: plain, transformers refuses the config after the model loaded;
        # patched, it is refused while swift parses its arguments, before any model loads.
        requires=("ms-swift>=4.0", "deepspeed>=0.14"),
        settings=(  # --deepspeed takes a JSON string in swift
            *FIELD_SHAPE,
            "fp16=false",  # swift 4 turns fp16 on with DeepSpeed, which refuses it on CPU before the batch check
            'deepspeed="{\\"zero_optimization\\": {\\"stage\\": 2}, \\"gradient_accumulation_steps\\": 4, '
            '\\"train_micro_batch_size_per_gpu\\": \\"auto\\", \\"train_batch_size\\": \\"auto\\"}"',
        ),
        upstream=r"Check batch related parameters|Please correct the following DeepSpeed config values that mismatch",
        patched=r"GRPOSettingsError: The DeepSpeed config \(deepspeed=<dict>\) contradicts the trainer's batch"
        r".*gradient_accumulation_steps: 4 in the DeepSpeed config, but --gradient_accumulation_steps 8",
        launcher="zero2",
    ),
    Reproducer(
        id="deepspeed-ga-double-scaling",
        patch="trl.deepspeed-gas-double-scaling",
        script="ga-scaling",  # one GRPO step, GA 4, launched with DDP and with ZeRO-2: same grad_norm expected
        requires=("trl>=0.14", "transformers>=4.48.0,<4.49", "deepspeed"),
        settings=(),
        upstream=r"ZeRO-2 grad_norm is 1/4 of DDP's",  # trains silently, with a gradient 4x too small
        patched=None,
    ),
    Reproducer(
        id="peft-checkpointing-no-input-grads",
        patch="trl.peft-input-grads",
        script="grpo",
        requires=("trl>=0.14,<0.16", "peft"),
        settings=("gradient_checkpointing=true",),  # transformers 4.x: reentrant
        flags=("--lora",),
        upstream=r"element 0 of tensors does not require grad and does not have a grad_fn",
        patched=None,
    ),
    Reproducer(
        id="peft-zero3-checkpoint-error",
        patch="trl.peft-zero3-reentrant",
        script="grpo",
        # trl >= 0.27 defaults to non-reentrant checkpointing; DeepSpeed#8148 (0.19.3) fixed it on its side.
        # DeepSpeed >= 0.19.0 for stage3_allgather_sequential: older ZeRO-3 on CPU/gloo waits only for the last
        # of its coalesced all-gathers and loads garbage in some runs (fixed in 0.19.8); sequential avoids it.
        requires=("trl>=0.27,<1.9", "peft", "deepspeed>=0.19.0,<0.19.3"),
        settings=(
            "gradient_checkpointing=true",
            'model_init_kwargs={"device_map": null}',  # trl clears "auto" only for GPU launches
            # Persistence threshold 0: the tiny model's frozen weights are partitioned, as a real model's are.
            'deepspeed={"zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 0, '
            '"stage3_allgather_sequential": true}, "train_micro_batch_size_per_gpu": "auto", '
            '"gradient_accumulation_steps": "auto", "train_batch_size": "auto"}',
        ),
        flags=("--lora",),
        upstream=r"CheckpointError.*Recomputed values for the following tensors have different metadata",
        patched=None,
        launcher="zero3",
    ),
)

# The learning watchdog (KF-5): a run built to learn nothing. Upstream finishes without a word while the
# weights stay put ("learns" fails); patched with GRPO_COMPAT_WATCHDOG=stop it ends with the diagnosis.
_STALLED = r"trainable parameters did not change|no group had any reward spread"
# A constant reward: every advantage is 0, and no sampled weight moved in the watchdog's first 2 optimizer steps
_CONSTANT = r"after 2 optimizer steps 0 of \d+ sampled weight elements changed.*same reward.*advantage"
_WATCHDOG_RUNS = (
    # (id suffix, flags, settings, the diagnosis the patched run must give, launcher, extra cell window)
    ("constant-reward", ("--reward", "constant"), (), _CONSTANT, "python", ()),
    # trl's default logging_steps: nothing is logged before the check, the watchdog reads the trainer's metrics
    ("constant-reward-unlogged", ("--reward", "constant"), ("logging_steps=10",), _CONSTANT, "python", ()),
    # trl >= 1.9 scores an infinite reward's group as nothing to learn from (weights stay put, no error)
    ("inf-reward-masked", ("--reward", "inf"), (), r"returned inf", "python", ("trl>=1.9",)),
    ("bf16-weights", ("--weights-dtype", "bfloat16"), ("learning_rate=1e-6",), r"bf16", "python", ()),
    ("constant-reward-zero3", ("--reward", "constant"), (), _CONSTANT, "zero3", ZERO3_ON_CPU),
)
REPRODUCERS += tuple(
    Reproducer(
        id=f"watchdog-{suffix}",
        patch="trl.learning-watchdog",
        failure="no-learning",
        script="grpo",
        requires=("trl>=0.14", *window),
        settings=settings,
        flags=(*flags, "--watchdog", "stop"),
        upstream=_STALLED,
        patched=r"TrainingStalledError: GRPO is not learning: .*" + diagnosis,
        launcher=launcher,
        checks=("learns",),
    )
    for suffix, flags, settings, diagnosis, launcher, window in _WATCHDOG_RUNS
)
# Runs that cannot change a weight: upstream trains them to the end without a word; patched, they are refused when
# train() is called, before the first generation (grpo_compat.fixes.weights_move), in every watchdog mode but off.
CANNOT_TRAIN = r"GRPOSettingsError: GRPO cannot change a weight: "
REFUSED_AT_TRAIN = r".*\(refused before the first generation; GRPO_COMPAT_WATCHDOG=off runs it anyway\).*phase: train"
REPRODUCERS += tuple(
    Reproducer(
        id=f"watchdog-lr-zero{suffix}",
        patch="trl.learning-watchdog",
        failure="no-learning",
        script="grpo",
        requires=("trl>=0.14", *window),
        settings=("learning_rate=0",),
        flags=("--watchdog", "stop"),
        upstream=_STALLED,
        patched=CANNOT_TRAIN + r"learning_rate=0.*set learning_rate > 0" + REFUSED_AT_TRAIN,
        launcher=launcher,
        checks=("learns",),
    )
    for suffix, launcher, window in (("", "python", ()), ("-zero3", "zero3", ZERO3_ON_CPU))
)
# N14 (trl #6700, #3031): GRPO continued from a LoRA adapter loaded with PeftModel.from_pretrained(model, path), whose
# is_trainable defaults to False, with beta != 0. Upstream trains without a word, reward and grad_norm moving
# (trl 1.16.0 + peft 0.21.2: 0.18 / 0.24 / 0.22), and saves the adapter it loaded, byte for byte; patched (the
# watchdog's default mode, warn), the run is refused before the first generation, naming is_trainable=True.
# Its do-no-harm twins are the pairs lora-adapter-trainable and lora (matrix/runs.py LORA_ADAPTER).
ADAPTER_UNCHANGED = r"the adapter saved after training is the one it continued from, byte for byte"
REPRODUCERS += (
    Reproducer(
        id="peft-adapter-loaded-for-inference",
        patch="trl.learning-watchdog",
        failure="no-learning",
        script="grpo",
        requires=("trl>=1.0", "peft>=0.20"),
        settings=("beta=0.04",),
        flags=("--lora-adapter", "inference"),
        upstream=ADAPTER_UNCHANGED,
        patched=CANNOT_TRAIN + r"the policy has no trainable parameter: PEFT adapter 'default' was loaded for "
        r"inference.*PeftModel\.from_pretrained\(model, path, is_trainable=True\)" + REFUSED_AT_TRAIN,
        checks=("adapter-learns",),
    ),
)
# trl < 1.0 (0.14, 0.16, 0.19, 0.23, 0.29 run): an infinite reward makes the update inf / NaN and the next
# generation fails to sample; patched, the run stops at the step where the inf / NaN appeared, naming the reward.
REPRODUCERS += (
    Reproducer(
        id="watchdog-inf-reward-diverges",
        patch="trl.learning-watchdog",
        failure="training-diverged",
        script="grpo",
        requires=("trl>=0.14,<1.0",),
        settings=(),
        flags=("--reward", "inf", "--watchdog", "stop"),
        # on a GPU the same check is a device-side assert of the sampling kernel (seen on an H100, trl 0.16.1)
        upstream=r"probability tensor contains either `inf`, `nan` or element < 0"
        r"|CUDA error: device-side assert triggered",
        patched=r"TrainingStalledError: GRPO training diverged: inf / NaN at optimizer step 1: .*the rewards\. "
        r"Likely cause: a reward function returned inf",
    ),
)
# dapo with steps_per_generation != gradient_accumulation_steps: the update is mis-scaled, without a word.
REPRODUCERS += (
    Reproducer(
        id="token-normalisation-scale",
        patch="trl.token-normalisation-scale",
        script="token-normalisation",
        requires=("trl>=0.22,<1.9.1",),
        settings=(),
        upstream=r"the trainer's gradient is 0\.5\d*x the token-mean objective's",
        patched=None,
    ),
)
# Text-only GRPO on a tiny Gemma-3: transformers 5.0-5.5 demand token_type_ids in training (census row 33).
REPRODUCERS += (
    Reproducer(
        id="gemma3-token-type-ids",
        patch="transformers.gemma3-text-token-type-ids",
        script="grpo",
        requires=("trl>=0.14", "transformers>=5.0,<5.6"),
        settings=(),
        flags=("--model-arch", "gemma3"),
        upstream=r"`token_type_ids` is required as a model input when training",
        patched=None,
    ),
)
# A reward function without **kwargs: upstream fails at the first reward call, after the model loaded and generated.
REPRODUCERS += (
    Reproducer(
        id="reward-without-kwargs",
        patch="trl.reward-dry-run",
        failure="reward-function-contract",
        script="grpo",
        requires=("trl>=0.14",),
        settings=(),
        flags=("--reward", "no-kwargs"),
        upstream=r"strict_length\(\) got an unexpected keyword argument '(prompts|completion_ids)'",
        patched=r"RewardFunctionError: reward function 'strict_length' does not accept the keyword arguments prompts",
    ),
)
# One reward for a whole batch: trl < 1.10 copies it to every completion (zero advantages, nothing learnt, no
# word); trl 1.10 refuses it at the first step. Patched, the dry run refuses it before the model loads (a count
# that depends on the data: trl.reward-count-check at that step, tests/test_reward_dry_run.py).
REPRODUCERS += (
    Reproducer(
        id="reward-one-value-broadcast",
        patch="trl.reward-count-check",
        script="grpo",
        requires=("trl>=0.14,<1.10",),
        settings=(),
        flags=("--reward", "one-value"),
        upstream=r"trainable parameters did not change",  # the broadcast's zero advantages: the judge's "learns"
        patched=r"RewardFunctionError: reward function 'one_value' returned 1 rewards for \d+ completions",
        checks=("learns",),
    ),
    Reproducer(
        id="reward-one-value-checked",
        patch="trl.reward-dry-run",
        failure="reward-function-contract",
        script="grpo",
        requires=("trl>=1.10",),
        settings=(),
        flags=("--reward", "one-value"),
        upstream=r"The reward function 'one_value' returned 1 rewards, but \d+ were expected",
        patched=r"RewardFunctionError: reward function 'one_value' returned 1 rewards for \d+ completions",
    ),
)
# ms-swift: a misspelt reward name is found when the trainer is built, after the models and the dataset loaded.
REPRODUCERS += (
    Reproducer(
        id="swift-reward-not-registered",
        patch="swift.reward-names-check",
        script="swift",
        requires=("ms-swift>=3.5",),
        settings=("reward_funcs=acuracy",),
        upstream=r"reward_function acuracy is not implemented in swift\.(llm\.plugin|plugin|rewards)",
        patched=r"RewardFunctionError: ms-swift [\d.]+ has no reward function named 'acuracy' "
        r"\(did you mean 'accuracy'\?\)",
    ),
    Reproducer(
        id="swift-reward-not-registered-cli",
        patch="swift.reward-names-check",
        script="swift-cli",  # `swift rlhf` with grpo-compat's plugin
        requires=("ms-swift>=3.5",),
        settings=("reward_funcs=acuracy",),
        upstream=r"reward_function acuracy is not implemented in swift\.(llm\.plugin|plugin|rewards)",
        patched=r"RewardFunctionError: ms-swift [\d.]+ has no reward function named 'acuracy' "
        r"\(did you mean 'accuracy'\?\)",
    ),
)
# ms-swift: a reward function is first called at the first generation, after the models and the dataset loaded, with
# the completions by position and the generated rows' columns by keyword; one value per batch is copied to every
# completion without a word (3.5.3, 3.12.6, 4.6.0). Patched: the dry run when swift's GRPOTrainer is built, before the
# first generation; with the dry run off (a count that depends on the data), the count check at the step.
_NO_KWARGS_SWIFT = Reproducer(
    id="swift-reward-without-kwargs",
    patch="swift.reward-dry-run",
    script="swift",
    requires=("ms-swift>=3.5",),
    settings=(),
    flags=("--reward", "no-kwargs"),  # an ORM whose __call__(self, completions) takes no **kwargs
    upstream=r"__call__\(\) got an unexpected keyword argument '(messages|trainer_state)'",
    patched=r"RewardFunctionError: reward function 'SmokeLengthReward' does not accept the keyword arguments "
    r"(trainer_state, )?messages, .*is_truncated",
)
REPRODUCERS += (
    _NO_KWARGS_SWIFT,
    replace(_NO_KWARGS_SWIFT, id="swift-reward-without-kwargs-cli", script="swift-cli"),  # the plugin's patches
    Reproducer(
        id="swift-reward-one-value-broadcast",
        patch="swift.reward-count-check",
        script="swift",
        requires=("ms-swift>=3.5",),
        settings=(),
        flags=("--reward", "one-value", "--no-reward-dry-run"),
        upstream=_STALLED,  # the broadcast's zero advantages: reward_std 0, nothing learnt, no word
        patched=r"RewardFunctionError: reward function 'SmokeLengthReward' returned 1 rewards for \d+ completions "
        r"during training \(ms-swift [\d.]+\); ms-swift copies one value to every completion",
        checks=("learns",),
    ),
    Reproducer(
        id="swift-reward-one-value-dry-run",
        patch="swift.reward-dry-run",
        script="swift",
        requires=("ms-swift>=3.5",),
        settings=(),
        flags=("--reward", "one-value"),
        upstream=_STALLED,
        patched=r"RewardFunctionError: reward function 'SmokeLengthReward' returned 1 rewards for \d+ completions "
        r"\(\d+ prompts x \d+ generations\); ms-swift [\d.]+ would copy that value to every completion",
        checks=("learns",),
    ),
)
# ms-swift: the watchdog reaches swift's GRPOTrainer through trl's train() (SwiftMixin.train -> super().train()).
REPRODUCERS += (
    Reproducer(
        id="watchdog-constant-reward-swift",
        patch="trl.learning-watchdog",
        failure="no-learning",
        script="swift",
        requires=("ms-swift>=3.5", "trl>=0.14"),  # the watchdog patch is trl's: swift reaches it through trl
        settings=(),
        flags=("--reward", "constant", "--watchdog", "stop"),
        upstream=_STALLED,
        patched=r"TrainingStalledError: GRPO is not learning: .*same reward.*advantage",
        checks=("learns",),
    ),
    Reproducer(
        id="train-sampler-signature",
        patch="trl.train-sampler-signature",
        script="grpo",
        requires=("trl>=0.15,<0.17", "transformers>=4.52"),
        settings=(),
        upstream=r"_get_train_sampler\(\) takes 1 positional argument but 2 were given",
        patched=None,
        breaks_every_run=True,
    ),
)
# The `swift rlhf` command line with grpo_compat's plugin: the same refusals as in-process, but they must come
# while swift parses its arguments, from the plugin (4.x) or trl's GRPOConfig (3.x), before any model loads.
_BY_ID = {reproducer.id: reproducer for reproducer in REPRODUCERS}
REPRODUCERS += tuple(
    replace(_BY_ID[source], id=f"{source}-cli", script="swift-cli", patched=_BY_ID[source].patched + ".*phase: config")
    for source in (
        "single-generation-swift",
        "single-generation-swift4",
        "impossible-batch-swift",
        "impossible-batch-swift4",
    )
)

# trl 0.22.0-0.27.0 divide the loss by current_gradient_accumulation_steps, which transformers sets only inside
# its training loop: evaluate() before train() fails on any transformers (TRL #3983), for loss_type grpo.
REPRODUCERS += (
    Reproducer(
        id="evaluate-before-train",
        patch="trl.accumulation-steps-default",
        script="grpo",
        requires=("trl>=0.22,<0.27.1",),
        settings=('loss_type="grpo"',),
        flags=("--evaluate-first",),
        upstream=r"object has no attribute 'current_gradient_accumulation_steps'",
        patched=None,
    ),
    Reproducer(
        id="processing-class",
        patch="trl.refuse-transformers-without-processing-class",
        script="grpo",
        requires=("trl>=0.14", "transformers<4.46"),
        settings=(),
        upstream=r"unexpected keyword argument 'processing_class'",
        patched=r"UnsupportedCombinationError: trl [\d.]+ with transformers 4\.4[0-5][\d.]* cannot build a GRPOTrainer",
        breaks_every_run=True,
    ),
    Reproducer(
        id="swift-trl-0.20-logps-renamed",
        patch="swift.refuse-trl-0.20-on-swift-3.5",
        script="swift",
        requires=("ms-swift>=3.5,<3.7", "trl>=0.20"),
        settings=(),
        upstream=r"'super' object has no attribute '_get_per_token_logps'",
        patched=r"UnsupportedCombinationError: ms-swift 3\.[56][\d.]* with trl [\d.]+ cannot train GRPO",
        breaks_every_run=True,
    ),
    Reproducer(
        id="swift-server-mode-without-vllm",
        patch="swift.refuse-server-mode-without-vllm",
        script="swift",
        # ms-swift #5185: no server, no vLLM needed; the rollout reads a client only --use_vllm true creates.
        requires=("ms-swift>=3.5,<3.12",),
        settings=('vllm_mode="server"',),
        upstream=r"'GRPOTrainer' object has no attribute 'vllm_client'",
        patched=r"GRPOSettingsError: --vllm_mode server without --use_vllm true cannot train on ms-swift 3\.",
    ),
    Reproducer(
        id="swift-trl-0.16-temperature",
        patch="swift.refuse-trl-0.16-on-swift-3.2.0",
        script="swift",
        requires=("ms-swift>=3.2.0,<3.2.1", "trl>=0.16,<0.17", "transformers>=4.49"),
        settings=(),
        upstream=r"'GRPOTrainer' object has no attribute 'temperature'",
        patched=r"UnsupportedCombinationError: ms-swift 3\.2\.0[\d.post]* with trl 0\.16[\d.]* with transformers "
        r"[\d.]+ cannot train GRPO on a text model",
        breaks_every_run=True,
    ),
    Reproducer(
        id="swift-trl-optional-imports",
        patch="swift.refuse-trl-optional-imports",
        script="swift",
        # ms-swift 4.6 corrects trl 0.27-0.28's late reads of the flags (they train): the cells are 4.6 + trl 0.26
        # and 4.5 + trl 0.28, where no ms-swift correction reaches trl's reads.
        requires=("ms-swift>=4.1", "trl>=0.19,<0.29", "transformers>=5.3"),
        settings=(),
        upstream=r"No module named '(mergekit|weave|vllm)'",
        patched=r"UnsupportedCombinationError: ms-swift 4\.[\d.]+ with trl 0\.2[\d.]+ with transformers 5\.[\d.]+ "
        r"cannot train GRPO: transformers >= 5\.3 returns a \(found, version\) pair",
        breaks_every_run=True,
        breaks_import=True,
    ),
    Reproducer(
        id="swift-liger-multimodal-text-base-model",
        patch="swift.refuse-liger-multimodal-text-base-model",
        script="swift",
        # ms-swift #5377 at smoke size: a tiny Qwen2.5-VL, an image per prompt, --use_liger_kernel. liger-kernel 0.6
        # patches no Qwen2.5-VL below transformers 4.52.4 (no Triton kernel, which CPU cannot run); its GRPO loss is
        # torch. Plain, the first step fails after the models loaded and generated; patched, it is refused first.
        requires=("ms-swift>=3.7", "transformers<4.52", "liger-kernel"),
        settings=("use_liger_kernel=true",),
        upstream=r"Qwen2_5_VLModel\.forward\(\) got an unexpected keyword argument 'pixel_values'",
        patched=r"UnsupportedCombinationError: ms-swift 3\.[\d.]+ with transformers 4\.[\d.]+ cannot train GRPO with "
        r"use_liger_kernel on this vision-language model",
        flags=("--model-arch", "qwen2.5-vl"),
    ),
    Reproducer(
        id="num-logits-to-keep-ignored",
        patch="trl.refuse-trl-0.14-on-transformers-4.52",
        script="num-logits-to-keep",
        requires=("trl>=0.14,<0.15", "transformers>=4.52"),
        settings=(),
        upstream=r"asked the model for \d+ positions \(num_logits_to_keep\) and it returned \d+",
        patched=r"UnsupportedCombinationError: trl 0\.14[\d.]* with transformers [\d.]+ trains on the wrong tokens",
        breaks_every_run=True,
    ),
    Reproducer(
        id="liger-loss-type",
        patch="trl.refuse-liger-missing-loss-type",
        script="grpo",
        # trl 0.22-0.24's default loss_type dapo with the Liger GRPO loss, on a liger-kernel without it.
        requires=("trl>=0.22,<0.25", "liger-kernel>=0.5.7,<0.6.4"),
        settings=("use_liger_loss=true",),
        upstream=r"ValueError: Unknown loss type: dapo",
        patched=r"UnsupportedCombinationError: loss_type='dapo' with the Liger GRPO loss needs liger-kernel >= 0\.6\.4",
    ),
    Reproducer(
        id="gmpo-liger",
        patch="trl.refuse-gmpo-with-liger",
        script="gmpo-liger",
        requires=("trl>=1.7,<1.14", "liger-kernel>=0.8.0"),
        settings=(),
        upstream=r"GMPOTrainer with use_liger_kernel trains on loss \S+, not GMPO's objective",
        patched=r"UnsupportedCombinationError: GMPOTrainer with use_liger_kernel=True on trl [\d.]+ trains the GRPO",
    ),
    Reproducer(
        id="empty-tools-tool-section",
        patch="trl.empty-tools-as-none",
        script="empty-tools",
        # trl 0.28-0.29 (0.26.0 too, which no cell pins): a template that tests `tools is not none` (Llama 3.x's)
        # writes its tool section into every prompt of a run with no tools. Silent upstream: the probe reads the
        # prompts the policy trained on.
        requires=("trl>=0.28,<1.0",),
        settings=(),
        upstream=r"the run passed no tools, yet the prompts the policy trains on carry the template's tool section",
        patched=None,
    ),
    Reproducer(
        id="vllm-server-unresolvable",
        patch="trl.vllm-server-wait",
        script="grpo",
        # Server mode pointed at a host name that cannot resolve: trl 1.16 retries until vllm_server_timeout (20 s
        # here, 240 s by default), logging "Server is not up yet"; trl 0.19-1.12 resolve a base_url's host first and
        # fail at once with a bare socket.gaierror. Patched: refused at once, naming the address and the command.
        requires=("trl>=0.16", "vllm"),
        settings=("vllm_mode=server", "vllm_server_host=grpo-compat-no-such-host.invalid", "vllm_server_timeout=20"),
        flags=("--vllm", "colocate"),  # the vLLM smoke settings; vllm_mode=server above wins
        upstream=r"ConnectionError: The vLLM server can't be reached at \S+ after 20(\.0)? seconds"
        r"|gaierror: \[Errno -2\] Name or service not known",
        patched=r"GRPOSettingsError: vLLM server host 'grpo-compat-no-such-host\.invalid' .* does not resolve",
    ),
    Reproducer(
        id="vllm-stale-weights",
        patch="trl.vllm-sync-check",
        script="grpo",
        # The reported versions (trl <= 0.15, ms-swift 3.5 / 4.3.1) cannot run here: the sync is made to miss vLLM,
        # as theirs did. Upstream trains on without a word, sampling from the base weights.
        requires=("trl>=1.0", "vllm"),
        settings=(),
        flags=("--vllm", "colocate", "--vllm-sync-lost"),
        upstream=None,
        patched=r"VLLMWeightsError: after a weight sync, vLLM generates with weights that are not the policy's",
    ),
    Reproducer(
        id="vllm-truncated-sampling",
        patch="trl.vllm-truncated-logprobs",
        script="grpo",
        # top_p=0.8: vLLM renormalises its log-probs over the tokens kept (about 0.8 of the tiny model's near-uniform
        # mass), the trainer scores the full vocabulary, and trl's sequence-level importance ratio (default
        # sequence_mask) is the product of the kept mass over the 8 completion tokens: about 0.8^8. Patched: about 1.
        # (top_k=8 drives it to 1e-12; on this near-uniform model its boundary token holds 1/9 of the kept mass, so
        # the engines' 1e-3 logit disagreement can move the patched ratio by 0.1 a token: top_p shows the fix cleanly.)
        requires=("trl>=1.12", "vllm"),
        settings=("top_p=0.8",),
        flags=("--vllm", "colocate"),
        checks=("is-ratio",),
        upstream=r"vLLM importance-sampling ratio averaged [\d.e-]+ over the run's steps",
        patched=None,
    ),
    Reproducer(
        id="vllm-cpu-prepacked-sync",
        patch="trl.vllm-cpu-prepacked-sync",
        script="grpo",
        # trl's colocate engine runs in bf16 on CPU: on a CPU with bf16 matmul vLLM packs its linear weights away and
        # trl's first sync (load_weights) fails; elsewhere (AVX2) upstream trains, and patched must equal it. Both
        # check after every sync that the engine computes with the policy's weights (its packed linears read back).
        requires=PREPACKED_WINDOW,
        settings=(),
        flags=("--vllm", "colocate", "--vllm-engine-check"),
        checks=("engine",),
        upstream=PREPACKED_SYNC,
        patched=None,
        only_where=CPU_PACKS_BF16,
    ),
    Reproducer(
        id="swift-vllm-cpu-prepacked",
        patch="swift.vllm-cpu-prepacked-sync",
        script="swift",
        # swift rlhf --use_vllm true --vllm_mode colocate in float32: vLLM's CPU build packed its linear weights
        # away for oneDNN, and ms-swift's sync calls load_weights on them. Patched: loaded through reload_weights.
        requires=SWIFT_PREPACKED_WINDOW,
        settings=(),
        flags=("--vllm", "colocate"),
        upstream=PREPACKED_SYNC,
        patched=None,
    ),
    Reproducer(
        id="removed-setting",
        patch="trl.grpo-config-settings",
        script="grpo",
        requires=("trl>=0.28",),  # max_prompt_length: deprecated in 0.26, removed in 0.28
        settings=("max_prompt_length=64",),
        flags=("--keep-unknown-settings",),
        upstream=r"unexpected keyword argument 'max_prompt_length'",
        patched=r"SettingNotTakenError: .*`max_prompt_length` was removed in trl 0\.28\.0",
    ),
    Reproducer(
        id="misspelt-setting",
        patch="trl.grpo-config-settings",
        script="grpo",
        requires=("trl>=0.14",),
        settings=("num_generation=2",),
        flags=("--keep-unknown-settings",),
        upstream=r"unexpected keyword argument 'num_generation'",
        patched=r"SettingNotTakenError: .*`num_generation` is not a setting of trl [\d.]+: did you mean `num_gen",
    ),
)
REPRODUCERS += (
    Reproducer(
        id="swift-renamed-argument-cli",
        patch="swift.arguments-not-taken",
        script="swift-cli",
        requires=("ms-swift>=4.1",),  # 3.x's --train_type is 4.x's --tuner_type (4.0.x took both)
        settings=("train_type=full",),
        # swift parses its arguments before a plugin file is imported: `grpo-compat run` refuses them before it
        # launches (the patch refuses them in each process it starts, for a launch the command line cannot read)
        flags=("--activation", "run"),
        upstream=r"remaining_argv: \['--train_type', 'full'\]",
        patched=r"(SettingNotTakenError: swift rlhf on ms-swift [\d.]+: |grpo-compat run: )`train_type` was renamed "
        r"to `tuner_type` in ms-swift 4\.1\.0",
    ),
    # Built in Python, as `rlhf_main(RLHFArguments(...))` scripts do: upstream's dataclass __init__ refuses the keyword
    # with a bare TypeError, before anything loads; patched, the same refusal names the release and the replacement.
    Reproducer(
        id="swift-renamed-argument-python",
        patch="swift.arguments-not-taken",
        script="swift",
        requires=("ms-swift>=4.1",),
        settings=("train_type=full",),
        flags=("--arguments-in-python", "--keep-unknown-settings"),
        upstream=r"RLHFArguments.__init__\(\) got an unexpected keyword argument 'train_type'",
        patched=r"SettingNotTakenError: RLHFArguments on ms-swift [\d.]+: `train_type` was renamed to `tuner_type` in "
        r"ms-swift 4\.1\.0",
    ),
    Reproducer(
        id="swift-misspelt-argument-python",
        patch="swift.arguments-not-taken",
        script="swift",
        requires=("ms-swift>=3.4",),
        settings=("num_generation=4",),
        flags=("--arguments-in-python", "--keep-unknown-settings"),
        upstream=r"RLHFArguments.__init__\(\) got an unexpected keyword argument 'num_generation'",
        patched=r"SettingNotTakenError: RLHFArguments on ms-swift [\d.]+: `num_generation` is not a setting of "
        r"ms-swift [\d.]+: did you mean `num_generations`\?",
    ),
)
# trl's environments and tools (issue 30 row 4): what is wrong with them surfaces at the first batch, after the model
# loaded ("phase: train"); patched, they are refused when GRPOTrainer is built, before it loads. The versions of the
# multi-turn smoke kinds (matrix/runs.py): trl's environment_factory (0.29, a dict of named environments from 1.8,
# transformers >= 5.2) and its Qwen2.5 chat template (1.3+), where tool calls parse without jmespath, which no cell
# installs (trl < 1.10 needs it for any tool, later trl on transformers < 5.13: reproducer tools-without-jmespath).
MULTI_TURN = ("trl>=1.10", "transformers>=5.13")
REPRODUCERS += (
    Reproducer(
        id="environment-name-unknown",
        patch="trl.reward-dry-run",
        failure="environment-or-tool-unusable",
        script="grpo",
        requires=MULTI_TURN,  # the `environments` smoke kind's (matrix/runs.py)
        settings=(),
        flags=("--multi-turn", "unknown-environment"),
        upstream=r"Example has `environment='counters'`, which is not among the environments passed to "
        r"`environment_factory`.*phase: train",
        patched=r"GRPOSettingsError: 16 example\(s\) of the dataset name an environment environment_factory lacks: "
        r"'counters' \(did you mean 'counter'\?\)",
    ),
    Reproducer(
        id="environment-column-removed",
        patch="trl.reward-dry-run",
        failure="environment-or-tool-unusable",
        script="grpo",
        requires=MULTI_TURN,
        settings=("remove_unused_columns=true",),
        flags=("--multi-turn", "environments"),
        upstream=r"Example has `environment=None`, which is not among the environments.*phase: train",
        patched=r"GRPOSettingsError: remove_unused_columns=True removes the dataset's 'environment' column",
    ),
    Reproducer(
        id="tool-without-docstring",
        patch="trl.reward-dry-run",
        failure="environment-or-tool-unusable",
        script="grpo",
        requires=MULTI_TURN,  # the `tools` smoke kind's (matrix/runs.py)
        settings=(),
        flags=("--multi-turn", "undocumented-tool"),
        upstream=r"Cannot generate JSON schema for add_undocumented because it has no docstring.*phase: train",
        patched=r"GRPOSettingsError: tool 'add_undocumented': transformers cannot describe it to the model",
    ),
    Reproducer(
        id="tools-without-jmespath",
        patch="trl.reward-dry-run",
        failure="environment-or-tool-unusable",
        script="grpo",
        # trl 1.3-1.9 (1.3, 1.4, 1.8, 1.9.2 read) need jmespath for any tool; the smoke needs trl's Qwen2.5 template
        requires=("trl>=1.3,<1.10", "transformers>=5.2"),
        settings=(),
        flags=("--multi-turn", "tools"),
        upstream=r"Using tools with GRPOTrainer requires the jmespath library for response parsing",
        patched=r"GRPOSettingsError: tools and environments need the jmespath package .*Fix: pip install jmespath",
    ),
)
# trl #5144: the tiny model fitted to call a tool (--model-arch qwen2-tool-caller) writes its call with blank space the
# chat template drops; re-rendered, the turn is shorter than the model wrote it, and trl 0.26-0.29's tool mask
# outgrows the completion ids. One tool round (max_tool_calling_iterations, trl 0.27 on).
REPRODUCERS += (
    Reproducer(
        id="tool-call-retokenised",
        patch="trl.tool-mask-length-check",
        script="grpo",
        requires=("trl>=0.27,<1.0", "transformers>=5.0"),
        # temperature 0.3: the fitted model writes its call exactly (16 of 16 samples; at 1.0 it garbles the JSON)
        settings=("max_completion_length=160", "max_tool_calling_iterations=1", "temperature=0.3"),
        flags=("--multi-turn", "tool-caller", "--model-arch", "qwen2-tool-caller"),
        upstream=r"The size of tensor a \(\d+\) must match the size of tensor b \(\d+\) at non-singleton dimension 1",
        patched=r"UnsupportedCombinationError: trl's tool mask disagrees with the completion ids in \d+ of \d+ "
        r"completions.*trl #5144",
    ),
)
# trl #4974 / #4975: the Liger GRPO loss trained on tool results (silent). The probe compares the gradients of the loss
# trl trains on (Liger's) and of trl's own, which masks them, on one batch with a tool round (liger-kernel installed).
REPRODUCERS += (
    Reproducer(
        id="liger-tool-results-trained",
        patch="trl.liger-tool-mask",
        script="liger-tool-mask",
        requires=("trl>=0.27,<0.29", "transformers>=5.0", "liger-kernel>=0.6"),
        settings=(),
        upstream=r"ProbeFailed: the Liger GRPO loss's gradient .* takes in the \d+ tool-result tokens trl's own loss "
        r"masks",
        patched=None,
    ),
)
# axolotl #3971: a GRPOTrainer subclass overriding _get_per_token_logps_and_entropies with trl 1.6's signature (no
# **kwargs) fails at the first step on trl >= 1.7, which passes compute_aux_loss, spatial_shapes and num_tiles.
REPRODUCERS += (
    Reproducer(
        id="logps-override-old-signature",
        patch="trl.refuse-outdated-logps-override",
        script="grpo",
        requires=("trl>=1.7,<1.17",),
        settings=(),
        flags=("--old-logps-override",),
        upstream=r"OldSignatureGRPOTrainer\._get_per_token_logps_and_entropies\(\) got an unexpected keyword argument "
        r"'(compute_aux_loss|num_tiles)'",
        patched=r"UnsupportedCombinationError: \S*OldSignatureGRPOTrainer overrides _get_per_token_logps_and_entropies "
        r"without the keywords compute_aux_loss, spatial_shapes, num_tiles",
    ),
)
# Liger-Kernel #1048 / trl #3368: the Liger GRPO loss reads a ZeRO-3 lm_head shard (empty on its rank) by attribute.
# An untied lm_head over DeepSpeed's default persistence threshold (qwen2-untied); trl >= 0.25's use_liger_kernel also
# patches the model with Triton kernels, which do not run on CPU, so the cell is trl 0.23 (use_liger_loss).
REPRODUCERS += (
    Reproducer(
        id="liger-zero3-empty-lm-head",
        patch="trl.liger-zero3-lm-head-route",
        script="grpo",
        requires=("trl>=0.18,<0.25", "liger-kernel>=0.5.8", *ZERO3_ON_CPU),
        settings=("use_liger_loss=true", "loss_type=bnpo", "ds3_gather_for_generation=false"),
        flags=("--model-arch", "qwen2-untied"),
        launcher="zero3",
        upstream=r"The size of tensor a \(0\) must match the size of tensor b \(256\) at non-singleton dimension 1",
        patched=None,
        checks=("ranks",),
    ),
)
# trl #3247: num_iterations=2, a trainer resumed from checkpoint-1 (between two generation steps) reads the buffer of
# completions the checkpoint does not hold. Its do-no-harm twin (checkpoint-2) is the pair resume-at-generation.
REPRODUCERS += (
    Reproducer(
        id="resume-between-generations",
        patch="trl.resume-generation-buffer",
        script="grpo",
        requires=("trl>=0.16,<0.17",),
        settings=("num_iterations=2",),
        flags=("--steps", "4", "--resume-from-step", "1"),
        upstream=r"TypeError: 'NoneType' object is not subscriptable",
        patched=None,
        checks=("resumed-steps",),  # patched: the resumed trainer itself runs steps 2 to 4
    ),
)
# ms-swift #9928: GRPO with --teacher_model and no reward function. Before 4.4 (no on-policy distillation) swift
# refuses it once the policy and reference models loaded; patched, while swift parses its arguments, in-process and
# through the plugin. From 4.4 it trains: the do-no-harm pair swift-opd-no-rewards.
_TEACHER_WITHOUT_REWARDS = Reproducer(
    id="swift-teacher-without-rewards",
    patch="swift.grpo-arguments-check",
    failure="swift-grpo-teacher-without-opd",
    script="swift",
    requires=("ms-swift>=3.6,<4.4",),  # 3.5 has no --teacher_model (GKD came in 3.6.0)
    settings=(),
    flags=("--teacher",),
    upstream=r"You must specify reward_funcs or reward_model",
    patched=r"GRPOSettingsError: GRPO with teacher_model and no reward function cannot train on ms-swift [\d.]+.*"
    r'pip install "ms-swift>=4\.4"',
)
REPRODUCERS += (
    _TEACHER_WITHOUT_REWARDS,
    replace(
        _TEACHER_WITHOUT_REWARDS,
        id="swift-teacher-without-rewards-cli",
        script="swift-cli",
        patched=_TEACHER_WITHOUT_REWARDS.patched + ".*phase: config",
    ),
)
# Census row 41 (trl #6083 / #6085, #7248): trl >= 1.7 adds a mixture of experts' router load-balancing loss to
# GRPO's by default, so a run with constant rewards (every advantage 0) still moves the weights, without a word;
# patched, the watchdog stops it naming the router loss and its coefficient. Its do-no-harm twin is the pair moe.
REPRODUCERS += (
    Reproducer(
        id="watchdog-moe-router-loss-only",
        patch="trl.learning-watchdog",
        failure="moe-router-aux-loss-default",
        script="grpo",
        requires=("trl>=1.7",),
        settings=(),
        flags=("--model-arch", "qwen3-moe", "--reward", "constant", "--watchdog", "stop"),
        upstream=_STALLED,
        patched=r"TrainingStalledError: GRPO is not learning: no group had any reward spread.*the weights moved all "
        r"the same, through the MoE router load-balancing loss .*router_aux_loss_coef=0\.001",
        checks=("learns",),
    ),
)

# top_p=0.8 in 2 processes (gloo DDP, a colocated engine per rank): each rank's vLLM log-probs are corrected on its own.
REPRODUCERS += (
    replace(
        next(r for r in REPRODUCERS if r.id == "vllm-truncated-sampling"),
        id="vllm-truncated-sampling-ddp",
        launcher="ddp",
    ),
)
# trl #6824: AsyncGRPOTrainer with an environment_factory and no train_dataset reads self.args before Trainer sets it.
REPRODUCERS += (
    Reproducer(
        id="async-grpo-environment-owned",
        patch="trl.refuse-async-grpo-environment-owned",
        script="async-grpo-environment-owned",
        requires=("trl>=1.9,<1.11",),
        settings=(),
        upstream=r"AttributeError: 'AsyncGRPOTrainer' object has no attribute 'args'",
        patched=r"UnsupportedCombinationError: AsyncGRPOTrainer with an environment_factory and no train_dataset fails",
    ),
)
# trl #6361: an earlier assistant turn holding only </think> (a thinking model's turn after a generation prompt that
# opens the block) in GRPO prompts rendered with trl's Qwen3 training template, which GRPO swaps in with tools.
REPRODUCERS += (
    Reproducer(
        id="think-block-history",
        patch="trl.think-block-training-template",
        script="think-block",
        # trl 1.1-1.8 (1.8.0 run); tools need transformers 5 and, before trl 1.10, jmespath (not a tracked version)
        requires=("trl>=1.1,<1.9", "transformers>=5.0"),  # the cells with jmespath: trl-1.8-tools
        settings=(),
        upstream=r"ProbeFailed: the earlier turn's reasoning lies outside its think block in the prompts the policy "
        r"trains on: '<\|im_start\|>assistant\\n<think>\\n\\n</think>\\n\\nTwo plus two is four",
        patched=None,
    ),
    # The same turn in SFT with assistant_only_loss, under Qwen3.5 Think's template (trl 1.5 on): the loss trains on it.
    Reproducer(
        id="think-block-sft-qwen3.5",
        patch="trl.think-block-training-template",
        script="think-block",
        requires=("trl>=1.5,<1.9", "transformers>=5.0"),
        settings=("trainer=sft", "template=qwen3_5_think"),
        upstream=r"ProbeFailed: SFT's assistant-only loss trains on the turn with its reasoning outside its think "
        r"block: '<think>\\n\\n</think>\\n\\nTwo plus two is four",
        patched=None,
    ),
)

# trl.fused-loss-check: the probe trains on trl's fused (Liger) GRPO loss and compares its first batch's loss with trl's
# own on the same batch and policy. Plain: they differ, silently; patched: grpo_compat names both values (and trains as
# plain). Its do-no-harm pair is the run kind fused-loss-agrees (matrix/runs.py FUSED_LOSS).
_FUSED_LOSS_DIFFERS = r"ProbeFailed: the fused GRPO loss is not the objective: trained on fused loss \S+, trl's own"
REPRODUCERS += (
    Reproducer(
        id="fused-loss-token-normalisation",
        patch="trl.fused-loss-check",
        failure="liger-token-normalisation-accumulation",
        script="fused-loss",
        # dapo with gradient accumulation: micro-batches of different lengths (some completions end early) are
        # normalised by their own tokens in Liger, by the window's in trl (trl PR #5890, trl 1.11).
        requires=("trl>=0.22,<1.11", "liger-kernel>=0.6.4"),
        settings=("loss_type=dapo", "gradient_accumulation_steps=2"),
        upstream=_FUSED_LOSS_DIFFERS,
        patched=None,
    ),
    Reproducer(
        id="fused-loss-moe-aux-dropped",
        patch="trl.fused-loss-check",
        failure="moe-aux-loss-dropped-liger",
        script="fused-loss",
        # trl 1.7-1.13 add a MoE router's auxiliary loss in _compute_loss only (trl #7009); the tiny Qwen3-MoE's 0.001.
        requires=("trl>=1.7,<1.14", "liger-kernel>=0.8.0"),
        settings=("loss_type=bnpo",),
        flags=("--model-arch", "qwen3-moe"),
        upstream=_FUSED_LOSS_DIFFERS,
        patched=None,
    ),
    Reproducer(
        id="fused-loss-prompt-tuning",
        patch="trl.fused-loss-check",
        failure="liger-prompt-learning-peft",
        script="fused-loss",
        # A prompt-tuning adapter (4 virtual tokens): the fused path skips PeftModel.forward (trl 1.7.1 refuses it).
        # Run on trl 1.7.0 (liger-kernel 0.8.0, peft 0.18.1, transformers 5.10.0) in a cell since dropped: a trl
        # 1.1-1.8 cell also plans the think-block reproducers (jmespath needed) and tools-without-jmespath (jmespath
        # absent). trl 0.29.1 and 1.0.0 fail instead ('Qwen2Model' object has no attribute 'model'). Planned nowhere.
        requires=("trl>=1.7,<1.7.1", "liger-kernel>=0.8.0", "peft"),
        # beta 1: the difference on the first batch is the KL the virtual tokens make (0.04 gives 1.7e-5, near the
        # tolerance; the missing gradient of the virtual tokens is what matters, and it shows no value)
        settings=("loss_type=bnpo", "beta=1.0"),
        flags=("--prompt-tuning",),
        upstream=_FUSED_LOSS_DIFFERS,
        patched=None,
    ),
)
# trl #3823: GSPO with a token-summed loss type weights each sequence by its length; trl 0.20-1.6 are silent.
# Plain trains silently (the check objective-named finds nothing said); patched warns when GRPOConfig is built, and
# trains to plain's weights. Its do-no-harm pair: run kind gspo-grpo (matrix/runs.py GSPO).
REPRODUCERS += (
    Reproducer(
        id="gspo-token-summed",
        patch="trl.sequence-level-token-sum",
        script="grpo",
        requires=("trl>=0.20,<1.7",),
        settings=("importance_sampling_level=sequence", "loss_type=bnpo"),
        upstream=r"the run's settings change its objective and nothing named it .*: trains silently",
        patched=None,
        checks=("objective-named",),
    ),
)
# ms-swift #3943: GRPO with --use_vllm true --sleep_level 1 on ms-swift 3.2.1-3.3 parses gradient_accumulation_steps 4
# into 1 (nothing is said); patched, RLHFArguments refuses it while parsing. Its do-no-harm pair: swift-sleep-level-ga1.
REPRODUCERS += (
    Reproducer(
        id="swift-sleep-level-accumulation",
        patch="swift.refuse-sleep-level-accumulation",
        script="swift-sleep-level",
        requires=("ms-swift>=3.2.1,<3.4",),
        settings=("gradient_accumulation_steps=4",),
        upstream=r"ProbeFailed: ms-swift trains with gradient_accumulation_steps 1, not the 4 asked for",
        patched=r"GRPOSettingsError: ms-swift [\d.]+ GRPO with use_vllm and sleep_level=1 replaces "
        r"gradient_accumulation_steps=4 with 1",
    ),
)
