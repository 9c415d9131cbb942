"""robotactl started with a standard stream closed (``>&-``, ``<&-``, ``2>&-``), against a
real robotad: a line and an exit status, never a traceback. A closed stdout is refused before
anything is done (the command's output would be lost); a closed stdin reads as empty; a closed
stderr only takes the messages away."""

from __future__ import annotations

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
        (["import", "-"], b"not valid JSON (stdin)"),
        (["call", "session/list", "-"], b"not valid JSON (stdin)"),
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


def test_a_closed_stderr_leaves_the_output_and_the_status(robotad: RunningDaemon) -> None:
    listed = closed("2>&-", *sock(robotad), "--json", "ls")
    assert listed.returncode == ExitCode.COMPLETED
    assert listed.stdout.startswith(b"{")
    refused = closed("2>&-", *sock(robotad), "show", "-s", "no-such-session")
    assert refused.returncode == ExitCode.ERROR
    assert refused.stdout == b""
