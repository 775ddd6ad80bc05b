"""`grpo-compat run --explain -- <command>`: the command as a child, its output on the terminal as it comes and in
a capture; when it fails, `grpo-compat explain`'s answer on that capture, after it, on stderr.

What a shell pipe (`cmd 2>&1 | tee log | grpo-compat explain -`) gets wrong, this keeps: the command's exit status
is returned as its own (a death by a signal is re-raised, so the caller sees the same status), stdout and stderr
stay apart, and nothing is explained when the command succeeded or the user stopped it (Ctrl-C).

Its output passes through pipes, not a terminal: Python's output is made unbuffered (PYTHONUNBUFFERED=1, unless the
environment sets it) so that it reaches the terminal live; a program that asks whether it writes to a terminal
(colours, some progress bars) prints as it would into a file. Ctrl-C reaches the command from the terminal as it
would without grpo_compat (this process waits for the command meanwhile); SIGTERM and SIGHUP sent to this process
are passed on.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import shlex
import signal
import subprocess
import sys
import tempfile

from grpo_compat.crash_explanation import EXPLAIN_ENV
from grpo_compat.tools.errors import InputError

# A capture larger than this is explained from its start (versions, banners) and its end (the error).
HEAD_BYTES, TAIL_BYTES = 1 << 20, 32 << 20
CHUNK = 1 << 16
PASSED_ON = (signal.SIGTERM, signal.SIGHUP)


def run_explained(executable: str, command: list[str], env: dict[str, str]) -> int:
    env = dict(env)
    env.setdefault("PYTHONUNBUFFERED", "1")
    # The explanation comes once, after the whole output (every rank's), rather than also under each traceback.
    env.setdefault(EXPLAIN_ENV, "0")
    name = command[0] if command[0].isprintable() else repr(command[0])
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, *PASSED_ON)}
    # Ctrl-C reaches the command from the terminal: this process waits for it to decide. A handler rather than
    # SIG_IGN, which the command would inherit; a signal this process was started ignoring stays so for both.
    if previous[signal.SIGINT] is not signal.SIG_IGN:
        signal.signal(signal.SIGINT, lambda number, frame: None)
    with tempfile.NamedTemporaryFile(prefix="grpo-compat-run-", suffix=".log") as capture:
        try:
            child = subprocess.Popen(
                command, executable=executable, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
            )
        except OSError as error:  # e.g. not executable: as a shell reports it
            _restore(previous)
            print(f"grpo-compat run: {name}: {error.strerror}", file=sys.stderr)
            return 126
        for sig in PASSED_ON:
            if previous[sig] is not signal.SIG_IGN:
                signal.signal(sig, lambda number, frame: child.send_signal(number))
        try:
            _tee(child, capture)
            status = child.wait()
        finally:
            _restore(previous)
        if status not in (0, -signal.SIGINT, 128 + signal.SIGINT):  # failed, and not stopped by the user
            _explain(capture, shlex.join(command))
    if status < 0:  # killed by a signal: die of the same one, so the caller sees the command's own status
        sys.stdout.flush()
        sys.stderr.flush()
        with contextlib.suppress(OSError, ValueError):  # SIGKILL's disposition cannot be set, nor need be
            signal.signal(-status, signal.SIG_DFL)
        os.kill(os.getpid(), -status)
        return 128 - status  # a signal that does not end this process (not reached for one that does)
    return status


def _restore(previous: dict) -> None:
    for sig, handler in previous.items():
        signal.signal(sig, handler)


def _tee(child: subprocess.Popen, capture) -> None:
    """Each stream of the child to the same stream of this process, and both, interleaved as they come, to capture."""
    streams = {child.stdout.fileno(): sys.stdout.fileno(), child.stderr.fileno(): sys.stderr.fileno()}
    gone: set[int] = set()  # streams of this process that can no longer be written (a closed pipe)
    with selectors.DefaultSelector() as selector:
        for source in streams:
            selector.register(source, selectors.EVENT_READ)
        while selector.get_map():
            for key, _ in selector.select():
                chunk = os.read(key.fd, CHUNK)
                if not chunk:
                    selector.unregister(key.fd)
                    continue
                capture.write(chunk)
                target = streams[key.fd]
                if target not in gone:
                    try:
                        _write_all(target, chunk)
                    except OSError:  # keep capturing: the explanation still needs the output
                        gone.add(target)
    child.stdout.close()
    child.stderr.close()
    capture.flush()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _explain(capture, command: str) -> None:
    from grpo_compat.tools import explain

    described = command if len(command) <= 80 else command[:77] + "..."
    print(f"\ngrpo-compat run --explain: {described} failed; what its output shows:", file=sys.stderr)
    size = capture.seek(0, os.SEEK_END)
    if size == 0:
        print("grpo-compat run --explain: it printed nothing to explain", file=sys.stderr)
        return
    with contextlib.ExitStack() as stack:
        log = capture.name
        if size > HEAD_BYTES + TAIL_BYTES:  # its start (versions, banners) and its end (the error)
            trimmed = stack.enter_context(tempfile.NamedTemporaryFile(prefix="grpo-compat-run-", suffix=".log"))
            capture.seek(0)
            trimmed.write(capture.read(HEAD_BYTES))
            trimmed.write(f"\n[... {size - HEAD_BYTES - TAIL_BYTES} bytes of output left out ...]\n".encode())
            capture.seek(size - TAIL_BYTES)
            trimmed.write(capture.read())
            trimmed.flush()
            log = trimmed.name
        try:
            with contextlib.redirect_stdout(sys.stderr):
                explain.run(log, [], False, name=f"the output of {described}")
        except InputError as error:  # output that is not text
            print(f"grpo-compat run --explain: {error}", file=sys.stderr)
