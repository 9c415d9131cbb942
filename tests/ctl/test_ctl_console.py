"""robotactl's last resort (`robotactl.console`): an `OSError` that names no file is said as
what it was — the output that cannot be written, standard input that cannot be read, or the
call that failed and where — never taken for the output's failure by default.

No daemon is needed: each failure comes before robotactl would connect.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from robotactl.exit_codes import ExitCode

from .conftest import PROCESS_TIMEOUT, child_environment


def robotactl(*args: str, **streams: object) -> subprocess.CompletedProcess[str]:
    """``python -m robotactl --no-autostart ARGS`` on a socket nobody listens at; stderr
    captured, the other streams as `streams` give them (stdout captured when not given)."""
    nowhere = "/nonexistent/robotad.sock"
    return subprocess.run(
        [sys.executable, "-m", "robotactl", "--socket", nowhere, "--no-autostart", *args],
        stdin=streams.get("stdin", subprocess.DEVNULL),
        stdout=streams.get("stdout", subprocess.PIPE),
        stderr=subprocess.PIPE,
        text=True,
        env=child_environment(),
        timeout=PROCESS_TIMEOUT,
        check=False,
    )


def reset_stdin() -> socket.socket:
    """A socket whose reads fail with ECONNRESET: its peer closed with data unread."""
    ours, theirs = socket.socketpair()
    ours.sendall(b"never read")  # lands in theirs' receive queue
    theirs.close()  # closing with unread data resets the connection
    return ours


@pytest.mark.parametrize("args", [["call", "daemon/status", "-"], ["run", "-s", "s-1", "-"]])
def test_standard_input_that_cannot_be_read_is_said_so(args: list[str]) -> None:
    with reset_stdin() as stdin:
        result = robotactl(*args, stdin=stdin)
    assert result.returncode == ExitCode.ERROR
    assert result.stderr == "robotactl: cannot read standard input: Connection reset by peer\n"


def test_under_json_it_is_the_error_document() -> None:
    with reset_stdin() as stdin:
        result = robotactl("--json", "call", "daemon/status", "-", stdin=stdin)
    assert result.returncode == ExitCode.ERROR
    assert json.loads(result.stderr) == {
        "error": {"message": "cannot read standard input: Connection reset by peer"}
    }


def test_a_failed_call_is_named_with_where_it_was_made(tmp_path: Path) -> None:
    """``new`` in a folder since deleted: ``os.getcwd()`` fails with ENOENT, no filename."""
    gone = tmp_path / "gone"
    gone.mkdir()
    command = [sys.executable, "-m", "robotactl", "--no-autostart", "new"]
    process = subprocess.Popen(  # started there, the folder removed under it
        ["sh", "-c", 'rmdir "$PWD" && exec "$@"', "sh", *command],
        cwd=gone,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=child_environment(),
    )
    stdout, stderr = process.communicate(timeout=PROCESS_TIMEOUT)
    assert not gone.exists()
    assert (process.returncode, stdout) == (ExitCode.ERROR, "")
    assert re.fullmatch(
        r"robotactl: os\.getcwd\(\) failed: No such file or directory "
        r"\(robotactl\.commands\.sessions, line \d+\)\n",
        stderr,
    ), stderr
    assert "cannot write the output" not in stderr


def test_an_output_that_cannot_be_written_is_still_said_so() -> None:
    with open("/dev/full", "w") as full:
        result = robotactl("--help", stdout=full)
    assert result.returncode == ExitCode.ERROR
    assert result.stderr == "robotactl: cannot write the output: No space left on device\n"
