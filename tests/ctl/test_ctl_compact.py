"""``robotactl compact`` while the model summarises, against a real robotad: it says it is
waiting (the seconds on a terminal), and Ctrl-C aborts the compaction — exit 4, the history
left as it was, the session free — instead of leaving it to replace the history behind a
command that said "Aborted!"."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

from protocol.methods import HistoryResult
from robotactl.exit_codes import ExitCode

from .conftest import PROCESS_TIMEOUT, Ctl, RunningDaemon, child_environment
from .ctl_helpers import Terminal, decoded, new_session, sock

#: A reply to compact, then a summary the model takes a minute to give (an abort cuts it).
SLOW_SUMMARY = [{"text": "a reply"}, {"summary": "S.", "delayMs": 60_000}]


def history(ctl: Ctl, daemon: RunningDaemon, session_id: str) -> HistoryResult:
    return decoded(ctl(*sock(daemon), "--json", "show", "-s", session_id), HistoryResult)


def session_with_history(ctl: Ctl, daemon: RunningDaemon, work: Path) -> str:
    session_id = new_session(ctl, daemon, work, SLOW_SUMMARY)
    ran = ctl(*sock(daemon), "run", "-s", session_id, "some history to summarise")
    assert ran.returncode == ExitCode.COMPLETED, ran.stderr
    return session_id


def assert_left_as_it_was(
    ctl: Ctl, daemon: RunningDaemon, session_id: str, before: HistoryResult
) -> None:
    """The history is what it was, and the session takes a new prompt at once."""
    assert history(ctl, daemon, session_id) == before
    again = ctl(*sock(daemon), "run", "-s", session_id, "go on")
    assert again.returncode == ExitCode.COMPLETED, again.stderr


def test_on_a_terminal_compact_counts_the_wait_and_ctrl_c_aborts_it(
    ctl: Ctl, robotad: RunningDaemon, work: Path
) -> None:
    session_id = session_with_history(ctl, robotad, work)
    before = history(ctl, robotad, session_id)
    terminal = Terminal([*sock(robotad), "compact", "-s", session_id], cwd=work)
    try:
        terminal.expect(f"summarising the history of {session_id} (Ctrl-C aborts)")
        terminal.expect("waiting for the summary…")
        terminal.process.send_signal(signal.SIGINT)
        status = terminal.finish()
    finally:
        terminal.kill()
    assert status == ExitCode.ABORTED, terminal.output
    assert terminal.output.count("aborting the compaction") == 1, terminal.output
    assert "error -32009" in terminal.output
    assert "hint: the history was left as it was" in terminal.output
    assert "Aborted!" not in terminal.output
    assert_left_as_it_was(ctl, robotad, session_id, before)


def test_without_a_terminal_compact_says_it_started_and_ctrl_c_aborts_it(
    ctl: Ctl, robotad: RunningDaemon, work: Path
) -> None:
    session_id = session_with_history(ctl, robotad, work)
    before = history(ctl, robotad, session_id)
    process = subprocess.Popen(
        [sys.executable, "-m", "robotactl", *sock(robotad), "compact", "-s", session_id],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=child_environment(),
        cwd=work,
    )
    try:
        said = _read_until(process, b"(Ctrl-C aborts)\n")
        process.send_signal(signal.SIGINT)
        stdout, rest = process.communicate(timeout=PROCESS_TIMEOUT)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    errors = (said + rest).decode()
    assert process.returncode == ExitCode.ABORTED, errors
    assert stdout == b""
    assert errors.startswith(f"summarising the history of {session_id} (Ctrl-C aborts)\n")
    assert "\x1b[" not in errors  # no colour, and no waiting line, off a terminal
    assert "waiting for" not in errors
    assert "error -32009" in errors
    assert_left_as_it_was(ctl, robotad, session_id, before)


def _read_until(process: subprocess.Popen[bytes], text: bytes) -> bytes:
    """What `process` wrote on stderr up to and including `text` (under `PROCESS_TIMEOUT`)."""
    assert process.stderr is not None
    deadline = time.monotonic() + PROCESS_TIMEOUT
    received = b""
    while text not in received:
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"{text!r} never came on stderr: {received!r}"
        readable, _, _ = select.select([process.stderr], [], [], remaining)
        if readable:
            chunk = os.read(process.stderr.fileno(), 4096)
            assert chunk, f"stderr ended before {text!r}: {received!r}"
            received += chunk
    return received
