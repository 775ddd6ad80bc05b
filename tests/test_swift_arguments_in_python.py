"""swift.arguments-not-taken on `RLHFArguments(...)` built in Python (`rlhf_main(args)` scripts), in the ms-swift cells.

Upstream's dataclass __init__ refuses a keyword it lacks with a bare TypeError, before anything loads; patched, the
same keywords, and only those, are refused naming the release and the replacement. The matrix's reproducers
(swift-renamed-argument-python, swift-misspelt-argument-python) run the same through the smoke script.
"""

from __future__ import annotations

import pytest

from tests.helpers import cell_python, run_python, smoke

REFUSALS_AND_EVERY_FIELD = """
    import dataclasses
    import grpo_compat
    from grpo_compat.core.errors import SettingNotTakenError
    from grpo_compat.settings import drift

    grpo_compat.apply()
    try:
        from swift.llm import RLHFArguments  # 3.x
    except ImportError:
        from swift import RLHFArguments  # 4.x
    assert grpo_compat.report().status_of("swift.arguments-not-taken").value == "applied"
    print("wrapped:", RLHFArguments.__init__.__grpo_compat_patch__)
    # Every keyword upstream's __init__ takes (its own fields, and those inherited from transformers) passes.
    taken = [f.name for f in dataclasses.fields(RLHFArguments) if f.init]
    for name in taken:
        drift.refuse_keywords("RLHFArguments", "ms-swift", RLHFArguments, {name: None})
    print("fields passed:", len(taken), "learning_rate" in taken and "per_device_train_batch_size" in taken)
    for keyword in KEYWORDS:
        try:
            RLHFArguments(rlhf_type="grpo", **{keyword: 1})
        except SettingNotTakenError as error:
            print("patched:", error)
        grpo_compat.revert()
        try:
            RLHFArguments(rlhf_type="grpo", **{keyword: 1})
        except TypeError as error:
            print("plain:", type(error).__name__, error)
        grpo_compat.apply()
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    ("cell", "keywords", "named"),
    [
        ("swift-3.5", ("num_generation",), ["`num_generation` is not a setting of ms-swift 3.5.3: did you mean"]),
        (
            "swift-4.6",
            ("train_type", "eval_datasets", "num_generation"),
            [
                "`train_type` was renamed to `tuner_type` in ms-swift 4.1.0",
                "`eval_datasets` was renamed to `eval_dataset` in ms-swift 3.6.0",
                "`num_generation` is not a setting of ms-swift 4.6.0: did you mean `num_generations`?",
            ],
        ),
    ],
)
def test_rlhf_arguments_built_in_python_refuse_exactly_what_upstream_refuses_naming_the_release(cell, keywords, named):
    completed = run_python(REFUSALS_AND_EVERY_FIELD.replace("KEYWORDS", repr(keywords)), python=cell_python(cell))
    out = completed.stdout
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert "wrapped: swift.arguments-not-taken" in out and "fields passed:" in out and " True" in out
    patched = [line for line in out.splitlines() if line.startswith("patched: RLHFArguments on ms-swift")]
    plain = [line for line in out.splitlines() if "__init__() got an unexpected keyword argument" in line]
    assert len(patched) == len(plain) == len(keywords), out
    for message in named:
        assert any(message in line for line in patched), out


@pytest.mark.slow
@pytest.mark.cells("swift-4.6")
def test_a_patched_run_with_arguments_built_in_python_trains_to_the_same_weights(model_dir, tmp_path):
    flags = ("--arguments-in-python",)
    plain = smoke("swift-4.6", "plain", model_dir, tmp_path, script="smoke_swift.py", flags=flags)
    patched = smoke("swift-4.6", "patched", model_dir, tmp_path, script="smoke_swift.py", flags=flags)
    assert plain["status"] == patched["status"] == "ok", (plain["error"], patched["error"])
    assert plain["steps"] == patched["steps"] == 3
    assert plain["weights_sha256"] == patched["weights_sha256"]
