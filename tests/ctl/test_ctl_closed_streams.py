"""robotactl started with a standard stream closed (``>&-``, ``<&-``, ``2>&-``), against a
real robotad: a line and an exit status, never a traceback. A closed stdout is refused before
anything is done (the command's output would be lost); a closed stdin reads as empty; a closed
stderr only takes the messages away."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from protocol.methods import HistoryResult
from robotactl.exit_codes import ExitCode

from .conftest import PROCESS_TIMEOUT, Ctl, RunningDaemon, child_environment
from .ctl_helpers import decoded, new_session, sock

REFUSED = b"cannot write the output: standard output is closed, so nothing was done"


def closed(redirection: str, *args: str) -> subprocess.CompletedProcess[bytes]:
    """``python -m robotactl ARGS`` with `redirection` (such as ``>&-``) applied by a shell;
    what is not closed is captured."""
    return subprocess.run(
        ["sh", "-c", f'exec "$@" {redirection}', "sh", sys.executable, "-m", "robotactl", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        env=child_environment(),
        timeout=PROCESS_TIMEOUT,
        check=False,
    )


@pytest.mark.parametrize(
    ("args", "json_mode"),
    [(["status"], False), (["--json", "status"], True), (["ls"], False), (["new"], False)],
)
def test_a_closed_stdout_is_refused_in_a_line(
    robotad: RunningDaemon, args: list[str], json_mode: bool
) -> None:
    """``status`` is answered by the quick path (robotactl.entry) while a daemon serves: that
    path too."""
    result = closed(">&-", *sock(robotad), *args)
    assert result.returncode == ExitCode.ERROR, result.stderr
    assert b"Traceback" not in result.stderr
    assert REFUSED in result.stderr
    if json_mode:
        assert result.stderr.startswith(b'{"error": {"message": "cannot write the output: ')


def test_a_run_with_stdout_closed_sends_no_prompt(
    ctl: Ctl, robotad: RunningDaemon, work: Path
) -> None:
    session_id = new_session(ctl, robotad, work)
    result = closed(">&-", *sock(robotad), "run", "-s", session_id, "hello")
    assert result.returncode == ExitCode.ERROR, result.stderr
    assert b"Traceback" not in result.stderr
    assert REFUSED in result.stderr
    shown = decoded(ctl(*sock(robotad), "--json", "show", "-s", session_id), HistoryResult)
    assert shown.total == 0  # nothing was done: no prompt, no turn


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["run", "-s", "x", "-"], b"the prompt is empty"),
        (["import", "-"], b"not valid JSON (stdin): it is empty"),
        (["call", "session/list", "-"], b"not valid JSON (stdin): it is empty"),
        (["chat"], b"needs a terminal on stdin and stdout"),
    ],
)
def test_a_closed_stdin_reads_as_empty(
    robotad: RunningDaemon, args: list[str], said: bytes
) -> None:
    result = closed("<&-", *sock(robotad), *args)
    assert result.returncode in (ExitCode.ERROR, ExitCode.USAGE), result.stderr
    assert b"Traceback" not in result.stderr
    assert said in result.stderr


@pytest.mark.parametrize(
    "args", [["status"], ["--json", "status"], ["ls"], ["--json", "ls"], ["--help"]]
)
def test_a_reader_gone_ends_robotactl_quietly_with_status_1(
    ctl: Ctl, robotad: RunningDaemon, work: Path, args: list[str]
) -> None:
    """``robotactl show | head``: the reader of the pipe left, as it meant to. No line on stderr
    (``--json`` too: a script that stops reading has what it wanted), and exit 1, never 0, so
    ``set -o pipefail`` still sees that not everything was written (decision 85). The pipe's
    read end is closed before robotactl starts, so every write fails (EPIPE), whatever the
    timing."""
    new_session(ctl, robotad, work)  # so that `ls` has a line to write
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        result = subprocess.run(
            [sys.executable, "-m", "robotactl", *sock(robotad), *args],
            stdin=subprocess.DEVNULL,
            stdout=write_end,
            stderr=subprocess.PIPE,
            env=child_environment(),
            timeout=PROCESS_TIMEOUT,
            check=False,
        )
    finally:
        os.close(write_end)
    assert result.returncode == ExitCode.ERROR
    assert result.stderr == b""


def test_a_closed_stderr_leaves_the_output_and_the_status(robotad: RunningDaemon) -> None:
    listed = closed("2>&-", *sock(robotad), "--json", "ls")
    assert listed.returncode == ExitCode.COMPLETED
    assert listed.stdout.startswith(b"{")
    refused = closed("2>&-", *sock(robotad), "show", "-s", "no-such-session")
    assert refused.returncode == ExitCode.ERROR
    assert refused.stdout == b""
