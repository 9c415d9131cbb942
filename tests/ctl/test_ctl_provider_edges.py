"""A model server that never answers, or is not there, met through a real robotad and
robotactl (issue 14; PROTOCOL §10.2/§10.3): every wait bounded, the effective idle timeout in
SessionInfo, and one line a person can act on (the whole error with --json)."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from protocol.shapes import SessionInfo
from robotactl.exit_codes import ExitCode
from tests.daemon_helpers import DaemonHome, RunningDaemon, running_daemon

from .conftest import Ctl
from .ctl_helpers import decoded, sock


@pytest.fixture(scope="module")
def silent_server() -> Iterator[int]:
    """A loopback port whose listener accepts (the kernel's backlog) and never answers."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    try:
        yield listener.getsockname()[1]
    finally:
        listener.close()


@pytest.fixture(scope="module")
def refused_port() -> int:
    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    probe.bind(("127.0.0.1", 0))
    port: int = probe.getsockname()[1]
    probe.close()
    return port


@pytest.fixture(scope="module")
def daemon(
    tmp_path_factory: pytest.TempPathFactory, silent_server: int, refused_port: int
) -> Iterator[RunningDaemon]:
    home = DaemonHome(tmp_path_factory.mktemp("edges"))
    home.write_config(
        f"""
[providers.silent]
kind = "openai"
base_url = "http://127.0.0.1:{silent_server}/v1"
model = "m"
idle_timeout_ms = 400

[providers.gone]
kind = "openai"
base_url = "http://127.0.0.1:{refused_port}/v1"
model = "m"
"""
    )
    with running_daemon(home) as running:
        yield running


@pytest.fixture
def work(tmp_path: Path) -> Path:
    return tmp_path.resolve()


def _new(ctl: Ctl, daemon: RunningDaemon, work: Path, *extra: str) -> SessionInfo:
    result = ctl(*sock(daemon), "--json", "new", "--cwd", str(work), *extra)
    return decoded(result, SessionInfo)


def test_every_session_shows_a_finite_idle_timeout(
    ctl: Ctl, daemon: RunningDaemon, work: Path
) -> None:
    assert _new(ctl, daemon, work).idle_timeout_ms == 120_000  # the scripted default
    assert _new(ctl, daemon, work, "--provider", "silent").idle_timeout_ms == 400
    own = _new(ctl, daemon, work, "--provider", "silent", "--idle-timeout", "0.25")
    assert own.idle_timeout_ms == 250


def test_a_silent_server_fails_the_turn_in_one_line_and_a_hint(
    ctl: Ctl, daemon: RunningDaemon, work: Path, silent_server: int
) -> None:
    info = _new(ctl, daemon, work, "--provider", "silent", "--idle-timeout", "0.3")
    result = ctl(*sock(daemon), "run", "-s", info.session_id, "hello?")
    assert result.returncode == ExitCode.ERROR
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 2, result.stderr  # the error, then what to do about it
    assert f"127.0.0.1:{silent_server}: no data for 0.3 s" in lines[0]
    assert lines[1].startswith("hint: the model sent nothing for that long")
    assert "idle_timeout_ms in [providers.silent]" in lines[1]
    assert "data:" not in result.stderr


def test_a_refused_connection_names_endpoint_and_cause_and_json_keeps_it_all(
    ctl: Ctl, daemon: RunningDaemon, work: Path, refused_port: int
) -> None:
    info = _new(ctl, daemon, work, "--provider", "gone")
    result = ctl(*sock(daemon), "run", "-s", info.session_id, "hello?")
    assert result.returncode == ExitCode.ERROR
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 2, result.stderr  # the error, then what to do about it
    assert f"127.0.0.1:{refused_port}: connection refused" in lines[0]
    assert lines[1].startswith("hint: nothing answers at that address")
    assert "base_url in [providers.gone]" in lines[1]
    as_json = ctl(*sock(daemon), "--json", "run", "-s", info.session_id, "again?")
    assert as_json.returncode == ExitCode.ERROR
    document = json.loads(as_json.stderr)
    assert document["hint"].startswith("nothing answers at that address")
    error = document["error"]
    assert error["code"] == -32007
    assert error["data"]["provider"] == "gone"
    assert error["data"]["reason"].startswith(f"127.0.0.1:{refused_port}: connection refused")
