"""What a person sees of a turn (issue 14), through a real robotad: the approval decision
printed once, a true sentence after an abort, ``--turn-id`` replaying the turn it joins, and
a waiting indicator on a terminal only, a reply printed whole when its events were lost."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from robotactl.exit_codes import ExitCode
from tests.daemon_helpers import connect
from tests.robotad_process import start_robotad, stop_robotad

from .conftest import PROCESS_TIMEOUT, Ctl, RunningDaemon, child_environment
from .ctl_helpers import Terminal, new_session, sock, write_script
from .test_ctl_turns import SLOW, slow_run


def test_approving_prints_the_decision_once(ctl: Ctl, robotad: RunningDaemon, work: Path) -> None:
    session_id = new_session(ctl, robotad, work, write_script("out.txt", "hi\n", "Wrote it."))
    waiting = ctl(*sock(robotad), "run", "-s", session_id, "write it", input="")
    assert waiting.returncode == ExitCode.WAITING
    assert waiting.stderr.count("Write: needs approval") == 1
    result = ctl(*sock(robotad), "approve", "-s", session_id, input="")
    assert result.returncode == ExitCode.COMPLETED, result.stderr
    assert "needs approval" not in result.stderr, result.stderr
    assert "Write: allowed" in result.stderr


#: A reply that takes its time: nothing for 20 s, then text.
SILENT_A_WHILE = [{"text": "finally", "delayMs": 20_000}]


@pytest.mark.parametrize("no_color", ["", "1"])
def test_a_terminal_shows_the_wait_and_an_abort_before_any_text_says_so(
    ctl: Ctl, robotad: RunningDaemon, work: Path, no_color: str
) -> None:
    session_id = new_session(ctl, robotad, work, SILENT_A_WHILE)
    terminal = Terminal(
        [*sock(robotad), "run", "-s", session_id, "think hard"],
        cwd=work,
        NO_COLOR=no_color,
        TERM="xterm",
    )
    try:
        terminal.expect("waiting for the model…")
        terminal.process.send_signal(signal.SIGINT)
        status = terminal.finish()
    finally:
        terminal.kill()
    assert status == ExitCode.ABORTED, terminal.output
    assert "was aborted; it was stopped before the model sent any text" in terminal.output
    assert "partial reply" not in terminal.output
    assert ("\x1b[" in terminal.output) == (not no_color)


def test_no_waiting_line_without_a_terminal(ctl: Ctl, robotad: RunningDaemon, work: Path) -> None:
    session_id = new_session(ctl, robotad, work, [{"text": "later", "delayMs": 1500}])
    result = ctl(*sock(robotad), "run", "-s", session_id, "take your time")
    assert result.returncode == ExitCode.COMPLETED, result.stderr
    assert result.stdout == "later\n"
    assert "waiting" not in result.stderr


async def test_joining_a_running_turn_replays_what_it_already_said(
    robotad: RunningDaemon, work: Path, ctl: Ctl
) -> None:
    steps = [{"text": "one two three four", "chunks": 4, "delayMs": 400}]
    session_id = new_session(ctl, robotad, work, steps)
    with trio.fail_after(PROCESS_TIMEOUT):
        async with connect(robotad) as client:
            await client.call("session/subscribe", {"sessionId": session_id})
            params = {"sessionId": session_id, "prompt": "count", "turnId": "t-join"}
            await client.call("session/run", {**params, "wait": False})
            await client.wait_for_event(session_id, "text_delta")
            joined = await trio.run_process(
                [
                    sys.executable,
                    "-m",
                    "robotactl",
                    *sock(robotad),
                    "run",
                    "-s",
                    session_id,
                    "--turn-id",
                    "t-join",
                    "count",
                ],
                capture_stdout=True,
                capture_stderr=True,
                env=child_environment(),
                check=False,
            )
    assert joined.returncode == ExitCode.COMPLETED, joined.stderr
    assert joined.stdout.decode() == "one two three four\n"


def test_a_daemon_that_dies_mid_turn_is_said_to_have_stopped(
    ctl: Ctl, robotad: RunningDaemon, work: Path
) -> None:
    """Not "another user": the daemon stopped, and where its log is."""
    session_id = new_session(ctl, robotad, work, SLOW)
    process = slow_run(robotad, session_id, work)
    try:
        robotad.process.kill()
        robotad.process.wait(PROCESS_TIMEOUT)
        _, stderr = process.communicate(timeout=PROCESS_TIMEOUT)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    errors = stderr.decode()
    assert process.returncode == ExitCode.ERROR, errors
    assert "robotad has stopped" in errors
    assert "journalctl --user -u robotad" in errors
    assert "another user" not in errors


def test_a_wait_whose_request_was_cut_off_says_so_and_approve_asks_again(
    ctl: Ctl, robotad: RunningDaemon, work: Path, tmp_path: Path
) -> None:
    """robotad stopped after the model's reply was journaled and before the approval request
    was complete (here: the request's line cut in half while it was down). The session waits
    with no request on record: ``show`` says so and how to go on, the daemon's log names the
    cut, and ``approve`` says it goes on, which asks again; the fresh request is answered as
    usual."""
    session_id = new_session(ctl, robotad, work, write_script("out.txt", "hi\n", "Wrote it."))
    assert ctl(*sock(robotad), "run", "-s", session_id, "write it", input="").returncode == 3
    robotad.process.send_signal(signal.SIGKILL)
    robotad.process.wait(PROCESS_TIMEOUT)
    journal = Path(os.environ["XDG_STATE_HOME"]) / "robota" / "journal" / session_id
    (execution,) = journal.iterdir()
    lines = execution.read_bytes().splitlines(keepends=True)
    assert b'"kind":"request"' in lines[-1]
    execution.write_bytes(b"".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2])
    log = tmp_path / "restarted.log"
    restarted = start_robotad(robotad.socket_path, log)
    try:
        shown = ctl(*sock(restarted), "show", "-s", session_id)
        assert "no open approval request" in shown.stdout, shown.stdout
        assert f"robotactl approve -s {session_id}` goes on" in shown.stdout
        again = ctl(*sock(restarted), "approve", "-s", session_id, input="")
        assert again.returncode == ExitCode.WAITING, again.stderr
        assert "waits with no open approval request" in again.stderr
        assert "going on" in again.stderr
        assert "Write(" in again.stdout
        done = ctl(*sock(restarted), "approve", "-s", session_id, input="")
        assert done.returncode == ExitCode.COMPLETED, done.stderr
        assert (work / "out.txt").read_text() == "hi\n"
        assert f"journal {execution.name}: removed" in log.read_text()
    finally:
        stop_robotad(restarted)


#: A reply of 25,000 deltas, one numbered line each: more than robotad's replay buffer holds
#: (10,000 events), so a client that stops reading for the whole reply loses some of them.
MANY_LINES = 25_000
MANY_DELTAS = [
    {"text": "".join(f"line {n:05d}\n" for n in range(MANY_LINES)), "chunks": MANY_LINES}
]


def test_a_reply_whose_events_were_lost_is_printed_whole(
    ctl: Ctl, robotad: RunningDaemon, work: Path
) -> None:
    """stdout a pipe nobody reads (a pager showing its first page): robotactl blocks on it,
    robotad unsubscribes it on overflow and the gap is past its replay buffer. The reply then
    has a hole, and the line said "its result follows"; now the whole reply does follow."""
    session_id = new_session(ctl, robotad, work, MANY_DELTAS)
    turn = ["-s", session_id, "--turn-id", "many", "count"]
    process = subprocess.Popen(
        [sys.executable, "-m", "robotactl", *sock(robotad), "run", *turn],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=child_environment(),
        cwd=work,
    )
    try:
        # Another client joining the same turn returns once it has ended; only then is the
        # first one's stdout read.
        ended = ctl(*sock(robotad), "--json", "run", *turn)
        assert ended.returncode == ExitCode.COMPLETED, ended.stderr
        stdout, stderr = process.communicate(timeout=PROCESS_TIMEOUT)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    errors = stderr.decode()
    assert process.returncode == ExitCode.COMPLETED, errors
    assert "events were lost; its reply is printed whole when it ends" in errors
    assert "the reply, whole:" in errors
    whole = "".join(f"line {n:05d}\n" for n in range(MANY_LINES))
    assert stdout.decode().endswith(whole + "\n")
