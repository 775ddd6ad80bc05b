"""Every command on bad input: exit 2 with one line naming the input and what was expected; never a traceback,
never exit 0 on input it could not read (hypothesis: empty, binary, huge, non-UTF-8, malformed YAML / JSON /
TOML, flags without values, unknown flags)."""

from __future__ import annotations

import contextlib
import io

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from grpo_compat.tools.cli import main

UNREADABLE = {  # file contents no command can read as its input
    "empty": b"",
    "binary": b"\x00\x01\x02\xff\xfe" * 50,
    "non-utf8": "num_generations: 4  # 生成数\n".encode("gb18030") + b"\xff\xfe",
}
MALFORMED = {  # text, but not a mapping of settings
    "yaml": b"num_generations: [4\nper_device_train_batch_size: {",
    "json": b'{"num_generations": 4,,}',
    "toml": b"[cells\nname = ",
    "list": b"- 1\n- 2\n",
    "huge": b"num_generations: " + b"9" * 100_000 + b"\n",
}
TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=30)
TOKENS = st.lists(
    st.one_of(TEXT, st.sampled_from(["--", "-", "--json", "--help-me", "-x", "=", "0", "-1"])), max_size=4
)


def run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else 2
    return code, out.getvalue(), err.getvalue()


def assert_clean(code: int, err: str) -> None:
    assert code in (0, 1, 2), code
    assert "Traceback" not in err, err
    if code == 2:
        assert err.count("\n") == 1 and err.startswith("grpo-compat"), err


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("inputs")
    paths = {}
    for name, data in {**UNREADABLE, **MALFORMED}.items():
        for suffix in (".yaml", ".json", ".log"):
            path = folder / f"{name}{suffix}"
            path.write_bytes(data)
            paths[f"{name}{suffix}"] = str(path)
    paths["missing"] = str(folder / "missing.yaml")
    paths["folder"] = str(folder)
    return paths


@pytest.mark.parametrize("name", sorted(UNREADABLE))
@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_check_refuses_a_config_it_cannot_read(files, name, suffix):
    code, _, err = run(["check", files[name + suffix]])
    assert (code == 2 and err.count("\n") == 1 and name.split("-")[0] in err.replace("UTF-8", "utf8")) or "empty" in err


@pytest.mark.parametrize("name", ["yaml", "json", "list"])
def test_check_refuses_a_malformed_config_naming_it(files, name):
    code, _, err = run(["check", files[f"{name}.{'json' if name == 'json' else 'yaml'}"]])
    assert code == 2 and err.count("\n") == 1


def test_a_swift_argument_without_its_value_is_refused_as_swift_would():
    code, _, err = run(["check", "--swift", "--swift-version", "4.6.0", "--", "--num_generations"])
    assert (code, err) == (
        2,
        "grpo-compat check: --num_generations needs a value (swift rlhf refuses it without one)\n",
    )


@pytest.mark.parametrize("name", ["empty", "binary"])
def test_explain_refuses_what_is_not_a_log(files, name):
    code, _, err = run(["explain", files[f"{name}.log"]])
    assert code == 2 and err.count("\n") == 1


FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@FUZZ
@given(
    data=st.data(),
    flags=st.lists(
        st.sampled_from(
            [
                "--swift",
                "--world-size",
                "--nproc-per-node",
                "--nnodes",
                "--trl-version",
                "--swift-version",
                "--json",
                "--unknown",
            ]
        ),
        max_size=4,
    ),
    values=TOKENS,
)
def test_check_on_any_input(files, data, flags, values):
    source = data.draw(st.sampled_from(sorted(files)))
    code, _, err = run(["check", *flags, *values, files[source]])
    assert_clean(code, err)
    if source.split(".")[0] in UNREADABLE or source in ("missing", "folder"):
        assert code == 2


@FUZZ
@given(
    arguments=st.lists(
        st.one_of(
            st.sampled_from(
                ["--num_generations", "--per_device_train_batch_size", "--deepspeed", "--sequence_parallel_size", "--x"]
            ),
            TEXT,
        ),
        max_size=6,
    )
)
def test_check_swift_arguments_on_any_input(arguments):
    code, _, err = run(["check", "--swift", "--swift-version", "4.6.0", "--", *arguments])
    assert_clean(code, err)


@FUZZ
@given(data=st.data(), extra=TOKENS)
def test_explain_on_any_input(files, data, extra):
    source = data.draw(st.sampled_from(sorted(files)))
    code, _, err = run(["explain", files[source], *extra])
    assert_clean(code, err)
    if source.split(".")[0] in ("empty", "binary") or source in ("missing", "folder"):
        assert code == 2


@FUZZ
@given(command=st.sampled_from(["doctor", "plugin-path"]), extra=TOKENS)
def test_doctor_and_plugin_path_on_any_arguments(command, extra):
    code, _, err = run([command, *extra])
    assert_clean(code, err)
    if [token for token in extra if token != "--json" or command != "doctor"]:
        assert code == 2


@FUZZ
@given(action=st.sampled_from(["run", "report", "workflow", "init", "nope", ""]), extra=TOKENS)
def test_matrix_on_any_arguments(monkeypatch, files, action, extra):
    import grpo_compat.matrix.cli as matrix_cli
    import grpo_compat.matrix.runner as matrix_runner
    from matrix.repository import repository_project

    # A command line that is valid starts no matrix and writes nothing here: only the argument handling is under test.
    monkeypatch.setattr(matrix_runner, "run_matrix", lambda *args, **kwargs: 0)
    monkeypatch.setattr(matrix_cli, "_workflow", lambda args, project: 0)
    monkeypatch.setattr(matrix_cli, "_init", lambda args: 0)
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        try:
            code = matrix_cli.main([action, *extra] if action else extra, repository=repository_project)
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else 2
    assert code in (0, 1, 2) and "Traceback" not in err.getvalue()
    if code == 2:
        assert err.getvalue().count("\n") == 1, err.getvalue()


@FUZZ
@given(
    flags=st.lists(
        st.sampled_from(["--strict", "--only", "--skip", "--print-env", "--", "trl.launch-guard"]), max_size=4
    ),
    command=TOKENS,
)
@example(flags=[], command=["\n"])  # a command name that would print two lines
def test_run_on_any_arguments(monkeypatch, flags, command):
    import os

    executed = []
    # A command line that is valid would replace this process: record the exec instead.
    monkeypatch.setattr(os, "execve", lambda path, argv, env: executed.append(argv))
    code, _, err = run(["run", *flags, *command])
    assert code in (0, 2, 126, 127) and "Traceback" not in err, err
    if code in (2, 126, 127):
        assert err.count("\n") == 1 and not executed, err


def test_version_flag_prints_the_installed_release_and_exits_0(capsys):
    import importlib.metadata

    import grpo_compat

    with pytest.raises(SystemExit) as exit_status:
        main(["--version"])
    assert exit_status.value.code == 0
    assert capsys.readouterr().out == f"grpo-compat {grpo_compat.__version__}\n"
    assert grpo_compat.__version__ == importlib.metadata.version("grpo-compat")


@pytest.fixture(scope="module")
def user_matrix(tmp_path_factory):
    """A user's cells file (``matrix init``), and a TRL config and a log to give the other commands."""
    folder = tmp_path_factory.mktemp("user")
    assert main(["matrix", "init", str(folder / "matrix")]) == 0
    (folder / "grpo.yaml").write_text("num_generations: 4\nper_device_train_batch_size: 4\n")
    (folder / "train.log").write_text("Traceback (most recent call last):\nValueError: something\n")
    return folder


def _no_work(monkeypatch) -> list:
    """What a command line that passes its checks would start (a matrix run, a wheel fill, an exec), recorded."""
    import os

    import grpo_compat.matrix.envs as matrix_envs
    import grpo_compat.matrix.runner as matrix_runner

    started = []
    monkeypatch.setattr(matrix_runner, "run_matrix", lambda *args, **kwargs: started.append("matrix run") or 0)
    monkeypatch.setattr(matrix_envs.CellEnvs, "fill_wheelhouse", lambda *args: started.append("wheels"))
    monkeypatch.setattr(os, "execve", lambda path, argv, env: started.append(argv))
    return started


CELLS = "{dir}/matrix/grpo-matrix.toml"
WHEELS = ["matrix", "wheels", "--cells-file", CELLS, "--cell", "current", "--out", "{dir}/w"]
BAD_VALUES = {
    "a --from version": (["check", "--from", "trl==banana", "{dir}/grpo.yaml"], "--from 'trl==banana': expected trl=="),
    "an empty --from version": (["check", "--from", "trl==", "{dir}/grpo.yaml"], "--from 'trl==': expected trl=="),
    "a --package-version": (
        ["explain", "--package-version", "trl==banana", "{dir}/train.log"],
        "--package-version 'trl==banana': expected PACKAGE==VERSION",
    ),
    "a --target-python": (
        [*WHEELS, "--target-python", "banana"],
        "--target-python 'banana': expected the machine's Python as X.Y",
    ),
    "a --torch-version": (
        [*WHEELS, "--torch-version", "banana"],
        "--torch-version 'banana': expected a version",
    ),
    "a --junit under a file": (
        ["matrix", "report", "--cells-file", CELLS, "--results", "{dir}", "--junit", "{dir}/grpo.yaml/junit.xml"],
        "--junit {dir}/grpo.yaml/junit.xml: cannot make its folder",
    ),
    "a workflow --output that is a folder": (
        ["matrix", "workflow", "--cells-file", CELLS, "--output", "{dir}"],
        "--output {dir}: is a folder, expected a file to write",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_VALUES))
def test_a_value_that_does_not_read_is_refused_in_one_line_before_any_work(monkeypatch, user_matrix, case):
    started = _no_work(monkeypatch)
    argv, expected = BAD_VALUES[case]
    code, _, err = run([argument.format(dir=user_matrix) for argument in argv])
    assert (code, err.count("\n"), started) == (2, 1, []), err
    assert expected.format(dir=user_matrix) in err and "Traceback" not in err


CONFLICTS = {
    "--world-size and --nproc-per-node": (
        ["check", "--world-size", "4", "--nproc-per-node", "2", "{dir}/grpo.yaml"],
        "--world-size 4 disagrees with --nproc-per-node 2 = 2 processes",
    ),
    "--nnodes alone": (["check", "--nnodes", "2", "{dir}/grpo.yaml"], "--nnodes 2: give --nproc-per-node with it"),
    "--only and --skip": (
        ["run", "--only", "trl.launch-guard", "--skip", "trl.launch-guard", "--", "true"],
        "--only and --skip together",
    ),
    "--only= and --skip": (
        ["run", "--only=trl.launch-guard", "--skip", "trl.reward-dry-run", "--", "true"],
        "--only and --skip together",
    ),
    "--explain and --print-env": (["run", "--explain", "--print-env"], "--print-env and --explain together"),
    "--failure and --all": (["doctor", "--failure", "KF-2", "--all"], "leave out --all"),
    "--quick and --cells": (
        ["matrix", "run", "--cells-file", CELLS, "--quick", "--cells", "current"],
        "--quick and --cells together",
    ),
}


@pytest.mark.parametrize("case", sorted(CONFLICTS))
def test_conflicting_flags_are_refused_in_one_line(monkeypatch, user_matrix, case):
    started = _no_work(monkeypatch)
    argv, expected = CONFLICTS[case]
    code, _, err = run([argument.format(dir=user_matrix) for argument in argv])
    assert (code, err.count("\n"), started) == (2, 1, []), err
    assert expected in err


def test_flags_that_agree_are_taken(monkeypatch, user_matrix):
    config = str(user_matrix / "grpo.yaml")
    code, out, err = run(["check", "--world-size", "4", "--nproc-per-node", "2", "--nnodes", "2", config])
    assert code != 2 and "4 process(es)" in out, err
    code, out, err = run(["check", "--nproc-per-node", "2", "--nnodes", "3", config])
    assert code != 2 and "6 process(es)" in out, err
    started = _no_work(monkeypatch)
    assert run(["run", "--only", "trl.launch-guard", "--", "true"])[0] == 0 and started
