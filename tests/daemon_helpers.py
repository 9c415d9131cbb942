"""Shared helpers of the daemon tests: a real robotad in a subprocess with its own private
state, config and runtime folders, and an async client that collects ``session/event``s.

`start_robotad` runs ``python -m robotad --socket <dir>/robotad.sock --ready-fd FD`` through
tests/robotad_process.py (the launcher every test area shares) and waits for the ready byte
under a deadline (never a sleep); `stop_robotad`, `REPO` and `PROCESS_TIMEOUT` are that
module's, re-exported. The child's environment is built explicitly (``ROBOTA_STATE_DIR``,
``ROBOTA_CONFIG`` and every XDG folder inside the daemon's own temp tree), so a module-scoped
daemon is as isolated as a per-test one.

`Client` wraps `protocol.client.open_connection`: ``await client.call(method, params)`` returns
the plain JSON result or raises the `RpcError` subclass of the daemon's error; every event the
connection receives is kept in order, and `Client.wait_for` waits (under the caller's deadline)
until a predicate over them holds.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio

from protocol.client import open_connection
from protocol.errors import RpcError
from protocol.peer import JsonRpcPeer
from robotad.daemon.events import CHECK_EVENTS_ENV
from tests import robotad_process
from tests.robotad_process import PROCESS_TIMEOUT as PROCESS_TIMEOUT
from tests.robotad_process import REPO as REPO
from tests.robotad_process import RobotadProcess, child_environment
from tests.robotad_process import stop_robotad as stop_robotad

#: Absolute bound on one piece of client I/O in these tests.
IO_TIMEOUT = 20.0

Event = dict[str, Any]


@dataclass
class DaemonHome:
    """The private folders of one daemon: state, config file, runtime and socket.

    `check_events` False runs the daemon as users do, without the suite's strict decode of
    every published event (``ROBOTA_CHECK_EVENTS``): for benchmarks, which time robotad.
    """

    root: Path
    check_events: bool = True

    def __post_init__(self) -> None:
        for sub in ("state", "config", "run", "sock", "xdg-state", "xdg-config", "xdg-cache"):
            (self.root / sub).mkdir(mode=0o700, parents=True, exist_ok=True)
        if not self.config_path.exists():  # ROBOTA_CONFIG must name a file (PROTOCOL §10.3)
            self.config_path.write_text("")

    @property
    def state_dir(self) -> Path:
        return self.root / "state"

    @property
    def config_path(self) -> Path:
        return self.root / "config" / "config.toml"

    @property
    def socket_path(self) -> Path:
        return self.root / "sock" / "robotad.sock"

    @property
    def log_path(self) -> Path:
        return self.root / "robotad.log"

    def record_path(self, session_id: str) -> Path:
        return self.state_dir / "sessions" / f"{session_id}.json"

    def write_config(self, text: str) -> None:
        self.config_path.write_text(text)

    def environment(self) -> dict[str, str]:
        env = child_environment()
        for name in ("ROBOTA_SOCKET", "NOTIFY_SOCKET", "LISTEN_PID", "LISTEN_FDS"):
            env.pop(name, None)
        if not self.check_events:
            env.pop(CHECK_EVENTS_ENV, None)
        env.update(
            {
                "ROBOTA_STATE_DIR": str(self.state_dir),
                "ROBOTA_CONFIG": str(self.config_path),
                "XDG_RUNTIME_DIR": str(self.root / "run"),
                "XDG_STATE_HOME": str(self.root / "xdg-state"),
                "XDG_CONFIG_HOME": str(self.root / "xdg-config"),
                "XDG_CACHE_HOME": str(self.root / "xdg-cache"),
            }
        )
        return env


def home_in_this_process(root: Path, monkeypatch: pytest.MonkeyPatch) -> DaemonHome:
    """A `DaemonHome` at `root`, and this process's environment pointing at it (config,
    runtime, state): for a test serving the session application in-process."""
    home = DaemonHome(root)
    environment = home.environment()
    for name in ("ROBOTA_CONFIG", "XDG_RUNTIME_DIR", "XDG_CONFIG_HOME", "XDG_STATE_HOME"):
        monkeypatch.setenv(name, environment[name])
    return home


@dataclass
class RunningDaemon(RobotadProcess):
    """A robotad subprocess serving `home.socket_path`, logging to `home.log_path`."""

    home: DaemonHome


def start_robotad(home: DaemonHome, *args: str) -> RunningDaemon:
    """Start robotad for `home` with extra `args` and return once it reports serving (fails
    the test with its output when it exits or stays silent for `PROCESS_TIMEOUT`)."""
    started = robotad_process.start_robotad(
        home.socket_path, home.log_path, *args, env=home.environment()
    )
    return RunningDaemon(started.socket_path, started.process, started.log, home)


@contextmanager
def running_daemon(home: DaemonHome, *args: str) -> Iterator[RunningDaemon]:
    daemon = start_robotad(home, *args)
    try:
        yield daemon
    finally:
        stop_robotad(daemon)


def module_daemon(*args: str, config: str | None = None) -> Any:
    """A module-scoped fixture: one robotad (started with `args`, configured with `config`)
    shared by every test of the module. Use as ``daemon = module_daemon(...)``."""

    @pytest.fixture(scope="module")
    def fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningDaemon]:
        home = DaemonHome(tmp_path_factory.mktemp("daemon"))
        if config is not None:
            home.write_config(config)
        with running_daemon(home, *args) as daemon:
            yield daemon

    return fixture


# -- client -----------------------------------------------------------------------------------


@dataclass
class Client:
    """One connection to the daemon, with every event it received in arrival order."""

    peer: JsonRpcPeer
    events: list[Event] = field(default_factory=list)
    _changed: trio.Event = field(default_factory=trio.Event)

    def _on_notification(self, method: str, params: msgspec.Raw) -> None:
        if method == "session/event":
            self.events.append(msgspec.json.decode(params))
            self._changed.set()
            self._changed = trio.Event()

    async def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """The plain JSON result, or the daemon's error raised as its `RpcError` class."""
        return await self.peer.request(method, params if params is not None else {})

    def session_events(self, session_id: str) -> list[Event]:
        return [e for e in self.events if e.get("sessionId") == session_id]

    async def wait_for(self, predicate: Callable[[list[Event]], bool]) -> list[Event]:
        """Wait until `predicate(events)` holds (the caller bounds the wait)."""
        while not predicate(self.events):
            await self._changed.wait()
        return self.events

    async def wait_for_event(self, session_id: str, kind: str, **members: Any) -> Event:
        """The first event of `session_id` of type `kind` whose members match."""

        def match(event: Event) -> bool:
            return (
                event.get("sessionId") == session_id
                and event.get("type") == kind
                and all(event.get(k) == v for k, v in members.items())
            )

        await self.wait_for(lambda events: any(match(e) for e in events))
        return next(e for e in self.events if match(e))


@asynccontextmanager
async def connect(daemon: RunningDaemon) -> AsyncIterator[Client]:
    """A client connected to `daemon`; closed when the block ends."""
    holder: list[Client] = []

    def route(method: str, params: msgspec.Raw) -> None:
        holder[0]._on_notification(method, params)

    async with open_connection(daemon.socket_path, on_notification=route) as peer:
        client = Client(peer)
        holder.append(client)
        yield client


async def killed_during(
    daemon: RunningDaemon,
    client: Client,
    method: str,
    params: dict[str, Any],
    *,
    once: tuple[str, str],
    **fields: Any,
) -> list[BaseException]:
    """Call `method` and SIGKILL the daemon once the session's event `once` (session id,
    type; with `fields`) has arrived; what the call raised for it (empty if it answered)."""
    lost: list[BaseException] = []

    async def call_until_killed() -> None:
        try:
            await client.call(method, params)
        except (RpcError, ConnectionError) as exc:
            lost.append(exc)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(call_until_killed)
        await client.wait_for_event(*once, **fields)
        daemon.process.kill()
    return lost


def turns_of(events: list[Event], session_id: str, kind: str) -> list[Event]:
    """Events of one session and type, in order."""
    return [e for e in events if e.get("sessionId") == session_id and e.get("type") == kind]


def script_step(text: str = "", **members: Any) -> dict[str, Any]:
    """One scripted-provider step in wire form."""
    step: dict[str, Any] = {"text": text} if text else {}
    step.update(members)
    return step
