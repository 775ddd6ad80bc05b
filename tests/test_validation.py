"""The GRPO settings validator: never crashes, every fix it proposes passes, and on the newest TRL it
accepts exactly what upstream's real GRPOConfig accepts, except where upstream is wrong (listed)."""

from __future__ import annotations

from dataclasses import replace
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grpo_compat.core.versions import installed_version
from grpo_compat.fixes.validation import GRPOSettings, describe, rules_for, validate

VERSIONS = [
    ("0.14.0", None),
    ("0.16.1", None),
    ("0.17.0", None),
    ("0.19.1", None),
    ("0.20.0", None),
    ("0.24.0", None),
    ("0.29.1", None),
    ("1.16.0", None),
    ("0.19.0", "3.5.3"),
    ("0.24.0", "3.12.6"),
    ("0.29.1", "4.6.0"),
    ("0.16.1", "3.4.1"),
]
anything = st.one_of(st.integers(-3, 40), st.none(), st.text(max_size=3), st.floats(allow_nan=True), st.booleans())
size = st.integers(1, 12)
maybe = st.one_of(st.none(), st.integers(1, 24))


@settings(max_examples=300, deadline=None)
@given(
    values=st.fixed_dictionaries(
        {
            name: anything
            for name in (
                "num_generations",
                "per_device_train_batch_size",
                "gradient_accumulation_steps",
                "world_size",
                "generation_batch_size",
                "steps_per_generation",
                "per_device_eval_batch_size",
                "num_generations_eval",
                "max_completion_length",
                "max_length",
                "sequence_parallel_size",
                "deepspeed_stage",
            )
        }
    ),
    eval_enabled=st.booleans(),
    version=st.sampled_from(VERSIONS),
)
def test_validator_never_raises_and_names_what_is_wrong(values, eval_enabled, version):
    findings = validate(GRPOSettings(**values, eval_enabled=eval_enabled), rules_for(*version))
    assert all(finding.message for finding in findings)
    describe(findings)


@settings(max_examples=300, deadline=None)
@given(
    ng=st.integers(-1, 9),
    pdbs=st.integers(-1, 9),
    ga=size,
    ws=st.integers(1, 4),
    gbs=maybe,
    spg=maybe,
    eval_enabled=st.booleans(),
    pdebs=size,
    nge=st.one_of(st.none(), st.integers(1, 4)),
    sp=st.integers(1, 3),
    version=st.sampled_from(VERSIONS),
)
def test_every_error_offers_a_fix_and_every_fix_passes(
    ng, pdbs, ga, ws, gbs, spg, eval_enabled, pdebs, nge, sp, version
):
    rules = rules_for(*version)
    current = GRPOSettings(ng, pdbs, ga, ws, gbs, spg, eval_enabled, pdebs, nge, sequence_parallel_size=sp)
    for finding in [f for f in validate(current, rules) if f.severity == "error"]:
        assert finding.suggestions, f"no fix offered for: {finding}"
        for fix in finding.suggestions:
            fixed = replace(current, **dict(fix))
            assert not [f for f in validate(fixed, rules) if f.severity == "error"], (finding, fix)


# Where the newest TRL accepts settings that cannot train, the validator refuses them on purpose.
UPSTREAM_IS_WRONG = {
    "non-positive sizes": "trl >= 0.20 accepts steps_per_generation <= 0, generation_batch_size = 0 and "
    "per_device_train_batch_size = 0 (generation batch 0 divides by anything); training then breaks in the sampler",
}


def _upstream_accepts(config_class, values: dict, world_size: int) -> bool:
    from transformers import TrainingArguments

    with mock.patch.object(TrainingArguments, "world_size", new=property(lambda self: world_size)):
        try:
            config_class(output_dir="unused", use_cpu=True, bf16=False, report_to="none", **values)
        except (ValueError, ZeroDivisionError, TypeError):
            return False
    return True


@pytest.fixture(scope="module")
def upstream_config():
    import grpo_compat

    grpo_compat.revert()  # compare with upstream as it is
    from trl import GRPOConfig

    return GRPOConfig


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    ng=st.integers(0, 9),
    pdbs=st.integers(0, 9),
    ga=st.integers(1, 4),
    ws=st.integers(1, 4),
    gbs=st.one_of(st.none(), st.integers(0, 24)),
    spg=st.one_of(st.none(), st.integers(-1, 4)),
    eval_enabled=st.booleans(),
    pdebs=st.integers(1, 9),
    nge=st.one_of(st.none(), st.integers(1, 4)),
)
def test_newest_trl_accepts_exactly_what_upstream_grpo_config_accepts(
    upstream_config, ng, pdbs, ga, ws, gbs, spg, eval_enabled, pdebs, nge
):
    values = {
        "num_generations": ng,
        "per_device_train_batch_size": pdbs,
        "gradient_accumulation_steps": ga,
        "generation_batch_size": gbs,
        "steps_per_generation": spg,
        "per_device_eval_batch_size": pdebs,
        "num_generations_eval": nge,
        "eval_strategy": "steps" if eval_enabled else "no",
    }
    ours = GRPOSettings(ng, pdbs, ga, ws, gbs, spg, eval_enabled, pdebs, nge)
    we_accept = not [f for f in validate(ours, rules_for(installed_version("trl"))) if f.severity == "error"]
    upstream = _upstream_accepts(upstream_config, values, ws)
    if upstream and not we_accept and (pdbs == 0 or gbs == 0 or (spg is not None and spg <= 0)):
        return  # UPSTREAM_IS_WRONG["non-positive sizes"]
    assert we_accept == upstream, (values, ws, describe(validate(ours, rules_for(installed_version("trl")))))


@pytest.mark.parametrize(
    ("version", "settings", "accepted"),
    [
        # trl 0.15-0.16 count per-device batch x processes only: gradient accumulation does not help.
        ("0.16.1", GRPOSettings(8, 1, 8), False),
        ("0.17.0", GRPOSettings(8, 1, 8), True),
        ("1.16.0", GRPOSettings(8, 1, 8), True),
        # trl 0.14 counts prompts, not completions: no batch rule, but a group of one still trains nothing.
        ("0.14.0", GRPOSettings(3, 1, 1), True),
        ("0.14.0", GRPOSettings(1, 4, 1), False),
        # eval: 0.26.1+ use num_generations_eval, earlier versions num_generations.
        (
            "0.24.0",
            GRPOSettings(2, 2, 1, eval_enabled=True, per_device_eval_batch_size=1, num_generations_eval=1),
            False,
        ),
        (
            "0.29.1",
            GRPOSettings(2, 2, 1, eval_enabled=True, per_device_eval_batch_size=1, num_generations_eval=1),
            True,
        ),
        # both generation fields: refused by trl, allowed by ms-swift 4 when they agree.
        ("1.16.0", GRPOSettings(4, 2, 1, generation_batch_size=8, steps_per_generation=4), False),
    ],
)
def test_each_versions_rule(version, settings, accepted):
    errors = [f for f in validate(settings, rules_for(version)) if f.severity == "error"]
    assert (not errors) is accepted, describe(errors)


def test_ms_swift_rules():
    agree = GRPOSettings(4, 2, 1, generation_batch_size=8, steps_per_generation=4)
    assert not validate(agree, rules_for("0.29.1", "4.6.0"))
    assert validate(replace(agree, generation_batch_size=6), rules_for("0.29.1", "4.6.0"))
    teacher = GRPOSettings(1, 4, 1, has_teacher=True)
    assert not validate(teacher, rules_for("0.29.1", "4.6.0"))
    assert validate(teacher, rules_for("0.24.0", "3.12.6"))
    sp = [f.message for f in validate(GRPOSettings(4, 4, 1, sequence_parallel_size=2), rules_for("0.16.1", "3.4.1"))]
    assert sp == [
        "GRPO with sequence_parallel_size=2 does not work on ms-swift 3.4.1 (trl 0.16.1): it needs "
        "ms-swift 3.5 or newer: upgrade, or train without it."
    ]
    assert not validate(GRPOSettings(4, 4, 1, sequence_parallel_size=2), rules_for("0.19.0", "3.5.3"))


def test_the_kf2_message_names_rule_numbers_and_a_fix():
    message = describe(validate(GRPOSettings(num_generations=4, per_device_train_batch_size=1), rules_for("0.16.1")))
    assert message == (
        "every prompt's 4 completions must land in the same generation batch, but per_device_train_batch_size 1 x 1 "
        "process(es) = 1 completions is not a multiple of num_generations 4 (trl 0.16.1). Set "
        "per_device_train_batch_size=4 (--per_device_train_batch_size 4)."
    )
    newest = describe(validate(GRPOSettings(num_generations=4, per_device_train_batch_size=1), rules_for("1.16.0")))
    assert newest.endswith(
        "Set per_device_train_batch_size=4 (--per_device_train_batch_size 4); or "
        "gradient_accumulation_steps=4 (--gradient_accumulation_steps 4)."
    )
