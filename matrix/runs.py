"""Which runs a matrix cell gets, and how each is launched and judged.

Run kinds: ``single`` (one process), ``ddp`` (2 processes, gloo on CPU), ``zero2`` / ``zero3``
(DeepSpeed, 2 processes) and the do-no-harm sweep ``harm:<variant>`` (matrix/harm_sweep.py) for cells with
deepspeed, ``tools`` / ``environments`` (multi-turn, in trl cells that have trl's ``tools`` and
``environment_factory``: a local tool and one local environment, or two named environments), ``vllm`` /
``vllm-ddp`` (generation by vLLM in colocate mode, 1 and 2 processes: the only smoke kinds of
a cell with vLLM, whose CPU build takes minutes a run), ``swift`` (ms-swift GRPO, in-process) and
``swift-cli`` / ``swift-cli-2proc`` (the `swift rlhf` command line, 1 and 2 processes; patched = with
grpo_compat's plugin) for ms-swift cells; each plain and patched. ``moe`` (not in --quick: a tiny Qwen3-MoE,
trl >= 1.7, whose router loss trl adds to GRPO's); ``lora-bf16-merge`` (ms-swift cells with DeepSpeed, plain only:
a probe of what a bf16 LoRA merge keeps, census row 14). Then every reproducer of matrix/reproducers.py whose window
the cell's versions fall in.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace
from pathlib import Path
from statistics import mean

from grpo_compat.core.versions import window_problem
from grpo_compat.matrix import launchers
from grpo_compat.matrix.project import NamedRun
from grpo_compat.testing import multi_turn
from grpo_compat.testing.smoke import free_port
from matrix import effect_probes, harm_sweep, upstream_suite
from matrix.reproducers import (
    CHECKS,
    CPU_PACKS_BF16,
    FIELD_SHAPE,
    MULTI_TURN,
    PREPACKED_SYNC,
    PREPACKED_WINDOW,
    REPRODUCERS,
    SWIFT_PREPACKED_WINDOW,
    ZERO3_ON_CPU,
)

MATRIX = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Script:
    path: Path
    family: str  # the cells it runs in: "grpo" (TRL cells) or "swift" (ms-swift cells)
    # A probe calls one upstream function directly (no training) and judges itself: {"status": "ok"|"error", ...}.
    probe: bool = False


SCRIPTS = {
    "grpo": Script(MATRIX / "smoke_grpo.py", "grpo"),
    "swift": Script(MATRIX / "smoke_swift.py", "swift"),
    "swift-cli": Script(MATRIX / "smoke_swift_cli.py", "swift"),  # the real `swift rlhf`, with or without our plugin
    "logps": Script(MATRIX / "probe_logps.py", "grpo", probe=True),
    "logps-swift": Script(MATRIX / "probe_logps_swift.py", "swift", probe=True),
    "lm-head": Script(MATRIX / "probe_lm_head.py", "grpo", probe=True),
    "lm-head-unsloth": Script(MATRIX / "probe_lm_head_unsloth.py", "grpo", probe=True),
    "ga-scaling": Script(MATRIX / "probe_ga_scaling.py", "grpo", probe=True),  # launches DDP and ZeRO-2 runs itself
    "num-logits-to-keep": Script(MATRIX / "probe_num_logits_to_keep.py", "grpo", probe=True),
    "gmpo-liger": Script(MATRIX / "probe_gmpo_liger.py", "grpo", probe=True),
    "fused-loss": Script(MATRIX / "probe_fused_loss.py", "grpo", probe=True),  # trains; checks the first batch's loss
    "swift-sleep-level": Script(MATRIX / "probe_swift_sleep_level.py", "swift", probe=True),  # parses arguments only
    "liger-tool-mask": Script(MATRIX / "probe_liger_tool_mask.py", "grpo", probe=True),
    "async-grpo-environment-owned": Script(MATRIX / "probe_async_grpo_environment_owned.py", "grpo", probe=True),
    "token-normalisation": Script(MATRIX / "probe_token_normalisation.py", "grpo", probe=True),
    "lora-merge": Script(MATRIX / "probe_lora_merge.py", "swift", probe=True),  # census row 14, no patch
    "empty-tools": Script(MATRIX / "probe_empty_tools.py", "grpo", probe=True),
    "think-block": Script(MATRIX / "probe_think_block.py", "grpo", probe=True),
    # Every cell: each patch in its window applied, reverted and applied again, its effect probed in between.
    "effects": Script(MATRIX / "effect_probes.py", "any", probe=True),  # its patches: effect_runs()
}
STEPS = 3
# The smoke kinds of a trl or ms-swift cell, which a version skew breaks as a whole (Reproducer.breaks_every_run).
SMOKE_KINDS = (
    *("single", "ddp", "zero2", "zero3", "zero2-ga8", "zero3-ga8", "vllm", "vllm-ddp"),
    *("swift", "swift-cli", "swift-cli-2proc", "tools", "environments", "swift-vllm-bf16"),
)
# The multi-turn smoke kinds (smoke_grpo.py --multi-turn CASE) and their versions (see MULTI_TURN).
MULTI_TURN_KINDS = ("tools", "environments")
UNSHUFFLED = ("shuffle_dataset=false",)
# A reproducer of the vLLM path passes this flag to its smoke script: it runs in the cells with vLLM, the others not.
VLLM_FLAG = "--vllm"
# trl's own test suites (matrix/upstream_suite.py) need trl's git repository: its sdists carry no tests.
TRL_SOURCE_ENV = "GRPO_COMPAT_TRL_SOURCE"
UPSTREAM_SUITE = MATRIX / "upstream_suite.py"
# trl's own tool, environment and multi-turn GRPO tests (upstream:grpo-tools). They name trl's tiny Qwen3 models and
# fake generate() with Qwen's token ids, so they run on Qwen's real vocabulary (upstream_suite.py --qwen-vocab); trl
# marks them xfail below transformers 5.0 (tool parsing) and 5.2 (environments). trl 1.9's tag has 16 of them.
UPSTREAM_TOOLS = ("trl>=1.9", "transformers>=5.2")
UPSTREAM_TOOLS_KEYWORD = (
    "Qwen3 or tool or environment or chat_template_kwargs or reward_source or reward_processing_class"
)


@dataclass(frozen=True)
class Run(NamedRun):
    kind: str  # the run kinds of the module docstring, e.g. single, zero3-ga8, harm:<variant>, repro:<id>
    mode: str  # plain | patched
    script: str  # key of SCRIPTS
    launcher: str = "python"  # python | ddp | zero2 | zero3 (grpo_compat/matrix/launchers.py command())
    settings: tuple[str, ...] = ()
    flags: tuple[str, ...] = ()
    expect_error: str | None = None  # regex over the error; None: the run must train
    expectation: str = "trains"
    timeout_s: int = 900
    skip: str | None = None  # why this run is not run here
    checks: tuple[str, ...] = ()  # further judge checks of a run that trains (CHECKS, see failed_checks())
    same_as_plain: bool = True  # patched: weights bit-identical to plain (False where a patch corrects the run)
    variant: harm_sweep.Variant | None = None  # a do-no-harm sweep run: launched and judged by matrix/harm_sweep.py
    group: str | None = None  # the report's heading: a reproducer's catalogue record (None: the training runs)


# Measured here: with torch 2.13 on CPU, ZeRO-3 of DeepSpeed 0.16.5 to 0.19.0 hands some small
# parameters garbage values at load in about 60% of runs (0.19.8: none in 9 runs). An upstream
# CPU/gloo defect outside GRPO, random per run, so these runs are skipped with the reason shown.
ZERO3_CPU_SKIP = "DeepSpeed < 0.19.8 ZeRO-3 on CPU corrupts parameters at load (upstream, random per run)"
# transformers 4.48 + DeepSpeed divide the loss by gradient accumulation twice; trl.deepspeed-gas-double-scaling
# scales it once, so a patched DeepSpeed run with accumulation > 1 moves the weights differently from plain
# (the deepspeed-ga-double-scaling reproducer shows the patched gradient is DDP's).
ACCUMULATION_CORRECTED = ("transformers>=4.48.0,<4.49",)
# ms-swift #8123 (catalogue swift-gdpo-unscorable-reward): GDPO with a reward function that returns None for some
# completions. swift rlhf of every release that has scale_rewards='gdpo' (4.0 on) trains; these runs keep it so,
# plain and patched (the reward dry run and count check see the None), with identical weights.
GDPO_UNSCORABLE_REWARD = ("ms-swift>=4.0",)
# ms-swift #9928 (catalogue swift-grpo-teacher-without-opd): GRPO with --teacher_model and no reward function is
# on-policy distillation from 4.4 on; upstream trains it, and grpo_compat's watchdog must not call its rewards'
# zero spread a stall (it did: "GRPO is not learning"), plain and patched with identical weights.
OPD_RL = ("ms-swift>=4.4",)
# trl 0.18-0.24 take the Liger GRPO loss as use_liger_loss (0.25 on: use_liger_kernel, which also patches the model
# with Triton kernels that do not run on CPU).
LIGER_LOSS_FLAG = ("trl>=0.18,<0.25",)
# trl #3247 (catalogue trl-0.16-resume-empty-buffer): num_iterations=2, 4 steps saved every step, resumed from
# checkpoint-2, a generation step. Upstream resumes it with the uninterrupted run's weights (measured on trl 0.16.1);
# trl.resume-generation-buffer must leave it so (its reproducer resumes from checkpoint-1, between generations).
RESUME_AT_GENERATION = ("trl>=0.16,<0.17",)
RESUME_SETTINGS = ("num_iterations=2",)
RESUMED_AT = 2
# The methods of grpo_compat.testing.multi_turn's environments (reset aside): trl turns them into the run's tools.
ENVIRONMENT_METHODS = {
    name
    for environment in (multi_turn.CounterEnvironment, multi_turn.EchoEnvironment)
    for name, member in vars(environment).items()
    if callable(member) and not name.startswith("_") and name != "reset"
}
# Census row 41 (catalogue moe-router-aux-loss-default): trl >= 1.7 adds a mixture of experts' router load-balancing
# loss to GRPO's (1.7-1.13: router_aux_loss_coef 0.001 whatever the model declares; 1.14 on: the model's own). On the
# tiny Qwen3-MoE (it declares 0.001) upstream trains; patched, the weights must be identical.
MOE_ROUTER_LOSS = ("trl>=1.7",)
# trl #5144 (catalogue trl-tool-mask-retokenisation): the tiny model fitted to call a tool, in the trl releases whose
# tool loop re-renders the conversation. Its tool answers at length, so the re-rendered turn grows and upstream
# trains through a real tool round; trl.tool-mask-length-check must leave it so, with identical weights (its
# reproducer, tool-call-retokenised, is the short answer that breaks upstream).
TOOL_ROUND = ("trl>=0.27,<1.0", "transformers>=5.0")
# temperature 0.3: every sample calls the tool alike (at 1 some garble it); its answers differ in length
TOOL_ROUND_SETTINGS = ("max_completion_length=160", "max_tool_calling_iterations=1", "temperature=0.3")
TOOL_ROUND_FLAGS = ("--multi-turn", "tool-caller-long-result", "--model-arch", "qwen2-tool-caller")
# trl #6361 (catalogue trl-think-block-training-template): GRPO with a tool on prompts holding an earlier thinking
# turn. Where upstream renders it right, trl.think-block-training-template must leave the run alone, weights and all:
# Qwen3.5 Think's template, which GRPO keeps (its prefix check passes), and one-turn prompts under Qwen3's, whose
# training variant the patch edits (trl 1.5-1.8, where both templates ship; tools need jmespath before trl 1.10).
THINK_BLOCK_KEPT = ("trl>=1.5,<1.9", "transformers>=5.0")  # cell trl-1.8-tools, with jmespath
THINK_BLOCK_KEPT_RUNS = {"think-block-qwen3.5": ("template=qwen3_5_think",), "think-block-one-turn": ("history=none",)}
# trl 1.9, the first with upstream's fix, outside the patch's window: SFT on that turn under Qwen3.5 Think's template
# trains on its reasoning inside the think block, plain and patched alike (to the weights patched trl 1.8.0 ends with).
THINK_BLOCK_FIXED = ("trl>=1.9,<1.10", "transformers>=5.0")
# N14 (trl #6700; reproducer peft-adapter-loaded-for-inference): a LoRA policy continued from an adapter loaded with
# is_trainable=True, which upstream trains: grpo_compat's check that a weight can move stays silent, weights identical
# (a new adapter from peft_config is the lora pair of LORA_SMOKE).
LORA_ADAPTER = ("trl>=1.0", "peft>=0.20")
# trl.fused-loss-check (docs/objective-invariants.md): where trl's fused (Liger) GRPO loss is the objective, the check
# on the first batch stays silent and the weights are plain's. bnpo: liger-kernel < 0.6.4 lacks the default dapo.
FUSED_LOSS = ("trl>=0.17,<1.14", "liger-kernel")
FUSED_LOSS_AGREES = ("loss_type=bnpo",)
# swift.refuse-sleep-level-accumulation: --use_vllm --sleep_level 1 with gradient_accumulation_steps 1 asked trains as
# asked on ms-swift 3.2.1-3.3 (the override changes nothing): never refused.
SLEEP_LEVEL_KEPT = ("ms-swift>=3.2.1,<3.4",)
# trl.sequence-level-token-sum: GSPO as its paper defines it (loss_type grpo) is left alone, weights and all.
GSPO = ("trl>=0.20,<1.7",)
GSPO_PER_SEQUENCE = ("importance_sampling_level=sequence", "loss_type=grpo")
# A LoRA policy trained by GRPOTrainer (peft_config): what a peft release is proven on in a trl cell without vLLM
# (the vLLM cells sync a LoRA policy: vllm-lora). From trl 1.0, where the peft cells' plans had no LoRA run; the older
# peft cells (trl-0.15, trl-0.29-peft-zero3) prove theirs through the PEFT reproducers and tests.
LORA_SMOKE = ("trl>=1.0", "peft")
# Census row 14 (ms-swift #5334): a LoRA trained under DeepSpeed bf16 is saved in bf16 and its merge "equals the base".
LORA_BF16_MERGE = "lora-bf16-merge-rounds-away"


def _pair(
    kind: str,
    script: str,
    launcher: str = "python",
    skip: str | None = None,
    settings: tuple[str, ...] = (),
    checks: tuple[str, ...] = (),
    flags: tuple[str, ...] = (),
) -> list[Run]:
    patched_expectation = "trains, weights identical to plain"
    shared = dict(settings=settings, skip=skip, checks=checks, flags=flags)
    return [
        Run(kind, "plain", script, launcher, **shared),
        Run(kind, "patched", script, launcher, expectation=patched_expectation, **shared),
    ]


def sweep_runs(zero3_skip: str | None, quick: bool) -> list[Run]:
    """The do-no-harm sweep's plain and patched runs (all of it, or with ``quick`` its CI variants)."""
    runs = []
    for variant in harm_sweep.VARIANTS:
        if quick and not variant.quick:
            continue
        shared = dict(skip=zero3_skip if variant.stage == 3 else None, checks=harm_sweep.checks_of(variant))
        patched = "fails only where plain fails (then no later), else trains; identical weights where plain trains"
        runs += [
            Run(f"harm:{variant.id}", "plain", "grpo", expectation="as upstream does", variant=variant, **shared),
            Run(f"harm:{variant.id}", "patched", "grpo", expectation=patched, variant=variant, **shared),
        ]
    return runs


def upstream_suite_runs(
    versions: dict[str, str | None],
    suites: tuple[str, ...] = ("grpo", "sft"),
    keyword: str | None = None,
    name: str | None = None,
    flags: tuple[str, ...] = (),
) -> list[Run]:
    """trl's own GRPO and SFT tests, plain and patched: every outcome and final loss must be the same.

    Slow (minutes a suite), so not in ``--quick``; skipped with the reason where no trl git source is given
    (``GRPO_COMPAT_TRL_SOURCE``) or it has no tag of the cell's trl. ``keyword``: only the tests pytest's ``-k``
    selects (the run is named ``upstream:<suite>-<name or keyword>``); ``flags``: more of upstream_suite.py's.
    """
    source = os.environ.get(TRL_SOURCE_ENV)
    skip = None
    if not source:
        skip = f"trl's tests come from a trl git repository: set {TRL_SOURCE_ENV} (trl's sdists carry no tests)"
    else:
        git = upstream_suite.git_dir(Path(source))
        tags = upstream_suite.list_tags(git) if git else []
        if git is None or upstream_suite.choose_tag(str(versions.get("trl")), tags) is None:
            skip = f"{source} has no tag of trl {versions.get('trl')}"
    expectation = "every test's outcome and final loss as in the plain pass"
    selected = ("--keyword", keyword) if keyword else ()
    label = f"-{name or keyword}" if keyword else ""
    return [
        Run(
            f"upstream:{suite}{label}",
            mode,
            "upstream",
            flags=("--suite", suite, *selected, *flags),
            skip=skip,
            timeout_s=1800,
            **extra,
        )
        for suite in suites
        for mode, extra in (("plain", {"expectation": "trl's tests run"}), ("patched", {"expectation": expectation}))
    ]


def packs_trl_vllm_weights(versions: dict[str, str | None], device: str) -> bool:
    """Whether trl's colocated vLLM engine here packs its bf16 linear weights away (vllm-cpu-prepacked-weights):
    a trl cell with vLLM on CPU, in the window, on a CPU with bf16 matmul (AVX512-BF16 / AMX)."""
    return not versions.get("ms-swift") and _packs_vllm_weights(versions, device)


def _packs_vllm_weights(versions: dict[str, str | None], device: str) -> bool:
    """Whether the cell's colocated bf16 vLLM engine packs its weights away here: trl's (vllm-cpu-prepacked-
    weights) or ms-swift's bf16 runs (vllm-cpu-prepacked-weights, whose float32 runs pack on any CPU)."""
    from grpo_compat.fixes.vllm_cpu_prepack import cpu_packs_bf16

    window = SWIFT_PREPACKED_WINDOW if versions.get("ms-swift") else PREPACKED_WINDOW
    in_window = bool(versions.get("vllm")) and window_problem(window, versions) is None
    return device == "cpu" and in_window and cpu_packs_bf16()


def _colocated(run: Run) -> bool:
    """A run generating with a colocated vLLM engine, whose weight sync calls the engine's load_weights (not the
    stale-weights reproducer's: its engine's load_weights is replaced by one that drops the weights)."""
    colocated = VLLM_FLAG in run.flags and "vllm_mode=server" not in run.settings and run.script in ("grpo", "swift")
    return colocated and "--vllm-sync-lost" not in run.flags


def _where_the_cpu_packs_bf16(runs: list[Run]) -> list[Run]:
    """On a CPU that packs a bf16 engine's weights, every plain colocated run fails at its first sync: the smoke
    pairs' plain runs expect it and their patched twins train (trl.vllm-cpu-prepacked-sync, or ms-swift's); the other
    reproducers' plain runs expect it instead of their own failure, which a plain run cannot reach here."""
    record = "vllm-cpu-prepacked-weights: this CPU packs bf16, AVX512-BF16 / AMX"
    planned = []
    for run in runs:
        library = "swift" if run.script == "swift" else "trl"
        if run.script == "upstream":  # trl's own vLLM tests: its colocate ones fail plain at the first sync here
            if run.mode == "plain":
                run = replace(run, expectation=f"trl's tests run (the colocate ones fail at the first sync: {record})")
            else:
                expectation = "every test's outcome and final loss as in the plain pass, or passed where plain failed "
                run = replace(run, same_as_plain=False, expectation=expectation + "at the first sync")
        elif _colocated(run) and run.mode == "plain" and run.expect_error != PREPACKED_SYNC:
            earlier = (
                "upstream fails at the first sync" if run.group is None else "upstream fails earlier, at the first sync"
            )
            run = replace(run, expect_error=PREPACKED_SYNC, expectation=f"{earlier} ({record})")
        elif _colocated(run) and run.group is None and run.mode == "patched":
            run = replace(run, expectation=f"trains where plain fails ({library}.vllm-cpu-prepacked-sync)")
        planned.append(run)
    return planned


def planned_runs(versions: dict[str, str | None], device: str, quick: bool = False) -> list[Run]:
    runs = _smoke_runs(versions, device, quick)
    skew = next((r for r in REPRODUCERS if r.breaks_every_run and not window_problem(r.requires, versions)), None)
    if skew is None:
        planned = runs + _reproducer_runs(versions, device) + effect_runs(versions)
        return _where_the_cpu_packs_bf16(planned) if _packs_vllm_weights(versions, device) else planned
    # Plain cannot train correctly in this cell: its smoke runs reproduce the skew (a crash; a silent skew trains
    # wrongly, which its probe shows) and the patched ones train or are refused; the other reproducers and trl's
    # own suites need a plain run that trains correctly, and run in the other cells.
    if SCRIPTS[skew.script].probe:
        plain = dict(expectation=f"trains, wrongly ({skew.failure}: see repro:{skew.id})")
    else:
        plain = dict(expect_error=skew.upstream, expectation=f"upstream fails ({skew.failure})")
    if skew.patched:
        patched = dict(expect_error=skew.patched, expectation=f"refused before the model loads ({skew.patch})")
    else:
        patched = dict(expectation=f"trains where plain fails ({skew.patch})")
    runs = [replace(run, **(plain if run.mode == "plain" else patched)) for run in runs if run.kind in SMOKE_KINDS]
    effects = effect_runs(versions, only=skew.patch if skew.breaks_import else None)
    return runs + [run for run in _reproducer_runs(versions, device) if run.kind == f"repro:{skew.id}"] + effects


def effect_runs(versions: dict[str, str | None], only: str | None = None) -> list[Run]:
    """One run that shows, in this process, the effect of every patch in the cell's window (matrix/effect_probes.py);
    ``only``: of that patch alone."""
    swift = bool(versions.get("ms-swift"))  # an ms-swift cell shows the swift patches, a trl cell the others
    shown = [patch_id for patch_id in effect_probes.probes_in(versions) if patch_id.startswith("swift.") == swift]
    shown = [patch_id for patch_id in shown if only in (None, patch_id)]
    if not shown:
        return []
    expectation = f"the effect of each of {len(shown)} patches while applied, none before apply() or after revert()"
    return [Run("effects", "patched", "effects", flags=("--patches", ",".join(shown)), expectation=expectation)]


def _smoke_runs(versions: dict[str, str | None], device: str, quick: bool) -> list[Run]:
    runs: list[Run] = []
    if versions.get("vllm") and versions.get("ms-swift"):
        # swift rlhf --use_vllm true, colocate. Upstream trains where vLLM's CPU build keeps its linear weights:
        # in bf16 on a CPU whose oneDNN has no bf16 matmul (AVX2); float32 is reproducer swift-vllm-cpu-prepacked.
        # swift refuses bf16 on CPU without use_cpu; at 1e-5 three Adam steps move no bf16 norm weight (1.0 +- 2^-8)
        bf16 = ("torch_dtype=bfloat16", "use_cpu=true", "learning_rate=0.01")
        return _pair("swift-vllm-bf16", "swift", settings=bf16, flags=(VLLM_FLAG, "colocate"))
    if versions.get("vllm"):
        # A vLLM engine starts in each run (about a minute on 2 CPU cores): these cells run the vLLM path only.
        colocate = (VLLM_FLAG, "colocate")
        runs += _pair("vllm", "grpo", flags=colocate)
        if device == "cpu":
            runs += _pair("vllm-ddp", "grpo", "ddp", flags=colocate)
        if versions.get("peft"):  # census row 24: the sync of a LoRA policy (trl merges the adapter, then loads)
            runs += _pair("vllm-lora", "grpo", flags=(*colocate, "--lora"))
            if device == "cpu":
                runs += _pair("vllm-lora-ddp", "grpo", "ddp", flags=(*colocate, "--lora"))
        if versions.get("deepspeed") and device == "cpu":
            # census row 23: ZeRO-3 shards gathered for the sync after each evaluation and checkpoint save
            steps = ("eval_strategy=steps", "eval_steps=1", "save_strategy=steps", "save_steps=1")
            skip = ZERO3_CPU_SKIP if window_problem(ZERO3_ON_CPU, versions) else None
            runs += _pair("vllm-zero3", "grpo", "zero3", skip, steps, flags=colocate)
        if not quick:  # trl's own vLLM tests (on CPU: its colocate training test, the upstream-suite plugin says)
            runs += upstream_suite_runs(versions, suites=("grpo",), keyword="vllm")
        return runs
    if versions.get("ms-swift"):
        runs += _pair("swift", "swift") + _pair("swift-cli", "swift-cli")
        if device == "cpu":
            runs += _pair("swift-cli-2proc", "swift-cli", flags=("--nproc", "2"))
        if window_problem(SLEEP_LEVEL_KEPT, versions) is None:
            kept = ("gradient_accumulation_steps=1",)
            runs += _pair("swift-sleep-level-ga1", "swift-sleep-level", settings=kept)
        if window_problem(GDPO_UNSCORABLE_REWARD, versions) is None:
            gdpo = dict(settings=("scale_rewards=gdpo",), flags=("--reward", "some-none"))
            runs += _pair("swift-gdpo-unscorable-reward", "swift", **gdpo)
        if window_problem(OPD_RL, versions) is None:
            runs += _pair("swift-opd-no-rewards", "swift", flags=("--teacher",))
        if versions.get("deepspeed"):  # census row 14: what a bf16 DeepSpeed LoRA loses, and where (no patch acts)
            expectation = "DeepSpeed bf16 saves the LoRA in bf16; a bf16 merge rounds the update away either way"
            runs.append(Run("lora-bf16-merge", "plain", "lora-merge", expectation=expectation, group=LORA_BF16_MERGE))
    else:
        runs += _pair("single", "grpo")
        if window_problem(LORA_SMOKE, versions) is None:
            runs += _pair("lora", "grpo", flags=("--lora",))
        if window_problem(RESUME_AT_GENERATION, versions) is None:
            resume = ("--steps", "4", "--resume-from-step", str(RESUMED_AT))
            runs += _pair("resume-at-generation", "grpo", settings=RESUME_SETTINGS, checks=("resumed",), flags=resume)
        if window_problem(LORA_ADAPTER, versions) is None:
            runs += _pair(
                "lora-adapter-trainable", "grpo", checks=("adapter-learns",), flags=("--lora-adapter", "trainable")
            )
        if window_problem(GSPO, versions) is None and not quick:
            runs += _pair("gspo-grpo", "grpo", settings=GSPO_PER_SEQUENCE)
        if window_problem(FUSED_LOSS, versions) is None:
            runs += _pair("fused-loss-agrees", "fused-loss", settings=FUSED_LOSS_AGREES)
        if window_problem(MOE_ROUTER_LOSS, versions) is None and not quick:  # CI time: its reproducer runs in quick
            runs += _pair("moe", "grpo", flags=("--model-arch", "qwen3-moe"))
        if window_problem(TOOL_ROUND, versions) is None:
            runs += _pair("tool-round", "grpo", settings=TOOL_ROUND_SETTINGS, flags=TOOL_ROUND_FLAGS)
        if window_problem(THINK_BLOCK_KEPT, versions) is None:
            for kind, settings in THINK_BLOCK_KEPT_RUNS.items():
                runs += _pair(kind, "think-block", settings=settings)
        if window_problem(THINK_BLOCK_FIXED, versions) is None:
            runs += _pair("think-block-sft-fixed", "think-block", settings=("trainer=sft", "template=qwen3_5_think"))
        if window_problem(MULTI_TURN, versions) is None:
            for kind in MULTI_TURN_KINDS:
                runs += _pair(kind, "grpo", flags=("--multi-turn", kind), checks=("multi-turn",))
            # A misnamed row the run never draws (unshuffled, 2 of 16 prompts): trains plain, so patched must too
            late = ("--multi-turn", "late-unknown-environment")
            runs += _pair(
                "environments-unknown-undrawn", "grpo", settings=UNSHUFFLED, checks=("multi-turn",), flags=late
            )
        if device == "cpu":  # one GPU per lent machine: multi-process kinds run on CPU only
            runs += _pair("ddp", "grpo", "ddp")
            if versions.get("deepspeed"):
                skip = ZERO3_CPU_SKIP if window_problem(ZERO3_ON_CPU, versions) else None
                runs += _pair("zero2", "grpo", "zero2") + _pair("zero3", "grpo", "zero3", skip)
                accumulating = _pair("zero2-ga8", "grpo", "zero2", None, FIELD_SHAPE, CHECKS)
                accumulating += _pair("zero3-ga8", "grpo", "zero3", skip, FIELD_SHAPE, CHECKS)
                if window_problem(ACCUMULATION_CORRECTED, versions) is None:
                    corrected = "trains; weights differ from plain: trl.deepspeed-gas-double-scaling scales once"
                    accumulating = [
                        replace(run, same_as_plain=False, expectation=corrected) if run.mode == "patched" else run
                        for run in accumulating
                    ]
                runs += accumulating
                if versions.get("liger-kernel") and window_problem(LIGER_LOSS_FLAG, versions) is None:
                    # The Liger loss with a ZeRO-3 lm_head that generation left whole: upstream trains, and
                    # trl.liger-zero3-lm-head-route must not touch it (its reproducer is the sharded case).
                    liger = ("use_liger_loss=true", "loss_type=bnpo")
                    runs += _pair(
                        "zero3-liger", "grpo", "zero3", skip, liger, ("ranks",), ("--model-arch", "qwen2-untied")
                    )
                runs += sweep_runs(skip, quick)
            if not quick:
                runs += upstream_suite_runs(versions)
                # Not beside liger-kernel: none of these tests takes the Liger loss, which is what that cell proves.
                if window_problem(UPSTREAM_TOOLS, versions) is None and not versions.get("liger-kernel"):
                    tools = dict(keyword=UPSTREAM_TOOLS_KEYWORD, name="tools", flags=("--qwen-vocab",))
                    runs += upstream_suite_runs(versions, suites=("grpo",), **tools)
    return runs


def _reproducer_runs(versions: dict[str, str | None], device: str = "cpu") -> list[Run]:
    runs: list[Run] = []
    script = "swift" if versions.get("ms-swift") else "grpo"
    for reproducer in REPRODUCERS:
        if SCRIPTS[reproducer.script].family != script or window_problem(reproducer.requires, versions):
            continue
        if (VLLM_FLAG in reproducer.flags) != bool(versions.get("vllm")):  # the vLLM path runs in vLLM cells only
            continue
        silently = " silently: runs on without a word" if reproducer.upstream is None else ""
        expectations = {
            "plain": (reproducer.upstream, f"upstream fails ({reproducer.failure}){silently}"),
            "patched": (reproducer.patched, "grpo_compat's message" if reproducer.patched else _success(reproducer)),
        }
        if reproducer.only_where == CPU_PACKS_BF16 and not packs_trl_vllm_weights(versions, device):
            expectations = {
                "plain": (None, "trains: this machine keeps trl's bf16 vLLM weights (no AVX512-BF16 / AMX CPU)"),
                "patched": (None, "trains, weights identical to plain (the patch leaves such an engine alone)"),
            }
        for mode, (expect_error, expectation) in expectations.items():
            runs.append(
                Run(
                    f"repro:{reproducer.id}",
                    mode,
                    reproducer.script,  # a probe runs its own script, in the cells of its family
                    reproducer.launcher,
                    settings=reproducer.settings,
                    flags=reproducer.flags,
                    expect_error=expect_error,
                    expectation=expectation,
                    checks=reproducer.checks,
                    group=reproducer.failure,
                )
            )
    return runs


def _success(reproducer) -> str:
    return "the probe passes" if SCRIPTS[reproducer.script].probe else "trains"


def command(run: Run, python: Path, model_dir: Path, output: Path, device: str, scratch: Path) -> list[str]:
    """The command line of one run, inside the cell's env."""
    if run.script == "upstream":
        source = os.environ.get(TRL_SOURCE_ENV, "")
        suite = [str(UPSTREAM_SUITE), "--mode", run.mode, *run.flags, "--source", source, "--output", str(output)]
        return [str(python), *suite, "--scratch", str(scratch / f"upstream-{run.mode}")]
    path = SCRIPTS[run.script].path
    script = launchers.smoke_arguments(path, run.mode, device, model_dir, output, run.settings, run.flags, STEPS)
    if run.variant is not None:
        return harm_sweep.launch(run.variant, python, script, scratch, free_port())
    return launchers.command(run.launcher, python, script, scratch)


def judge(run: Run, result: dict | None, plain: dict | None) -> tuple[str, str]:
    """(status, outcome) of a finished run from its JSON result (None when none was written).

    ``plain``: the result of the same kind's plain run, for a patched run (None when there is none to compare).
    """
    if result is None:
        return "fail", "crashed before writing a result"
    if run.script == "upstream":
        if result.get("status") != "ok":
            return "fail", (result.get("error") or "no result").splitlines()[0][:160]
        if run.mode == "plain":
            return "pass", result.get("summary", "")
        differences = upstream_suite.compare(plain or {}, result)
        recovered = [] if run.same_as_plain else _recovered_from_prepacked_sync(plain or {}, result)
        differences = [line for line in differences if line.split(": ", 1)[0] not in recovered]
        if recovered and not differences:
            return "pass", (
                f"{len(result.get('tests', {}))} tests: every outcome and final loss as in the plain pass, but "
                f"{len(recovered)} that plain failed at the first vLLM sync (this CPU packs bf16), which pass"
            )
        if differences:
            return "fail", f"{len(differences)} difference(s) from plain: " + "; ".join(differences)[:300]
        return "pass", f"{len(result.get('tests', {}))} tests: every outcome and final loss as in the plain pass"
    if run.variant is not None:
        findings = failed_checks(run, result) if result.get("status") == "ok" else []
        if run.mode == "plain":
            return "pass", harm_sweep.describe_plain(result, findings)
        plain_findings = (
            failed_checks(run, plain) + harm_sweep.silent_upstream_failures(plain)
            if plain and plain.get("status") == "ok"
            else []
        )
        return harm_sweep.judge_patched(result, plain, findings, plain_findings)
    plain_sha = plain.get("weights_sha256") if plain else None
    error = result.get("error") or ""
    first_line = error.splitlines()[0][:160] if error else ""
    findings = failed_checks(run, result) if result.get("status") == "ok" else []
    if run.expect_error is not None:
        # A silent upstream failure is a failed check of a run that trained; "phase" says when a run failed.
        evidence = "\n".join([error, *findings, f"phase: {result.get('phase')}"])
        if (result.get("status") == "error" or findings) and re.search(run.expect_error, evidence, re.S):
            return "pass", first_line or findings[0]
        return "fail", first_line or "; ".join(findings) or "trained, but an error was expected"
    if SCRIPTS[run.script].probe:  # a probe judges itself; its summary says what it checked
        ok = result.get("status") == "ok"
        trained_alike = (plain or {}).get("status") != "ok" or result.get("weights") == plain.get("weights")
        if ok and run.mode == "patched" and run.same_as_plain and not trained_alike:
            return "fail", "the probe passes, but its weights differ from the plain run's"
        return ("pass" if ok else "fail"), (result.get("summary") or "") if ok else first_line
    if result.get("corrupted_at_load"):
        return "fail", f"weights corrupted at load: {', '.join(result['corrupted_at_load'])[:120]}"
    if result.get("status") != "ok":
        return "fail", first_line
    if not result.get("all_trainable_params_changed"):
        return "fail", f"weights did not change: {', '.join(result.get('unchanged_params') or [])[:120]}"
    if findings:
        return "fail", "; ".join(findings)
    if run.mode == "patched" and run.same_as_plain and plain_sha and result.get("weights_sha256") != plain_sha:
        return "fail", "trained, but weights differ from the plain run"
    resets = result.get("environment_resets"), (plain or {}).get("environment_resets")
    trained_plain = plain is not None and plain.get("status") == "ok"
    if "multi-turn" in run.checks and run.mode == "patched" and trained_plain and resets[0] != resets[1]:
        # grpo_compat's environment check builds one environment per name and must never reset it
        return "fail", f"trained, but {resets[0]} environment resets where the plain run had {resets[1]}"
    shown = checked(run, result)
    return "pass", "trained" + (f" ({shown})" if shown else "")


def _recovered_from_prepacked_sync(plain: dict, patched: dict) -> list[str]:
    """trl tests that plain failed at the first vLLM sync with vllm-cpu-prepacked-weights' error and patched
    passed (an upstream run on a CPU that packs bf16: _where_the_cpu_packs_bf16)."""
    tests = patched.get("tests", {})
    return [
        nodeid
        for nodeid, entry in plain.get("tests", {}).items()
        if entry.get("outcome") == "failed"
        and re.search(PREPACKED_SYNC, entry.get("message") or "")
        and tests.get(nodeid, {}).get("outcome") == "passed"
    ]


# trl's logged sampling/importance_sampling_ratio/mean when vLLM and the trainer score the same distribution with the
# same weights: 1 up to the engines' numerical disagreement (about 1e-3 on the tiny model, fp32).
IS_RATIO_AGREES = (0.9, 1.1)


def failed_checks(run: Run, result: dict) -> list[str]:
    """What the run's CHECKS found wrong in a result that trained, one sentence each."""
    warnings = result.get("watchdog_warnings") or []
    found = [f"the watchdog warned on a run expected to learn: {warning[:200]}" for warning in warnings]
    named = result.get("objective_warnings") or []
    if "objective-named" not in run.checks:  # a false "the objective changed" on a run that trains right is harm
        found += [f"grpo_compat warned that the objective changed on a run expected not to: {w[:200]}" for w in named]
    elif result.get("mode") == "plain" or not named:
        found.append(
            f"the run's settings change its objective and nothing named it ({', '.join(run.settings)}): trains "
            "silently" + (f"; grpo_compat said: {named[0][:200]}" if named else "")
        )
    if "learns" in run.checks and not result.get("all_trainable_params_changed"):
        unchanged = result.get("unchanged_params") or []
        found.append(f"{len(unchanged)} trainable parameters did not change: {', '.join(unchanged)[:120]}")
    if "learns" in run.checks and result.get("reward_std") == 0:
        found.append("no group had any reward spread (reward_std 0): every advantage is 0, nothing to learn from")
    if "adapter-learns" in run.checks and result.get("adapter_file_identical") is not False:
        found.append(
            "the adapter saved after training is the one it continued from, byte for byte"
            if result.get("adapter_file_identical")
            else "the run saved no adapter to compare with the one it continued from"
        )
    ranks = result.get("changed_on_ranks") or []
    if "ranks" in run.checks and (len(ranks) < 2 or not all(ranks)):
        found.append(f"weights did not change on every rank: changed_on_ranks {ranks}")
    kl = result.get("kl_per_step") or []
    if "kl" in run.checks and (len(kl) < 2 or not all(value is not None and value > 0 for value in kl[1:])):
        found.append(f"KL is not above 0 after the first update: kl per step {kl}")
    if "multi-turn" in run.checks and not (result.get("environment_resets") and result.get("tools")):
        found.append(
            f"the run did not go through trl's environment path: {result.get('environment_resets')} environment "
            f"resets, tools {result.get('tools')}"
        )
    elif "multi-turn" in run.checks and not set(result["tools"]) & ENVIRONMENT_METHODS:
        found.append(f"no method of an environment became a tool: tools {', '.join(result['tools'])}")
    if {"resumed", "resumed-steps"} & set(run.checks):
        found += _resumed_steps_wrong(run, result)
    if "resumed" in run.checks:
        resumed, uninterrupted = result.get("weights_sha256"), result.get("uninterrupted_weights_sha256")
        if not resumed or resumed != uninterrupted:
            found.append(f"resumed weights {str(resumed)[:12]} differ from the uninterrupted run's {uninterrupted}")
    is_ratios = result.get("is_ratio_per_step") or []
    if "is-ratio" in run.checks and not (is_ratios and IS_RATIO_AGREES[0] <= mean(is_ratios) <= IS_RATIO_AGREES[1]):
        found.append(
            f"vLLM importance-sampling ratio averaged {mean(is_ratios) if is_ratios else 'nothing'} over the run's "
            f"steps, not within {IS_RATIO_AGREES} (vLLM and the trainer score the same weights): {is_ratios}"
        )
    syncs = result.get("engine_checks") or []
    if "engine" in run.checks and not (syncs and all(not s["differing"] and s["gemm_layers_compared"] for s in syncs)):
        stale = [f"sync {i}: {', '.join(s['differing'][:4])}" for i, s in enumerate(syncs) if s["differing"]]
        found.append(
            f"the vLLM engine does not compute with the policy's weights after every sync ({len(syncs)} syncs checked"
            f"{'; ' + '; '.join(stale) if stale else ''})"[:400]
        )
    engine = result.get("engine_gradient_accumulation_steps"), result.get("engine_optimizer_steps")
    trainer = result.get("trainer_gradient_accumulation_steps"), result.get("steps")
    if "accumulation" in run.checks and engine != trainer:
        found.append(
            f"DeepSpeed took {engine[1]} optimizer steps for {trainer[1]} trainer steps "
            f"(gradient_accumulation_steps: DeepSpeed {engine[0]}, trainer {trainer[0]})"
        )
    return found


def _flag(run: Run, name: str, default: int) -> int:
    """An integer flag of the run's smoke command line (--steps, --resume-from-step), or its default."""
    return int(run.flags[run.flags.index(name) + 1]) if name in run.flags else default


def _resumed_steps_wrong(run: Run, result: dict) -> list[str]:
    """A resumed run must end at the steps asked for, having run those after its checkpoint itself."""
    asked, at = _flag(run, "--steps", STEPS), _flag(run, "--resume-from-step", RESUMED_AT)
    steps, ran = result.get("steps"), result.get("resumed_steps_run")
    if (steps, ran) == (asked, asked - at):
        return []
    return [f"the resumed trainer ran {ran} steps to step {steps}, not {asked - at} from checkpoint-{at} to {asked}"]


def checked(run: Run, result: dict) -> str:
    """The numbers a passing run's ranks / kl / accumulation checks looked at, for the report."""
    shown = []
    if "ranks" in run.checks:
        shown.append(f"changed on ranks {result.get('changed_on_ranks')}")
    if "kl" in run.checks:
        shown.append(f"kl per step [{', '.join(f'{value:.2g}' for value in result.get('kl_per_step') or [])}]")
    if "resumed" in run.checks:
        shown.append(
            f"resumed after {RESUMED_AT} steps for {result.get('resumed_steps_run')} more: weights "
            f"{str(result.get('weights_sha256'))[:12]}, the uninterrupted run's"
        )
    if "resumed-steps" in run.checks:
        at = _flag(run, "--resume-from-step", RESUMED_AT)
        ran, steps = result.get("resumed_steps_run"), result.get("steps")
        shown.append(f"resumed from checkpoint-{at} for {ran} steps to step {steps}")
    if "multi-turn" in run.checks:
        shown.append(
            f"{result.get('environment_resets')} environment resets, tools {', '.join(result.get('tools') or [])}"
        )
    if "engine" in run.checks:
        syncs = result.get("engine_checks") or []
        largest = max((s["largest_difference"] for s in syncs), default=None)
        shown.append(
            f"after each of {len(syncs)} syncs the engine's {syncs[0]['gemm_layers_compared'] if syncs else 0} GEMM "
            f"layers ({syncs[0]['packed_away'] if syncs else 0} weights packed away) compute with the policy's "
            f"weights, largest difference {largest}"
        )
    if "accumulation" in run.checks:
        shown.append(
            f"DeepSpeed {result.get('engine_optimizer_steps')} optimizer steps x "
            f"{result.get('engine_gradient_accumulation_steps')} accumulation = trainer {result.get('steps')} x "
            f"{result.get('trainer_gradient_accumulation_steps')}"
        )
    return "; ".join(shown)
