"""``robotactl chat`` when robotad goes away under it (stopped, restarted, killed), in a real
pseudo-terminal (tmux): the chat says so at once, keeps on the screen what was typed and not
sent, says a running turn's outcome is unknown, and exits non-zero. Each test has a daemon of
its own, which it stops or kills."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from protocol.blocking_client import open_blocking_connection
from tests.robotad_process import PROCESS_TIMEOUT, RobotadProcess, start_robotad, stop_robotad

from .chat_tmux import ChatTerminal, require_tmux
from .conftest import child_environment

#: The session's one reply: slow enough to be running when the daemon goes.
SLOW_REPLY = {"text": "slow slow slow slow", "chunks": 8, "delayMs": 2000}


def _env(root: Path) -> dict[str, str]:
    home = root / "home"
    variables = {"HOME": str(home), "TERM": "xterm-256color", "ROBOTA_NO_AUTOSTART": "1"}
    for name in ("config", "state", "data", "cache", "run"):
        (home / name).mkdir(parents=True, mode=0o700, exist_ok=True)
        key = "XDG_RUNTIME_DIR" if name == "run" else f"XDG_{name.upper()}_HOME"
        variables[key] = str(home / name)
    env = child_environment(**variables)
    for name in ("ROBOTA_SOCKET", "ROBOTA_STATE_DIR", "ROBOTA_CONFIG", "ROBOTA_SESSION"):
        env.pop(name, None)
    return env


@pytest.fixture
def daemon(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RobotadProcess]:
    require_tmux()
    sock = tmp_path_factory.mktemp("lsock")
    sock.chmod(0o700)
    running = start_robotad(sock / "robotad.sock", tmp_path / "robotad.log", env=_env(tmp_path))
    try:
        yield running
    finally:
        stop_robotad(running)


@pytest.fixture
def terminal(daemon: RobotadProcess, tmp_path: Path) -> Iterator[ChatTerminal]:
    """A chat on a new scripted session whose one turn runs a while."""
    work = tmp_path / "work"
    work.mkdir()
    with open_blocking_connection(daemon.socket_path, timeout=PROCESS_TIMEOUT) as client:
        params = {"cwd": str(work), "provider": "scripted", "script": [SLOW_REPLY]}
        session_id = client.request("session/create", params)["sessionId"]
    term = ChatTerminal(
        tmp_path, daemon.socket_path, ["-s", session_id], env=_env(tmp_path), cwd=work
    )
    try:
        term.ready()
        yield term
    finally:
        term.close()


def test_a_daemon_stopping_under_an_idle_chat_ends_it_keeping_the_typed_text(
    daemon: RobotadProcess, terminal: ChatTerminal
) -> None:
    terminal.type("typed but not sent")
    terminal.wait_for("› typed but not sent")
    daemon.process.send_signal(signal.SIGTERM)
    daemon.wait_exit()
    status = terminal.wait_exit()
    screen = terminal.screen()
    # Said once, on the chat's screen: not again as robotactl's error line on the way out.
    assert screen.count("robotad closed the connection") == 1
    assert "not sent: typed but not sent" in screen
    assert "outcome is unknown" not in screen  # no turn was running
    assert status == 1


def test_a_daemon_killed_mid_turn_leaves_the_turns_outcome_unknown(
    daemon: RobotadProcess, terminal: ChatTerminal
) -> None:
    terminal.send("go slowly")
    terminal.wait_for("thinking")
    daemon.process.send_signal(signal.SIGKILL)
    daemon.wait_exit()
    status = terminal.wait_exit()
    screen = terminal.screen()
    assert screen.count("robotad closed the connection") == 1
    assert "the running turn's outcome is unknown" in screen
    assert status == 1


def test_a_prompt_out_when_the_daemon_dies_has_an_unknown_outcome_not_unsent(
    daemon: RobotadProcess, terminal: ChatTerminal
) -> None:
    """robotad killed after the prompt's ``session/run`` went out and before its answer came:
    robotad may have taken it, so the chat says the turn's outcome is unknown. It said "not
    sent: PROMPT" (which a person would send again). The daemon is stopped first, so the
    answer cannot come before the kill."""
    daemon.process.send_signal(signal.SIGSTOP)
    terminal.send("go")
    terminal.wait_for("thinking")  # the chat sent it (its own state: robotad cannot answer)
    daemon.process.send_signal(signal.SIGKILL)
    daemon.wait_exit()
    status = terminal.wait_exit()
    screen = terminal.screen()
    assert "the running turn's outcome is unknown" in screen
    assert "not sent" not in screen
    assert status == 1
