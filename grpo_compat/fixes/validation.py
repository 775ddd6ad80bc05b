"""GRPO settings checks that need no torch and no model: one message per broken rule, with a fix.

``validate(settings, rules)`` is a pure function. ``rules_for(trl, swift)`` encodes how each
upstream version checks batch settings (read from the sources of every release; see
``docs/known_failures.md`` KF-2):

- trl 0.14: no batch check (``per_device_train_batch_size`` counts prompts);
- trl 0.15-0.16: completions per step = per-device batch x processes, must divide by num_generations;
- trl 0.17: x gradient accumulation;
- trl 0.18+ and ms-swift 3.x: ``generation_batch_size`` / ``steps_per_generation``, resolved in
  GRPOConfig; ms-swift 4.x has its own copy (both may be set if they agree).

Where upstream is wrong the validator is stricter, on purpose: num_generations < 2 (a group of one
has zero advantage), non-positive sizes (accepted by trl >= 0.20, then break the sampler), the
0.18.0-0.19.0 precedence bug (accepts a generation batch that is not a multiple of the global
batch), no eval check on 0.20-0.21. Every error names the rule, the numbers, and settings that
pass this validator.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, fields, replace

from grpo_compat.core.versions import release

Value = object  # settings arrive from YAML, CLI strings, dataclasses: anything


@dataclass(frozen=True)
class GRPOSettings:
    """The settings that decide whether a GRPO run can train (TRL field names)."""

    num_generations: Value = 8
    per_device_train_batch_size: Value = 8
    gradient_accumulation_steps: Value = 1
    world_size: Value = 1
    generation_batch_size: Value = None
    steps_per_generation: Value = None
    eval_enabled: bool = False
    per_device_eval_batch_size: Value = 8
    num_generations_eval: Value = None
    max_prompt_length: Value = None
    max_completion_length: Value = None
    max_length: Value = None  # the model's context, or ms-swift's --max_length
    sequence_parallel_size: Value = 1
    deepspeed_stage: Value = None
    has_teacher: bool = False  # ms-swift 4.x on-policy distillation allows num_generations=1
    has_rewards: bool = True  # a reward function or model (ms-swift: or a vLLM server's gym environment) scores


@dataclass(frozen=True)
class Rules:
    """How one upstream version checks GRPO batch settings."""

    name: str
    train: str = "generation-batch"  # none | processes | accumulation | generation-batch
    eval: str = "modulo-eval-count"  # possible-values | modulo | modulo-eval-count
    both_generation_fields: str = "refused"  # refused | must-agree
    single_generation_with_teacher: bool = False
    sequence_parallel_from: str | None = None  # the first version that supports it, when this one does not
    # ms-swift: the first version that trains GRPO with a teacher and no reward (on-policy distillation), when this
    # one does not
    distillation_without_rewards_from: str | None = None


@dataclass(frozen=True)
class Finding:
    rule: str
    severity: str  # error | warning
    message: str
    suggestions: tuple[tuple[tuple[str, object], ...], ...] = ()

    def __str__(self) -> str:
        return f"[{self.rule}] {self.message}"


def rules_for(trl: str | None, swift: str | None = None) -> Rules:
    """The rules of an installed trl (and ms-swift, whose GRPO arguments decide under swift)."""
    if swift:
        # --teacher_model came with GKD in 3.6.0: before, swift's own parser refuses it (arguments-not-taken names it)
        distillation_from = "ms-swift 4.4" if (3, 6) <= release(swift) < (4, 4) else None
        if release(swift) >= (4,):
            return Rules(
                f"ms-swift {swift}",
                both_generation_fields="must-agree",
                single_generation_with_teacher=True,
                distillation_without_rewards_from=distillation_from,
            )
        base = rules_for(trl) if trl else Rules("trl")
        sp_from = "ms-swift 3.5" if release(swift) < (3, 5) else None
        return replace(
            base,
            name=f"ms-swift {swift} ({base.name})",
            sequence_parallel_from=sp_from,
            distillation_without_rewards_from=distillation_from,
        )
    version = release(trl or "999")
    name = f"trl {trl}" if trl else "trl (newest rules)"
    if version < (0, 15):
        return Rules(name, train="none", eval="possible-values")
    if version < (0, 17):
        return Rules(name, train="processes", eval="possible-values")
    if version < (0, 18):
        return Rules(name, train="accumulation", eval="possible-values")
    if version < (0, 20):
        return Rules(name, eval="possible-values")
    if version < (0, 26, 1):
        return Rules(name, eval="modulo")  # 0.20-0.21 check no eval batch at all: we still do
    return Rules(name)


def _positive_int(value: Value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _describe_fix(fix: tuple[tuple[str, object], ...]) -> str:
    """``num_generations=2, per_device_train_batch_size=2 (--num_generations 2 --per_device_train_batch_size 2)``."""
    values = ", ".join(f"{k}={v}" if v is not None else f"no {k}" for k, v in fix)
    flags = " ".join(f"--{k} {v}" for k, v in fix if v is not None)
    return f"{values} ({flags})" if flags else values


_SIZES = (
    "num_generations",
    "per_device_train_batch_size",
    "gradient_accumulation_steps",
    "world_size",
    "per_device_eval_batch_size",
)
_OPTIONAL_SIZES = (
    "generation_batch_size",
    "steps_per_generation",
    "num_generations_eval",
    "max_prompt_length",
    "max_completion_length",
    "max_length",
    "sequence_parallel_size",
)


def _value_findings(s: GRPOSettings) -> list[Finding]:
    bad = [n for n in _SIZES if not _positive_int(getattr(s, n))]
    bad += [n for n in _OPTIONAL_SIZES if getattr(s, n) is not None and not _positive_int(getattr(s, n))]
    findings = [
        Finding("invalid-value", "error", f"{n} must be a positive integer, got {getattr(s, n)!r}.") for n in bad
    ]
    if s.deepspeed_stage is not None and s.deepspeed_stage not in (0, 1, 2, 3):
        findings.append(Finding("invalid-value", "error", f"deepspeed_stage must be 0-3, got {s.deepspeed_stage!r}."))
    return findings


def generation_batch(s: GRPOSettings, rules: Rules) -> tuple[int, str, Finding | None]:
    """Completions generated per optimizer cycle, how it is counted, and a finding on its own rule."""
    per_step = s.per_device_train_batch_size * s.world_size
    counted = f"per_device_train_batch_size {s.per_device_train_batch_size} x {s.world_size} process(es)"
    if rules.train == "processes":
        return per_step, counted, None
    if rules.train == "accumulation":
        return (
            per_step * s.gradient_accumulation_steps,
            f"{counted} x gradient_accumulation_steps {s.gradient_accumulation_steps}",
            None,
        )
    gbs, spg = s.generation_batch_size, s.steps_per_generation
    if gbs is not None and spg is not None:
        if rules.both_generation_fields == "refused" or gbs != per_step * spg:
            why = (
                "cannot both be set"
                if rules.both_generation_fields == "refused"
                else f"disagree: {per_step} x {spg} != {gbs}"
            )
            return (
                gbs,
                "generation_batch_size",
                Finding(
                    "generation-batch-fields",
                    "error",
                    f"generation_batch_size and steps_per_generation {why} ({rules.name}).",
                ),
            )
        return gbs, f"generation_batch_size {gbs}", None
    if gbs is not None:
        if gbs % per_step:
            return (
                gbs,
                "generation_batch_size",
                Finding(
                    "generation-batch-divisibility",
                    "error",
                    f"generation_batch_size {gbs} must be a multiple of the global batch ({counted} = {per_step}).",
                ),
            )
        return gbs, f"generation_batch_size {gbs}", None
    spg = s.gradient_accumulation_steps if spg is None else spg
    name = "steps_per_generation" if s.steps_per_generation is not None else "gradient_accumulation_steps"
    return per_step * spg, f"{counted} x {name} {spg}", None


def _group_findings(s: GRPOSettings, rules: Rules) -> list[Finding]:
    ng = s.num_generations
    if ng < 2 and not (ng == 1 and s.has_teacher and rules.single_generation_with_teacher):
        return [
            Finding(
                "min-generations",
                "error",
                f"GRPO needs at least 2 completions per prompt, got num_generations={ng}. A completion's advantage "
                "is its reward minus the mean reward of its group, so in a group of one every advantage is 0 and "
                "nothing trains. per_device_train_batch_size counts completions, not prompts.",
            )
        ]
    findings = []
    batch, counted, own = generation_batch(s, rules)
    if own is not None:
        findings.append(own)
    elif rules.train != "none" and batch % ng:
        findings.append(
            Finding(
                "train-divisibility",
                "error",
                f"every prompt's {ng} completions must land in the same generation batch, but {counted} = {batch} "
                f"completions is not a multiple of num_generations {ng} ({rules.name}).",
            )
        )
    if s.eval_enabled:
        eval_ng = _eval_generations(s, rules)
        eval_batch = s.per_device_eval_batch_size * s.world_size
        if eval_batch % eval_ng:
            findings.append(
                Finding(
                    "eval-divisibility",
                    "error",
                    f"the eval batch (per_device_eval_batch_size {s.per_device_eval_batch_size} x {s.world_size} "
                    f"process(es) = {eval_batch}) must be a multiple of the generations per eval prompt ({eval_ng}).",
                )
            )
    return findings


def _eval_generations(s: GRPOSettings, rules: Rules) -> int:
    """Completions per eval prompt as the rules count them: num_generations_eval only from trl 0.26.1."""
    return (s.num_generations_eval or s.num_generations) if rules.eval == "modulo-eval-count" else s.num_generations


def _length_findings(s: GRPOSettings) -> list[Finding]:
    if s.max_length is None or s.max_completion_length is None:
        return []
    if s.max_completion_length >= s.max_length:
        return [
            Finding(
                "completion-length",
                "error",
                f"max_completion_length {s.max_completion_length} leaves no room for the prompt in "
                f"max_length {s.max_length}.",
            )
        ]
    if s.max_prompt_length is not None and s.max_prompt_length + s.max_completion_length > s.max_length:
        return [
            Finding(
                "prompt-length",
                "warning",
                f"max_prompt_length {s.max_prompt_length} + max_completion_length {s.max_completion_length} "
                f"exceeds max_length {s.max_length}: long prompts will be cut.",
            )
        ]
    return []


def _parallel_findings(s: GRPOSettings, rules: Rules) -> list[Finding]:
    if s.sequence_parallel_size not in (None, 1) and rules.sequence_parallel_from:
        return [
            Finding(
                "sequence-parallel",
                "error",
                f"GRPO with sequence_parallel_size={s.sequence_parallel_size} does not work on {rules.name}: "
                f"it needs {rules.sequence_parallel_from} or newer: upgrade, or train without it.",
            )
        ]
    return []


def _reward_findings(s: GRPOSettings, rules: Rules) -> list[Finding]:
    """What no batch setting repairs: a teacher without rewards before on-policy distillation (ms-swift #9928)."""
    if not s.has_teacher or s.has_rewards or not rules.distillation_without_rewards_from:
        return []
    needed = rules.distillation_without_rewards_from
    return [
        Finding(
            "teacher-without-rewards",
            "error",
            f"GRPO with teacher_model and no reward function cannot train on {rules.name}: on-policy distillation "
            f"(the teacher's log-probs as the only signal) came in {needed}; before it GRPO ignores the teacher and "
            "refuses the run for want of a reward after the models loaded ('You must specify reward_funcs or "
            f'reward_model\'). Upgrade (pip install "{needed.replace(" ", ">=")}"), or give --reward_funcs (or '
            "--reward_model; the teacher is then not used), or use --rlhf_type gkd for distillation.",
        )
    ]


def _raw_findings(s: GRPOSettings, rules: Rules) -> list[Finding]:
    invalid = _value_findings(s)
    if invalid:
        return invalid
    return _group_findings(s, rules) + _length_findings(s) + _parallel_findings(s, rules)


def _sanitized(s: GRPOSettings) -> dict[str, Value]:
    """Invalid values made valid (``"4"`` -> 4, others -> defaults): where a repair search starts."""
    defaults = GRPOSettings()
    changes: dict[str, Value] = {}
    for name in (*_SIZES, *_OPTIONAL_SIZES):
        value = getattr(s, name)
        if _positive_int(value) or (value is None and name in _OPTIONAL_SIZES):
            continue
        numeric = isinstance(value, str) and re.fullmatch(r" *[0-9]+ *", value) is not None and int(value) > 0
        changes[name] = int(value) if numeric else getattr(defaults, name)
    if s.deepspeed_stage not in (None, 0, 1, 2, 3):
        changes["deepspeed_stage"] = None
    return changes


def _repair_families(s: GRPOSettings, rules: Rules) -> list[list[dict[str, Value]]]:
    """Alternative ways to repair the settings, smallest change first within each family."""
    ng = max(2, s.num_generations)
    base: dict[str, Value] = {"num_generations": ng} if ng != s.num_generations else {}
    if s.sequence_parallel_size not in (None, 1) and rules.sequence_parallel_from:
        base["sequence_parallel_size"] = 1
    if s.max_length is not None and s.max_completion_length is not None and s.max_completion_length >= s.max_length:
        base["max_completion_length"] = s.max_length // 2
    if s.generation_batch_size is not None and s.steps_per_generation is not None:
        base["steps_per_generation"] = None  # keep the user's generation_batch_size, derive the steps
    pdbs, ga = s.per_device_train_batch_size, s.gradient_accumulation_steps
    families = [[{**base, "per_device_train_batch_size": p} for p in range(pdbs, pdbs + 2 * ng + 1)]]
    if rules.train not in ("processes", "none"):
        families.append([{**base, "gradient_accumulation_steps": g} for g in range(ga + 1, ga + ng + 1)])
    if s.generation_batch_size is not None:
        step = math.lcm(pdbs * s.world_size, ng)
        families.append([{**base, "generation_batch_size": math.ceil(s.generation_batch_size / step) * step}])
    families.append([{**base, "num_generations": d} for d in range(ng - 1, 1, -1)])
    return [[dict(base)], *families]


def _with_eval_repaired(s: GRPOSettings, rules: Rules, changes: dict[str, Value]) -> dict[str, Value] | None:
    """``changes``, plus the smallest eval batch that makes them pass; None when nothing does."""
    candidate = replace(s, **changes)
    eval_ng = _eval_generations(candidate, rules)
    eval_fix = {"per_device_eval_batch_size": eval_ng // math.gcd(eval_ng, candidate.world_size)}
    for extra in ({}, eval_fix):
        if not [f for f in _raw_findings(replace(candidate, **extra), rules) if f.severity == "error"]:
            return {**changes, **extra}
    return None


def _suggest(s: GRPOSettings, rules: Rules, limit: int = 2) -> tuple[tuple[tuple[str, object], ...], ...]:
    """Up to ``limit`` alternative settings, each one passing the validator (checked here)."""
    original, start = s, _sanitized(s)
    s = replace(s, **start)
    found: list[tuple[tuple[str, object], ...]] = []
    families = _repair_families(s, rules)
    for family in families:
        for changes in family:
            repaired = _with_eval_repaired(s, rules, {**start, **changes})
            if repaired:
                fix = tuple(sorted((k, v) for k, v in repaired.items() if getattr(original, k) != v))
                if fix not in found:
                    found.append(fix)
                break
        if found and family is families[0]:
            break  # the required changes alone already pass: no alternatives to offer
        if len(found) == limit:
            break
    return tuple(found)


def validate(settings: GRPOSettings, rules: Rules | None = None) -> list[Finding]:
    """Every broken rule, each error with settings that pass (never raises on odd input)."""
    rules = rules or rules_for(None)
    findings = _raw_findings(settings, rules)
    if [f for f in findings if f.severity == "error"]:
        fixes = _suggest(settings, rules)
        findings = [replace(f, suggestions=fixes) if f.severity == "error" else f for f in findings]
    return findings + _reward_findings(settings, rules)  # its message names its fix: no batch setting repairs it


def describe(findings: list[Finding]) -> str:
    """One message for all findings: what is wrong, then what to set."""
    lines = []
    for finding in findings:
        line = finding.message
        fixes = [_describe_fix(fix) for fix in finding.suggestions]
        if fixes:
            line += " Set " + "; or ".join(fixes) + "."
        lines.append(line)
    return "\n".join(lines)


def field_getter(source: object) -> Callable[..., object]:
    """Read fields alike from a mapping (a config file, parsed arguments) or an object (a config)."""
    return source.get if isinstance(source, dict) else lambda name, default=None: getattr(source, name, default)


def settings_from(source: object, **overrides: Value) -> GRPOSettings:
    """GRPOSettings from any object or mapping with TRL field names (missing fields keep defaults)."""
    get = field_getter(source)
    values = {f.name: get(f.name, f.default) for f in fields(GRPOSettings)}
    return GRPOSettings(**{**values, **overrides})


def launched_world_size() -> int:
    """Processes of this launch as torchrun / accelerate / deepspeed announce them; 1 for plain python."""
    value = os.environ.get("WORLD_SIZE", "1")
    return int(value) if value.isdecimal() and int(value) > 0 else 1


def eval_is_enabled(strategy: object) -> bool:
    """``eval_strategy`` as a string or transformers' IntervalStrategy: anything but "no" evaluates."""
    return str(getattr(strategy, "value", strategy) or "no").lower() != "no"


def refuse_unless_valid(settings: GRPOSettings, rules: Rules) -> None:
    """Raise GRPOSettingsError naming every broken rule and a fix; log warnings (rank 0)."""
    from grpo_compat.core.errors import GRPOSettingsError
    from grpo_compat.core.logs import log

    findings = validate(settings, rules)
    errors = [f for f in findings if f.severity == "error"]
    warnings = [f for f in findings if f.severity == "warning"]
    if warnings:
        log("warning", "%s", describe(warnings))
    if errors:
        raise GRPOSettingsError(describe(errors))
