"""Fixtures of the ``robotactl acp`` tests: one real robotad per module, the TypeScript SDK
from the user's cache, and editors of both official SDKs.

The `kind` fixture parametrises a test over ``"ts"`` (``@agentclientprotocol/sdk``, skipped
with the reason when node or npm is missing; .ci/run installs them) and ``"py"``
(``agent-client-protocol``). `launch` opens an editor of that kind whose agent is
``python -m robotactl --socket … --no-autostart acp [ARGS]`` on this module's daemon.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.acp.editors import Editor, open_editor
from tests.acp.sdk_cache import node_tools_missing, typescript_sdk
from tests.robotad_process import (
    REPO,
    RobotadProcess,
    child_environment,
    start_robotad,
    stop_robotad,
)

Launch = Callable[..., AbstractAsyncContextManager[Editor]]


@pytest.fixture(scope="module")
def acp_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RobotadProcess]:
    """A robotad shared by a module's tests, on its own state folder and socket."""
    base = tmp_path_factory.mktemp("acp-daemon")
    socket_dir = tmp_path_factory.mktemp("sock")
    socket_dir.chmod(0o700)
    env = child_environment(
        ROBOTA_STATE_DIR=str(base / "state"),
        XDG_CONFIG_HOME=str(base / "config"),
        XDG_STATE_HOME=str(base / "xdg-state"),
        XDG_RUNTIME_DIR=str(socket_dir),
    )
    daemon = start_robotad(socket_dir / "robotad.sock", base / "robotad.log", env=env)
    try:
        yield daemon
    finally:
        stop_robotad(daemon)


@pytest.fixture(params=["ts", "py"])
def kind(request: pytest.FixtureRequest) -> str:
    if request.param == "ts" and (missing := node_tools_missing()) is not None:
        pytest.skip(missing)
    value: str = request.param
    return value


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path.resolve()


async def open_raw_agent(daemon: RobotadProcess, *, stderr: int | None = None) -> trio.Process:
    """``robotactl acp`` on `daemon` as a child whose stdin and stdout are pipes, for a test
    that speaks raw ACP (the SDK editors send one prompt at a time and only what ACP allows);
    `stderr` as for `trio.lowlevel.open_process` (None: inherited)."""
    agent = await trio.lowlevel.open_process(
        agent_argv(daemon),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=stderr,
        env=child_environment(),
        cwd=REPO,
    )
    assert agent.stdin is not None
    assert agent.stdout is not None
    return agent


def agent_argv(daemon: RobotadProcess, *args: str) -> list[str]:
    """``robotactl acp`` on `daemon` with `args` after ``acp``."""
    return [
        sys.executable,
        "-m",
        "robotactl",
        "--socket",
        str(daemon.socket_path),
        "--no-autostart",
        "acp",
        "--log-level",
        "info",
        *args,
    ]


@pytest.fixture
def launch(acp_daemon: RobotadProcess, kind: str, tmp_path: Path) -> Launch:
    """``launch(script=[steps], kind=None, *args)``: an editor (of the test's kind unless
    given) on this module's daemon, its sessions scripted with `script`."""
    counter = iter(range(1000))

    @asynccontextmanager
    async def opened(
        *args: str, script: list[dict[str, Any]] | None = None, editor_kind: str | None = None
    ) -> AsyncIterator[Editor]:
        number = next(counter)
        extra = list(args)
        if script is not None:
            script_path = tmp_path / f"script-{number}.json"
            script_path.write_text(json.dumps(script))
            extra += ["--script", str(script_path)]
        which = editor_kind or kind
        ts_sdk = typescript_sdk() if which == "ts" else None
        log = tmp_path / f"editor-{number}.log"
        async with open_editor(which, agent_argv(acp_daemon, *extra), log, ts_sdk) as editor:
            yield editor

    return opened
