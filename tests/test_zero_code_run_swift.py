"""`grpo-compat run -- swift rlhf ...`: grpo_compat on every rank of ms-swift's launch (ms-swift 3.5 and 4.6 cells),
without --external_plugins: it trains as with the plugin, and refuses what the plugin refuses.

Its own file so that pytest-xdist (`--dist loadfile`) runs it beside test_zero_code_run.py's launchers: together
they were one worker's 11-19 minutes.
"""

from __future__ import annotations

import json

import pytest


@pytest.mark.slow
@pytest.mark.parametrize(("cell", "nproc"), [("swift-3.5", 2), ("swift-4.6", 2), ("swift-4.6", 1)])
def test_swift_rlhf_without_the_plugin_is_patched_on_every_rank(cell, nproc, tmp_path):
    from tests.helpers import cell_python, run_script

    python = cell_python(cell)
    results = {}
    for activation, settings in (("plugin", []), ("run", []), ("run", ["--set", "num_generations=1"])):
        output = tmp_path / f"{activation}{len(settings)}.json"
        run_script(
            python,
            "matrix/smoke_swift_cli.py",
            "--mode",
            "patched",
            "--activation",
            activation,
            "--nproc",
            str(nproc),
            *settings,
            "--output",
            str(output),
        )
        results[activation, bool(settings)] = json.loads(output.read_text())
    by_plugin, by_run, refused = results["plugin", False], results["run", False], results["run", True]
    assert by_run["status"] == by_plugin["status"] == "ok", by_run["error"]  # report once, watchdog on every rank
    assert by_run["weights_sha256"] == by_plugin["weights_sha256"]
    assert refused["phase"] == "config" and "GRPOSettingsError: GRPO needs at least 2" in refused["error"]
