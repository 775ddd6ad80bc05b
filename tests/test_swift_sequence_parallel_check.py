"""GRPO with sequence parallel on ms-swift < 3.5 is refused by swift.grpo-arguments-check, naming 3.5.

On ms-swift 3.x trl.grpo-config-check validates trl's GRPOConfig, which has no sequence_parallel_size:
the size lives in swift's RLHFArguments only, so swift.grpo-arguments-check reads it there. No cell has
ms-swift < 3.5: the rule and the 3.x reading are tested here, the real 3.x argument path in the swift-3.5
cell (accepted there, where the patch stands back; refused when the installed version reads as 3.4.1).
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from grpo_compat.core.errors import GRPOSettingsError
from grpo_compat.fixes.swift_settings import swift_settings_to_check
from grpo_compat.fixes.validation import GRPOSettings, refuse_unless_valid, rules_for, validate
from tests.helpers import cell_python, run_python


@pytest.mark.parametrize(("trl", "swift"), [("0.16.1", "3.2.0"), ("0.17.0", "3.4.1")])
def test_grpo_sequence_parallel_before_ms_swift_3_5_is_an_error_naming_3_5(trl, swift):
    findings = validate(GRPOSettings(sequence_parallel_size=2), rules_for(trl, swift))
    assert [f.rule for f in findings] == ["sequence-parallel"]
    assert f"does not work on ms-swift {swift}" in findings[0].message
    assert "needs ms-swift 3.5 or newer" in findings[0].message
    assert (("sequence_parallel_size", 1),) in findings[0].suggestions


@pytest.mark.parametrize(("trl", "swift"), [("0.19.0", "3.5.3"), ("0.24.0", "3.12.6"), ("0.29.1", "4.6.0")])
def test_grpo_sequence_parallel_from_ms_swift_3_5_is_accepted(trl, swift):
    assert validate(GRPOSettings(sequence_parallel_size=2), rules_for(trl, swift)) == []


def test_on_ms_swift_3_the_check_reads_sequence_parallel_size_from_swifts_arguments():
    # The batch settings are left to trl's GRPOConfig (checked there with resolved values): only the size counts.
    arguments = SimpleNamespace(rlhf_type="grpo", sequence_parallel_size=4, num_generations=1)
    settings = swift_settings_to_check(arguments, "3.4.1")
    assert settings == GRPOSettings(sequence_parallel_size=4, has_rewards=False)
    with pytest.raises(GRPOSettingsError, match=r"sequence_parallel_size=4 .*ms-swift 3\.5 or newer"):
        refuse_unless_valid(settings, rules_for("0.17.0", "3.4.1"))


REAL_ARGUMENTS = """
import grpo_compat, grpo_compat.core.versions as versions
real = versions.installed_version
versions.installed_version = lambda name: {swift!r} if name == "ms-swift" else real(name)
grpo_compat.apply()
from swift.llm import RLHFArguments
try:
    RLHFArguments(rlhf_type="grpo", sequence_parallel_size=2)
except Exception as error:
    print(type(error).__name__ + ": " + (str(error).splitlines() or [""])[0])
print(grpo_compat.report().status_of("swift.grpo-arguments-check").value)
"""


@pytest.mark.slow
@pytest.mark.parametrize("swift", ["3.5.3", "3.4.1"])
@pytest.mark.cells("swift-3.5")
def test_real_ms_swift_3_arguments_reach_the_check_before_the_model(swift):
    # ms-swift 3.5.3 installed; "3.4.1" makes the check read the version a < 3.5 install would report.
    python = cell_python("swift-3.5")
    env = {"MODELSCOPE_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "CUDA_VISIBLE_DEVICES": ""}
    result = run_python(REAL_ARGUMENTS.format(swift=swift), env=env, python=python)
    lines = result.stdout.strip().splitlines()
    # 3.5 runs Ulysses GRPO and has no --teacher_model: the patch has nothing to check there.
    assert lines and lines[-1] == ("applied" if swift == "3.4.1" else "outside version window"), result.stderr[-3000:]
    if swift == "3.4.1":
        refused = "GRPOSettingsError: GRPO with sequence_parallel_size=2 does not work on ms-swift 3.4.1"
        assert lines[-2].startswith(refused)
        assert "--sequence_parallel_size 1" in lines[-2]
    else:  # accepted by grpo_compat: whatever fails next is swift's own (no model given)
        assert "GRPOSettingsError" not in result.stdout
