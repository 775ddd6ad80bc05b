"""The engine's mechanics, on a throwaway package: hooks, wrapping, revert, selection, reporting."""

from __future__ import annotations

import importlib
import json
import sys

import pytest

from grpo_compat.core.engine import Engine
from grpo_compat.core.errors import PatchFailedError, UnknownPatchError
from grpo_compat.core.registry import Declaration, Patch, Target
from grpo_compat.core.report import ONE_LINE_MARK, Status
from tests.helpers import UPSTREAM_SOURCE as SOURCE
from tests.helpers import add_one, make_patch, run_python


def test_patch_waits_for_a_module_imported_after_apply(upstream):
    module_name = upstream("impl", SOURCE)
    engine = Engine([make_patch(module_name, "double")])
    report = engine.apply()
    assert module_name not in sys.modules
    assert report.status_of("test.add-one") is Status.PENDING
    module = importlib.import_module(module_name)
    assert module.double(3) == 7
    assert engine.report().status_of("test.add-one") is Status.APPLIED
    engine.revert()


def test_patches_are_decided_before_the_code_of_the_first_target_package_runs(upstream):
    """apply() before the package loads decides the statuses when it starts loading: its own code, importing and
    calling a target, already meets the wrapper; the report apply() returned says what apply() decided."""
    impl = upstream("impl", SOURCE)
    upstream("__init__", "from .impl import double\n\nAT_IMPORT = double(3)\n")
    engine = Engine([make_patch(impl, "double")])
    report = engine.apply()
    package = importlib.import_module(upstream.package)
    assert package.AT_IMPORT == 7
    assert report.status_of("test.add-one") is Status.PENDING
    assert engine.report().status_of("test.add-one") is Status.APPLIED
    engine.revert()
    assert importlib.import_module(impl).double(3) == 6


def test_a_failure_to_decide_while_upstream_loads_never_stops_the_import(upstream):
    """A malformed window in the index (no patch module validated it) fails the decision made as the package starts
    loading: the import goes on unpatched, and the report says why."""
    impl = upstream("impl", SOURCE)
    declared = Declaration("test.add-one", "nowhere", (), ("packaging>>20",), (f"{impl}:double",), "adds one")
    engine = Engine([declared])
    engine.apply()
    assert importlib.import_module(impl).double(3) == 6
    report = engine.report()
    assert report.status_of("test.add-one") is Status.FAILED
    assert "invalid version window" in report["test.add-one"].reason
    engine.revert()


def test_patch_applies_to_a_module_imported_before_apply(upstream):
    module = importlib.import_module(upstream("impl", SOURCE))
    engine = Engine([make_patch(module.__name__, "Model.step")])
    assert engine.apply().status_of("test.add-one") is Status.APPLIED
    assert module.Model().step(3, scale=2) == 7
    engine.revert()
    assert module.Model().step(3, scale=2) == 6


def test_revert_restores_the_exact_original_objects(upstream):
    module = importlib.import_module(upstream("impl", SOURCE))
    before = {name: dict(vars(module.Model))[name] for name in ("step", "helper", "build")}
    double = module.double
    engine = Engine([make_patch(module.__name__, "double", "Model.step", "Model.helper", "Model.build", "Model.run")])
    engine.apply()
    assert (module.Model.helper(1), module.Model.build(1), module.Model().run(1)) == (2, 7, 2)
    assert module.double.__wrapped__ is double
    engine.revert()
    assert module.double is double
    for name, original in before.items():
        assert vars(module.Model)[name] is original
    # run was inherited from Base: the revert removes our attribute instead of copying Base's in.
    assert "run" not in vars(module.Model)
    assert module.Model().run(1) == 1


def test_function_imported_by_name_is_patched_in_every_module_holding_it(upstream):
    impl = upstream("impl", SOURCE)
    user = upstream("user", f"from {impl} import double\n\ndef use(x):\n    return double(x)\n")
    user_module = importlib.import_module(user)
    engine = Engine([make_patch(impl, "double")])
    engine.apply()
    assert user_module.use(3) == 7
    engine.revert()
    assert user_module.use(3) == 6


def test_second_apply_changes_nothing(upstream):
    module = importlib.import_module(upstream("impl", SOURCE))
    engine = Engine([make_patch(module.__name__, "double")])
    engine.apply()
    wrapped_once = module.double
    assert engine.apply().status_of("test.add-one") is Status.APPLIED
    assert module.double is wrapped_once
    assert module.double(3) == 7
    engine.revert()


def test_apply_revert_apply_round_trip(upstream):
    module = importlib.import_module(upstream("impl", SOURCE))
    engine = Engine([make_patch(module.__name__, "double")])
    for _ in range(2):
        engine.apply()
        assert module.double(3) == 7
        engine.revert()
        assert module.double(3) == 6


def test_changed_signature_is_skipped_and_reported(upstream):
    module = importlib.import_module(upstream("impl", SOURCE))
    original = module.Model.step
    engine = Engine([make_patch(module.__name__, "Model.step", expects=("self", "x", "logits_to_keep"))])
    report = engine.apply()
    assert report.status_of("test.add-one") is Status.TARGET_MISSING
    assert "logits_to_keep" in report["test.add-one"].reason
    assert module.Model.step is original
    with pytest.raises(PatchFailedError, match="signature"):
        Engine([make_patch(module.__name__, "Model.step", expects=("logits_to_keep",))]).apply(strict=True)


def test_targets_with_different_signatures_each_check_their_own_parameters(upstream):
    module = importlib.import_module(upstream("impl", SOURCE))

    def patch_expecting(step_parameters: tuple[str, ...]) -> Patch:
        function = Target.parse(f"{module.__name__}:double", add_one, ("x",))
        method = Target.parse(f"{module.__name__}:Model.step", add_one, step_parameters)
        return Patch("test.add-one", ("packaging>=20",), (function, method), expects=("no_target_takes_this",))

    engine = Engine([patch_expecting(("self", "x", "scale"))])
    assert engine.apply().status_of("test.add-one") is Status.APPLIED
    assert (module.double(3), module.Model().step(3)) == (7, 4)
    engine.revert()
    report = Engine([patch_expecting(("self", "logits_to_keep"))]).apply()
    assert report.status_of("test.add-one") is Status.TARGET_MISSING
    assert "logits_to_keep" in report["test.add-one"].reason and module.double(3) == 6


def test_missing_target_is_reported_unless_optional(upstream):
    module = importlib.import_module(upstream("impl", SOURCE))
    missing = Engine([make_patch(module.__name__, "Model.gone")]).apply()
    assert missing.status_of("test.add-one") is Status.TARGET_MISSING
    engine = Engine([make_patch(module.__name__, "Model.gone?", "double")])
    assert engine.apply().status_of("test.add-one") is Status.APPLIED
    engine.revert()
    absent_module = Engine([make_patch(f"{module.__name__}_nowhere", "double")]).apply()
    assert absent_module.status_of("test.add-one") is Status.TARGET_MISSING


def test_detect_saying_not_needed_leaves_upstream_alone(upstream):
    module = importlib.import_module(upstream("impl", SOURCE))
    engine = Engine([make_patch(module.__name__, "double", detect=lambda m: "fixed upstream in this version")])
    report = engine.apply()
    assert report.status_of("test.add-one") is Status.NOT_NEEDED
    assert report["test.add-one"].reason == "fixed upstream in this version"
    assert module.double(3) == 6


def test_a_crashing_patch_is_reported_and_never_breaks_the_import(upstream):
    module_name = upstream("impl", SOURCE)

    def broken_detect(module):
        raise RuntimeError("boom")

    engine = Engine([make_patch(module_name, "double", detect=broken_detect)])
    engine.apply()
    module = importlib.import_module(module_name)
    assert module.double(3) == 6
    report = engine.report()
    assert report.status_of("test.add-one") is Status.FAILED
    assert "boom" in report["test.add-one"].reason


def test_version_window_is_enforced(upstream):
    module = importlib.import_module(upstream("impl", SOURCE))
    outside = Engine([make_patch(module.__name__, "double", requires=("packaging<1",))]).apply()
    assert outside.status_of("test.add-one") is Status.OUTSIDE_WINDOW
    assert "outside packaging<1" in outside["test.add-one"].reason
    absent = Engine([make_patch(module.__name__, "double", requires=("no-such-dist>=1",))]).apply()
    assert absent.status_of("test.add-one") is Status.NOT_INSTALLED
    assert module.double(3) == 6


def test_disable_env_and_selection(upstream, monkeypatch):
    module = importlib.import_module(upstream("impl", SOURCE))
    patches = [
        make_patch(module.__name__, "double", patch_id="a"),
        make_patch(module.__name__, "Model.step", patch_id="b"),
    ]
    monkeypatch.setenv("GRPO_COMPAT_DISABLE", "a")
    engine = Engine(patches)
    report = engine.apply()
    assert (report.status_of("a"), report.status_of("b")) == (Status.DISABLED, Status.APPLIED)
    assert "GRPO_COMPAT_DISABLE" in report["a"].reason
    assert module.double(3) == 6
    engine.revert()
    monkeypatch.setenv("GRPO_COMPAT_DISABLE", "all")
    assert {p.status for p in Engine(patches).apply().patches} == {Status.DISABLED}
    monkeypatch.delenv("GRPO_COMPAT_DISABLE")
    engine = Engine(patches)
    report = engine.apply(only=["b"])
    assert (report.status_of("a"), report.status_of("b")) == (Status.DISABLED, Status.APPLIED)
    engine.revert()
    assert Engine(patches).apply(skip=["b"]).status_of("b") is Status.DISABLED


@pytest.mark.parametrize("how", ["only", "skip", "env"])
def test_unknown_patch_ids_give_an_error_listing_valid_ids(upstream, monkeypatch, how):
    patches = [make_patch(upstream("impl", SOURCE), "double", patch_id="known.patch")]
    kwargs = {how: ["nope"]} if how != "env" else {}
    if how == "env":
        monkeypatch.setenv("GRPO_COMPAT_DISABLE", "nope")
    with pytest.raises(UnknownPatchError, match=r"unknown patch id\(s\).*nope.*Valid ids: known.patch"):
        Engine(patches).apply(**kwargs)


def test_import_and_apply_load_neither_torch_nor_upstream():
    result = run_python(
        """
        import sys, grpo_compat
        report = grpo_compat.apply()
        heavy = sorted(m for m in ("torch", "trl", "transformers", "swift", "accelerate") if m in sys.modules)
        print("HEAVY", heavy, [p.status.value for p in report.patches])
        """
    )
    assert result.returncode == 0, result.stderr
    assert "HEAVY [] " in result.stdout


def test_a_patch_whose_trl_module_is_imported_after_apply_is_applied_as_if_apply_came_after_the_import():
    """apply() decides nothing until trl loads; then each patch ends as an apply() made after the import leaves it,
    applied while trl loads (the report logged at the trainer's import counts it), and the report apply() returned
    still says what apply() decided (pending: waiting for the import)."""
    result = run_python(
        """
        import json, sys, grpo_compat
        from grpo_compat.core.engine import Engine
        returned = grpo_compat.apply()
        assert "trl" not in sys.modules
        import trl.trainer.grpo_trainer
        print("IMPORTED", file=sys.stderr, flush=True)
        deferred = grpo_compat.report()
        after_import = Engine()
        immediate = after_import.apply()
        after_import.revert()
        rows = {p.id: [returned.status_of(p.id), p.status, immediate.status_of(p.id)] for p in deferred.patches}
        print(json.dumps(rows))
        """
    )
    assert result.returncode == 0, result.stderr[-3000:]
    statuses = json.loads(result.stdout.splitlines()[-1])
    assert all(deferred == immediate for _, deferred, immediate in statuses.values()), statuses
    applied = {patch for patch, (_, deferred, _) in statuses.items() if deferred == "applied"}
    assert "trl.grpo-trainer-check" in applied  # targets trl.trainer.grpo_trainer:GRPOTrainer.__init__
    assert all(statuses[patch][0] == "pending" for patch in applied)
    assert all(returned == deferred for returned, deferred, _ in statuses.values() if deferred != "applied")
    while_importing = result.stderr.partition("IMPORTED")[0]
    assert f"{len(applied)} patches active for trl" in while_importing, while_importing[-2000:]


@pytest.mark.parametrize(("rank", "expected_reports"), [("0", 1), ("1", 0)])
def test_report_is_logged_once_and_only_on_rank_zero(rank, expected_reports):
    result = run_python(
        """
        import grpo_compat
        grpo_compat.apply()
        import trl.trainer.grpo_config, trl.trainer.grpo_trainer
        grpo_compat.apply()
        """,
        env={"RANK": rank, "LOCAL_RANK": rank},
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr.count(ONE_LINE_MARK) == expected_reports


@pytest.mark.parametrize("imports_first", [False, True], ids=["apply-then-import", "import-then-apply"])
def test_the_first_patch_of_the_declared_order_is_the_outermost_wrapper(upstream, imports_first):
    module_name = upstream("impl", SOURCE)
    if imports_first:
        importlib.import_module(module_name)
    calls = []

    def recording(label):
        def wrapper(wrapped, *args, **kwargs):
            calls.append(label)
            return wrapped(*args, **kwargs)

        return wrapper

    patches = [Patch(i, ("packaging>=20",), (Target.parse(f"{module_name}:double", recording(i)),)) for i in "abc"]
    engine = Engine(patches, order=("c", "a", "b"))
    engine.apply()
    assert importlib.import_module(module_name).double(3) == 6
    assert calls == ["c", "a", "b"]
    assert engine.report().wrapping_order == {f"{module_name}:double": ["c", "a", "b"]}
    assert "wrapping order of" in str(engine.report())
    engine.revert()
