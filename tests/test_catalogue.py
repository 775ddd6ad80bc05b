"""The failure catalogue (grpo_compat/catalogue/failures.toml): well-formed, tied to the patches, shown by doctor."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from grpo_compat.catalogue import HANDLINGS, KINDS, STOPS, affecting_this_install, load_failures, window_distributions
from grpo_compat.core.registry import registered_patches
from grpo_compat.core.versions import parse_window

FAILURES = load_failures()
PATCH_IDS = {patch.id for patch in registered_patches()}


@pytest.mark.parametrize("failure", FAILURES, ids=lambda f: f.id)
def test_every_record_is_well_formed(failure):
    assert failure.kind in KINDS and failure.handling in HANDLINGS
    for windows in failure.affects:
        for window in windows:
            parse_window(window)  # raises on a malformed window
    for pattern in failure.patterns + failure.hints:
        re.compile(pattern)
        # explain searches line by line near its anchor words (grpo_compat/catalogue/log_matching.py)
        assert "\\n" not in pattern and "(?s" not in pattern, f"{failure.id}: a pattern spans lines"
    assert set(failure.patches) <= PATCH_IDS
    # Which patch handles a record is the patch's catalogue= (tests/test_patch_declarations.py).
    assert failure.patches or failure.handling == "explained", (
        f"{failure.id} is handled by grpo_compat: the patch that handles it names it (catalogue={failure.id!r})"
    )
    assert all(re.search(r"#\d+$", ref) for ref in failure.references)  # owner/repo#N, or as the census names it
    assert failure.reproduced.strip()


def test_no_pattern_begins_with_an_unanchored_repeat():
    # A leading \w* or .* is retried from every position of a long line: quadratic. explain took 8 minutes on a
    # 200,000-character dynamo line with one such pattern; an anchor (\b, ^, a literal) keeps a search linear.
    flags_and_groups = re.compile(r"^(?:\(\?[a-zA-Z]+\)|\(\?:|\()*")
    leading_repeat = re.compile(r"(?:\\[wWdDsS]|\.|\[[^\]]*\])[*+?{]")
    offenders = [
        (failure.id, pattern)
        for failure in load_failures()
        for pattern in (*failure.patterns, *failure.hints)
        if leading_repeat.match(flags_and_groups.sub("", pattern))
    ]
    assert not offenders


def test_record_ids_are_unique():
    ids = [failure.id for failure in FAILURES]
    assert len(ids) == len(set(ids))


def test_records_match_by_version_window():
    def ids(versions: dict) -> set[str]:
        return {failure.id for failure in affecting_this_install(versions)}

    old = ids({"trl": "0.19.1", "transformers": "4.52.4", "peft": "0.15.0"})
    assert {"logits-to-keep-ignored-trl-0.19", "peft-checkpointing-no-grad"} - old == {"peft-checkpointing-no-grad"}
    assert "logits-to-keep-ignored-trl-0.19" not in ids({"trl": "1.16.0"})
    assert "deepspeed-loss-divided-twice" in ids({"transformers": "4.48.3", "deepspeed": "0.16.5"})
    assert "deepspeed-loss-divided-twice" not in ids({"transformers": "4.48.3"})  # no DeepSpeed: not affected
    assert "no-learning" in ids({})  # every version


def test_records_recognise_their_upstream_error_texts():
    by_id = {failure.id: failure for failure in FAILURES}
    seen = {
        "logps-logits-to-keep-off-by-one": "RuntimeError: Size does not match at dimension 0 expected index [269, 1] "
        "to be smaller than self [268, 152064] apart from dimension 1",
        "batch-rules-misleading": "ValueError: The global train batch size (1 x 4) must be evenly divisible by the "
        "number of generations per prompt (1). Given the current train batch size, the valid values ... are: [].",
        "lm-head-applied-twice": "a and b must have same reduction dim, but got [s0, 32000] X [4096, 32000]",
        "peft-zero3-checkpoint-error": "torch.utils.checkpoint.CheckpointError: torch.utils.checkpoint: Recomputed "
        "values for the following tensors have different metadata than during the forward pass.",
    }
    for failure_id, text in seen.items():
        assert by_id[failure_id].matches(text), failure_id
        assert not by_id[failure_id].matches("FileNotFoundError: [Errno 2] No such file or directory: 'ds.json'")


def test_doctor_lists_the_known_failures_of_this_install():
    result = subprocess.run([sys.executable, "-m", "grpo_compat", "doctor", "--json"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    listed = {failure["id"] for failure in json.loads(result.stdout)["known_failures"]}
    assert listed == {failure.id for failure in affecting_this_install()}
    assert "no-learning" in listed
    text = subprocess.run([sys.executable, "-m", "grpo_compat", "doctor"], capture_output=True, text=True).stdout
    assert "Known failures of these versions" in text
    assert "no-learning (silent, diagnosed by trl.learning-watchdog)" in text


def test_every_record_says_where_it_stops_in_a_known_way():
    assert all(failure.stops in STOPS for failure in FAILURES)
    # a record that stops the import whatever the config is a crash that no patch fixes and no setting brings about
    assert all(f.kind == "crash" and f.handling != "fixed" and not f.hints for f in FAILURES if f.stops_the_import)


# pyarrow beside numpy, bisected in uv envs (`import pyarrow`): 26.0.0 and 26.0.1 raise beside numpy 1.23.5 to 1.26.4,
# 25.0.1 imports beside them; 26.0.0 imports beside numpy 2.0.0, and with no numpy at all.
PYARROW_RAISES = [{"pyarrow": "26.0.1", "numpy": "1.26.4"}, {"pyarrow": "26.0.0", "numpy": "1.23.5"}]
PYARROW_IMPORTS = [
    {"pyarrow": "25.0.1", "numpy": "1.26.4"},
    {"pyarrow": "26.0.0", "numpy": "2.0.0"},
    {"pyarrow": "26.0.1", "numpy": "2.4.6"},
    {"pyarrow": "26.0.1"},
]


@pytest.mark.parametrize("versions", PYARROW_RAISES + PYARROW_IMPORTS, ids=lambda v: "-".join(v.values()))
def test_the_pyarrow_numpy_record_holds_exactly_the_pairs_that_raise_at_import(versions):
    held = {"ms-swift": "3.2.2", "trl": "0.16.1", "datasets": "4.8.4", **versions}  # ms-swift 3.2 declares numpy<2
    ids = {failure.id for failure in affecting_this_install(held)}
    assert ("pyarrow-26-numpy-1" in ids) == (versions in PYARROW_RAISES)


def test_the_pyarrow_numpy_record_recognises_pyarrows_own_message():
    (record,) = [failure for failure in FAILURES if failure.id == "pyarrow-26-numpy-1"]
    assert record.stops_the_import
    assert record.matches("ImportError: pyarrow requires NumPy 2.0 or newer, found 1.26.4")
    assert not record.matches("ImportError: pyarrow requires pandas 2.2.2 or above, pandas 2.1.4 is installed")
    assert window_distributions([record]) == ["pyarrow", "numpy"]


def test_the_pyarrow_numpy_records_fix_is_what_the_releases_declare():
    from grpo_compat import histories

    (record,) = [failure for failure in FAILURES if failure.id == "pyarrow-26-numpy-1"]
    # pyarrow 25 fits every datasets release (and trl 1.16's pyarrow>=21): the first way out is always open
    for package in ("datasets", "trl"):
        history = histories.load(package)
        assert history.releases_accepting("pyarrow", "25.0.1") == history.releases, package
    # numpy 2 is no way out for the ms-swift releases the fix names, and is for every later one
    swift = histories.load("ms-swift")
    keeping_numpy_1 = [release for release in swift.releases if release not in swift.releases_accepting("numpy", "2")]
    assert (keeping_numpy_1[0], keeping_numpy_1[-1]) == ("3.2.0", "3.6.4") and "ms-swift 3.2 to 3.6" in record.fix
    assert swift.releases[swift.releases.index("3.6.4") + 1 :] == swift.releases_accepting("numpy", "2")
