"""Every shipped patch, against the real upstream installed here: declared properly, reversible, effective.

EFFECT_PROBES (matrix/effect_probes.py) maps each patch id to a function that returns True exactly when the
patch's effect is visible in this process, or to one line saying why no process can show it; the round trip
asserts the behaviour, not the attribute assignment. Here it runs for the patches whose window this env is in;
the matrix's ``effects`` run of each cell runs it for the patches in that cell's window.
"""

from __future__ import annotations

import importlib.util
import json
import re
import socket

import pytest

from grpo_compat.core.registry import registered_patches
from grpo_compat.core.versions import OTHER_BUILDS, window_problem
from matrix.effect_probes import PROBES as EFFECT_PROBES
from matrix.effect_probes import round_trip
from tests.helpers import REPO, run_python

PATCHES = registered_patches()


def _probe_or_skip(patch):
    probe = EFFECT_PROBES[patch.id]
    if isinstance(probe, str):
        pytest.skip(f"no in-process effect: {probe}")
    outside = window_problem(patch.requires)
    if outside is not None:
        pytest.skip(f"{outside[1]} in this env; the effects run of the cells in its window shows it (matrix/runs.py)")
    return probe


@pytest.mark.parametrize("patch", PATCHES, ids=lambda p: p.id)
def test_every_patch_has_an_effect_probe_or_one_line_saying_why_none_can_exist(patch):
    probe = EFFECT_PROBES.get(patch.id)
    if isinstance(probe, str):
        assert probe.strip() and "\n" not in probe, f"{patch.id}: say in one line why no in-process effect exists"
    else:
        assert callable(probe), f"{patch.id}: add an effect probe to matrix/effect_probes.py"


@pytest.mark.parametrize("patch", PATCHES, ids=lambda p: p.id)
def test_every_effect_probe_runs_in_a_matrix_cell_inside_the_patchs_window(patch):
    """The cells file's pins put at least one CPU cell in the window: its effects run (matrix/runs.py) probes it."""
    from matrix.repository import cells_file
    from matrix.runs import effect_runs

    if not callable(EFFECT_PROBES.get(patch.id)):
        pytest.skip("no probe to run")
    planned = []
    for cell in cells_file().cells.values():
        versions = dict(cell.pins)  # and the exact versions of its extras and overrides
        versions.update(r.split("==", 1) for r in (*cell.extra, *cell.overrides) if re.fullmatch(r"[\w.-]+==[\w.]+", r))
        versions.update(
            {name: versions[build] for name, builds in OTHER_BUILDS.items() for build in builds if build in versions}
        )
        if cell.device == "cpu":
            planned += [cell.name for run in effect_runs(versions) if patch.id in run.flags[1].split(",")]
    assert planned, f"{patch.id}: no CPU cell of matrix/cells.toml pins versions inside {patch.requires}"


@pytest.mark.parametrize("patch", PATCHES, ids=lambda p: p.id)
def test_every_patch_declares_window_docstring_probe_and_reproducer(patch):
    from matrix.reproducers import REPRODUCERS

    assert patch.requires, "a patch must declare its version window"
    for section in ("Symptom:", "Upstream:", "Remove when:"):  # the window is requires= (test_patch_declarations.py)
        assert section in patch.doc, f"{patch.id}: docstring lacks {section!r}"
    assert patch.id in EFFECT_PROBES, f"{patch.id}: add an effect probe to matrix/effect_probes.py"
    # The proof that the fix works is its reproducer: fails plain on the versions it targets, passes patched.
    assert [r for r in REPRODUCERS if r.patch == patch.id], f"{patch.id}: add a reproducer to matrix/reproducers.py"


def test_patch_modules_are_short_and_listed_in_pyproject():
    pyproject = (REPO / "pyproject.toml").read_text()
    for folder in (REPO / "patches").iterdir():
        if folder.is_dir() and (folder / "__init__.py").exists():
            assert f'"grpo_compat.patches.{folder.name}"' in pyproject, f"add patches/{folder.name} to pyproject"
    for module in (REPO / "patches").rglob("*.py"):
        assert len(module.read_text().splitlines()) < 220, f"{module} is too long for one patch"


@pytest.mark.parametrize("patch", PATCHES, ids=lambda p: p.id)
def test_apply_revert_apply_round_trip_switches_the_effect(patch):
    assert round_trip(patch.id, _probe_or_skip(patch)) is None


@pytest.mark.parametrize("order", ["apply-then-import", "import-then-apply"])
@pytest.mark.parametrize("patch", PATCHES, ids=lambda p: p.id)
def test_patch_applies_in_both_import_orders(patch, order):
    _probe_or_skip(patch)
    # An optional target's module may not exist in this version (it moved): only those that do are imported.
    modules = sorted({t.module for t in patch.targets if not t.optional or importlib.util.find_spec(t.module)})
    imports = "; ".join(f"import {m}" for m in modules)
    steps = [imports, "grpo_compat.apply()"] if order == "import-then-apply" else ["grpo_compat.apply()", imports]
    result = run_python(
        "import grpo_compat\n" + "\n".join(steps) + f"\nprint(grpo_compat.report().status_of({patch.id!r}))"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "applied"


def test_patch_docstrings_name_an_upstream_issue_or_report():
    for patch in PATCHES:
        upstream = re.search(r"Upstream:(.*?)\n\S", patch.doc + "\nX", re.S).group(1)
        assert re.search(r"#\d+|KF-\d", upstream), f"{patch.id}: name the upstream issue in 'Upstream:'"


def test_every_patch_sharing_a_target_with_another_has_a_declared_place_in_the_wrapping_order():
    from grpo_compat.core.registry import wrapping_order

    order = wrapping_order()
    wrappers: dict[str, list[str]] = {}
    for patch in PATCHES:
        for target in patch.targets:
            wrappers.setdefault(f"{target.module}:{target.qualname}", []).append(patch.id)
    shared = {patch_id for ids in wrappers.values() if len(ids) > 1 for patch_id in ids}
    assert shared - set(order) == set(), "patches sharing a target must be placed in patches/__init__.py"
    assert set(order) <= {patch.id for patch in PATCHES}


@pytest.mark.parametrize("imports_first", [False, True], ids=["apply-then-import", "import-then-apply"])
def test_the_wrappers_on_a_shared_target_run_in_the_declared_order(imports_first):
    # Walks the live wrapper chain of trl's GRPOConfig.__post_init__ and GRPOTrainer.__init__ from the outside in.
    result = run_python(
        f"""
        import json, grpo_compat
        if {imports_first}:
            import trl.trainer.grpo_config, trl.trainer.grpo_trainer
        report = grpo_compat.apply()
        import trl.trainer.grpo_config, trl.trainer.grpo_trainer
        from grpo_compat.core.wrapping import PATCH_ID_ATTRIBUTE
        chains = {{}}
        for name, owner, attribute in (
            ("trl.trainer.grpo_config:GRPOConfig.__post_init__", trl.trainer.grpo_config.GRPOConfig, "__post_init__"),
            ("trl.trainer.grpo_trainer:GRPOTrainer.__init__", trl.trainer.grpo_trainer.GRPOTrainer, "__init__"),
        ):
            function, chain = vars(owner)[attribute], []
            while hasattr(function, PATCH_ID_ATTRIBUTE):
                chain.append(getattr(function, PATCH_ID_ATTRIBUTE))
                function = function.__wrapped__
            chains[name] = chain
        print(json.dumps({{"live": chains, "reported": grpo_compat.report().wrapping_order}}))
        """,
        env={"GRPO_COMPAT_LOG_LEVEL": "error"},
    )
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout.splitlines()[-1])
    assert seen["live"] == seen["reported"]
    assert seen["live"]["trl.trainer.grpo_trainer:GRPOTrainer.__init__"][0] == "trl.launch-guard"
    assert seen["live"]["trl.trainer.grpo_config:GRPOConfig.__post_init__"] == [
        "trl.grpo-config-check",
        "trl.deepspeed-agreement",
    ]


def test_the_vllm_server_wait_probe_shows_its_effect_where_no_name_server_answers(monkeypatch):
    # The GPU machines have no network: every lookup fails with EAI_AGAIN, for which the patch only warns
    # (a name server may answer later), so the probe must show the patch through a port no server can have.
    def no_name_server(*args, **kwargs):
        raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")

    monkeypatch.setattr(socket, "getaddrinfo", no_name_server)
    (patch,) = [p for p in PATCHES if p.id == "trl.vllm-server-wait"]
    assert round_trip(patch.id, _probe_or_skip(patch)) is None
