"""robotactl running turns against a real robotad: streaming, approvals with and without a
terminal, exit statuses (0 completed, 3 waiting, 4 aborted), Ctrl-C, idempotent retries,
NO_COLOR."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import msgspec

from protocol.methods import HistoryResult, PendingResult, SessionList
from protocol.shapes import SessionInfo, TurnCompleted, TurnWaiting
from robotactl.exit_codes import ExitCode

from .conftest import PROCESS_TIMEOUT, Ctl, RunningDaemon, child_environment
from .ctl_helpers import Terminal, decoded, new_session, sock, write_script


def pending(ctl: Ctl, daemon: RunningDaemon, session_id: str) -> PendingResult:
    params = f'{{"sessionId": "{session_id}"}}'
    return decoded(ctl(*sock(daemon), "call", "session/pending", params), PendingResult)


# -- completed turns -----------------------------------------------------------------------------


def test_run_streams_the_reply_and_exits_0(ctl: Ctl, robotad: RunningDaemon, work: Path) -> None:
    session_id = new_session(ctl, robotad, work, [{"text": "Hello, world", "chunks": 4}])
    result = ctl(*sock(robotad), "run", "-s", session_id, "say", "hello")
    assert result.returncode == ExitCode.COMPLETED, result.stderr
    assert result.stdout == "Hello, world\n"
    history = decoded(ctl(*sock(robotad), "--json", "show", "-s", session_id), HistoryResult)
    assert history.messages[0].content == "say hello"


def test_run_json_prints_only_the_final_turn_result(
    ctl: Ctl, robotad: RunningDaemon, work: Path
) -> None:
    session_id = new_session(ctl, robotad, work, [{"text": "streamed", "chunks": 3}])
    completed = decoded(ctl(*sock(robotad), "--json", "run", "-s", session_id, "go"), TurnCompleted)
    assert completed.response == "streamed"


def test_run_reads_the_prompt_from_stdin(ctl: Ctl, robotad: RunningDaemon, work: Path) -> None:
    session_id = new_session(ctl, robotad, work)
    result = ctl(*sock(robotad), "run", "-s", session_id, "-", input="line one\nline two\n")
    assert result.stdout == "echo: line one\nline two\n", result.stderr


def test_a_retry_with_the_same_turn_id_runs_nothing_twice(
    ctl: Ctl, robotad: RunningDaemon, work: Path
) -> None:
    session_id = new_session(ctl, robotad, work, [{"text": "only once"}, {"text": "twice?!"}])
    args = [*sock(robotad), "run", "-s", session_id, "--turn-id", "turn-1", "do it"]
    first, second = ctl(*args), ctl(*args)
    assert first.stdout == second.stdout == "only once\n", second.stderr
    info = decoded(
        ctl(*sock(robotad), "call", "session/get", f'{{"sessionId":"{session_id}"}}'), SessionInfo
    )
    assert (info.turn_count, info.message_count) == (1, 2)


def test_a_provider_failure_exits_1_with_its_reason(
    ctl: Ctl, robotad: RunningDaemon, work: Path
) -> None:
    session_id = new_session(ctl, robotad, work, [{"text": "partial ", "error": "upstream 503"}])
    result = ctl(*sock(robotad), "run", "-s", session_id, "fail please")
    assert result.returncode == ExitCode.ERROR
    # One line, prefixed like every robotactl error (README "Using robotactl").
    assert result.stderr.startswith("robotactl: error -32007: provider ")
    assert "upstream 503" in result.stderr
    assert result.stdout == "partial \n"  # the streamed text's line ended: the error's stands alone


# -- approvals without a terminal ----------------------------------------------------------------


def test_waiting_without_a_tty_prints_each_request_and_exits_3(
    ctl: Ctl, robotad: RunningDaemon, work: Path
) -> None:
    """Without a terminal a waiting turn prints each request (id, tab, tool and arguments) and
    exits 3; nothing has run."""
    session_id = new_session(ctl, robotad, work, write_script("out.txt"))
    result = ctl(*sock(robotad), "run", "-s", session_id, "write it", input="")
    assert result.returncode == ExitCode.WAITING, result.stderr
    text, request_line = result.stdout.splitlines()
    assert text == "Writing it."
    request_id, call = request_line.split("\t")
    assert call.startswith(f'Write(file_path="{work / "out.txt"}"')
    assert f"robotactl approve -s {session_id}" in result.stderr
    waiting = pending(ctl, robotad, session_id).pending
    assert waiting is not None
    assert [r.request_id for r in waiting.requests] == [request_id]
    assert not (work / "out.txt").exists()


def test_waiting_json_is_the_waiting_turn_result(
    ctl: Ctl, robotad: RunningDaemon, work: Path
) -> None:
    session_id = new_session(ctl, robotad, work, write_script("out.txt"))
    result = ctl(*sock(robotad), "--json", "run", "-s", session_id, "write it", input="")
    assert result.returncode == ExitCode.WAITING
    turn = msgspec.json.decode(result.stdout, type=TurnWaiting)
    assert [r.tool for r in turn.requests] == ["Write"]
    assert result.stderr == ""  # how to answer is for people: the JSON says what waits


def test_approve_resumes_and_streams_the_rest(ctl: Ctl, robotad: RunningDaemon, work: Path) -> None:
    """G-076: the wait outlives the robotactl that started it; another process answers it, the
    turn resumes and its effect is real."""
    session_id = new_session(ctl, robotad, work, write_script("out.txt", "hi\n", "Wrote it."))
    assert ctl(*sock(robotad), "run", "-s", session_id, "write it", input="").returncode == 3
    result = ctl(*sock(robotad), "approve", "-s", session_id, input="")
    assert result.returncode == ExitCode.COMPLETED, result.stderr
    assert f'approving Write(file_path="{work / "out.txt"}"' in result.stderr
    assert result.stdout == "Wrote it.\n"
    assert (work / "out.txt").read_text() == "hi\n"
    assert pending(ctl, robotad, session_id).pending is None


def test_deny_resumes_without_the_effect(ctl: Ctl, robotad: RunningDaemon, work: Path) -> None:
    session_id = new_session(ctl, robotad, work, write_script("out.txt", done="Understood."))
    assert ctl(*sock(robotad), "run", "-s", session_id, "write it", input="").returncode == 3
    request_id = pending(ctl, robotad, session_id).pending.requests[0].request_id  # type: ignore[union-attr]
    result = ctl(*sock(robotad), "--json", "deny", "-s", session_id, request_id, input="")
    assert decoded(result, TurnCompleted).response == "Understood."
    assert result.stderr == ""  # under --json, stderr carries an error or nothing
    assert not (work / "out.txt").exists()
    history = decoded(ctl(*sock(robotad), "--json", "show", "-s", session_id), HistoryResult)
    tool_results = [m for m in history.messages if m.role == "tool"]
    assert [m.ok for m in tool_results] == [False]


def test_approve_refuses_unknown_ids_and_an_empty_queue(
    ctl: Ctl, robotad: RunningDaemon, work: Path
) -> None:
    session_id = new_session(ctl, robotad, work, write_script())
    nothing = ctl(*sock(robotad), "approve", "-s", session_id)
    assert nothing.returncode == ExitCode.ERROR
    assert "nothing in session" in nothing.stderr
    assert "waiting for approval" in nothing.stderr
    assert ctl(*sock(robotad), "run", "-s", session_id, "write it", input="").returncode == 3
    unknown = ctl(*sock(robotad), "approve", "-s", session_id, "no-such-request")
    assert unknown.returncode == ExitCode.ERROR
    assert "not pending: no-such-request" in unknown.stderr
    assert pending(ctl, robotad, session_id).pending is not None


def test_approve_in_a_folder_whose_latest_session_does_not_wait_names_the_one_that_does(
    ctl: Ctl, robotad: RunningDaemon, work: Path
) -> None:
    """A fork of a waiting session is the folder's newest: a bare ``approve`` picks it, finds
    nothing waiting there, and says which session of the folder waits."""
    waiting = new_session(ctl, robotad, work, write_script())
    assert ctl(*sock(robotad), "run", "-s", waiting, "write it", input="").returncode == 3
    fork = ctl(*sock(robotad), "fork", "-s", waiting, cwd=work)
    assert fork.returncode == 0, fork.stderr
    result = ctl(*sock(robotad), "approve", input="", cwd=work)
    assert result.returncode == ExitCode.ERROR
    assert f"in this folder {waiting} waits: robotactl approve -s {waiting}" in result.stderr
    named = ctl(*sock(robotad), "approve", "-s", fork.stdout.split()[-1], input="", cwd=work)
    assert f"nothing in session {fork.stdout.split()[-1]} is waiting" in named.stderr
    assert "in this folder" not in named.stderr  # a session named with -s is the one meant


def test_a_new_prompt_while_waiting_points_at_approve(
    ctl: Ctl, robotad: RunningDaemon, work: Path
) -> None:
    """G-079: a new prompt while an execution waits is refused -32005; robotactl says how to
    answer it."""
    session_id = new_session(ctl, robotad, work, write_script())
    assert ctl(*sock(robotad), "run", "-s", session_id, "write it", input="").returncode == 3
    result = ctl(*sock(robotad), "run", "-s", session_id, "something else", input="")
    assert result.returncode == ExitCode.ERROR
    assert "error -32005" in result.stderr
    assert f"robotactl approve -s {session_id}" in result.stderr


# -- approvals on a terminal ---------------------------------------------------------------------


def test_on_a_terminal_approval_is_asked_and_answered(
    ctl: Ctl, robotad: RunningDaemon, work: Path
) -> None:
    session_id = new_session(ctl, robotad, work, write_script("tty.txt", "from a tty\n", "Done."))
    terminal = Terminal(
        [*sock(robotad), "run", "-s", session_id, "write it"], cwd=work, NO_COLOR="1"
    )
    try:
        terminal.expect("Allow Write? [y/N]")
        assert "approval needed: Write" in terminal.output
        assert f'file_path: "{work / "tty.txt"}"' in terminal.output
        assert "  | from a tty" in terminal.output  # the content, as it will be written
        terminal.send("y\n")
        status = terminal.finish()
    finally:
        terminal.kill()
    assert status == ExitCode.COMPLETED, terminal.output
    assert (work / "tty.txt").read_text() == "from a tty\n"
    assert "Done." in terminal.output


def test_on_a_terminal_no_is_a_denial(ctl: Ctl, robotad: RunningDaemon, work: Path) -> None:
    session_id = new_session(ctl, robotad, work, write_script("tty.txt", done="Fine."))
    terminal = Terminal([*sock(robotad), "run", "-s", session_id, "write it"], cwd=work)
    try:
        terminal.expect("[y/N]")
        terminal.send("\n")  # the default is no
        status = terminal.finish()
    finally:
        terminal.kill()
    assert status == ExitCode.COMPLETED, terminal.output
    assert not (work / "tty.txt").exists()
    assert "Fine." in terminal.output


def test_end_of_input_at_the_prompt_leaves_the_turn_waiting(
    ctl: Ctl, robotad: RunningDaemon, work: Path
) -> None:
    session_id = new_session(ctl, robotad, work, write_script())
    terminal = Terminal([*sock(robotad), "run", "-s", session_id, "write it"], cwd=work)
    try:
        terminal.expect("[y/N]")
        terminal.send("\x04")  # Ctrl-D
        status = terminal.finish()
    finally:
        terminal.kill()
    assert status == ExitCode.WAITING, terminal.output
    assert "left waiting for approval" in terminal.output
    assert pending(ctl, robotad, session_id).pending is not None


def test_no_color_is_respected_on_a_terminal(ctl: Ctl, robotad: RunningDaemon, work: Path) -> None:
    outputs = {}
    for no_color in ("", "1"):
        session_id = new_session(ctl, robotad, work, write_script(done="ok"))
        terminal = Terminal(
            [*sock(robotad), "run", "-s", session_id, "write it"],
            cwd=work,
            NO_COLOR=no_color,
            TERM="xterm",
        )
        try:
            terminal.expect("[y/N]")
            terminal.send("n\n")
            assert terminal.finish() == ExitCode.COMPLETED, terminal.output
        finally:
            terminal.kill()
        outputs[no_color] = terminal.output
    assert "\x1b[" in outputs[""]  # colour on a terminal by default...
    assert "\x1b[" not in outputs["1"]  # ...and none at all with NO_COLOR


def slow_run(daemon: RunningDaemon, session_id: str, cwd: Path) -> subprocess.Popen[bytes]:
    """``robotactl run`` in the background, returned once its first text has streamed."""
    process = subprocess.Popen(
        [sys.executable, "-m", "robotactl", *sock(daemon), "run", "-s", session_id, "count"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=child_environment(),
        cwd=cwd,
    )
    assert process.stdout is not None
    try:
        deadline = time.monotonic() + PROCESS_TIMEOUT
        readable: list[Any] = []
        while not readable and time.monotonic() < deadline:
            readable, _, _ = select.select([process.stdout], [], [], 1.0)
        assert readable, "no text streamed"
        assert os.read(process.stdout.fileno(), 4096).startswith(b"tick")
    except BaseException:
        process.kill()
        process.communicate()
        raise
    return process


SLOW = [{"text": "tick " * 40, "chunks": 40, "delayMs": 250}]


def test_abort_from_another_terminal_ends_the_run_with_4(
    ctl: Ctl, robotad: RunningDaemon, work: Path
) -> None:
    session_id = new_session(ctl, robotad, work, SLOW)
    process = slow_run(robotad, session_id, work)
    try:
        stopped = ctl(*sock(robotad), "abort", "-s", session_id)
        _, stderr = process.communicate(timeout=PROCESS_TIMEOUT)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert stopped.stdout == f"aborting the running turn of {session_id}\n", stopped.stderr
    assert process.returncode == ExitCode.ABORTED, stderr.decode()
    assert "was aborted" in stderr.decode()


# -- Ctrl-C --------------------------------------------------------------------------------------


def test_ctrl_c_aborts_the_turn_once_and_exits_4(
    ctl: Ctl, robotad: RunningDaemon, work: Path
) -> None:
    """G-191, G-192: Ctrl-C aborts once; robotactl exits 4 only after the turn stopped, and the
    partial reply stays in history, interrupted."""
    session_id = new_session(ctl, robotad, work, SLOW)
    process = slow_run(robotad, session_id, work)
    try:
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=PROCESS_TIMEOUT)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    errors = stderr.decode()
    assert process.returncode == ExitCode.ABORTED, errors
    assert errors.count("aborting the turn") == 1
    assert "was aborted" in errors
    info = decoded(
        ctl(*sock(robotad), "call", "session/get", f'{{"sessionId":"{session_id}"}}'), SessionInfo
    )
    assert not info.running
    history = decoded(ctl(*sock(robotad), "--json", "show", "-s", session_id), HistoryResult)
    assert history.messages[-1].role == "assistant"
    assert history.messages[-1].state == "interrupted"
    listing = decoded(ctl(*sock(robotad), "--json", "ls"), SessionList)
    assert not listing.sessions[0].running
