"""Sessions on their way out while their requesters leave or the daemon stops, in process: a
close whose client gives up, a shutdown whose deadline passes during a SessionEnd hook
(`robotad.daemon.transitions`)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio
import trio.testing

from protocol.methods import CreateParams, RunParams, Step
from protocol.shapes import TurnRunning
from robotad.config import Config
from robotad.daemon.assembly import SessionAssembler
from robotad.daemon.live import LiveSession
from robotad.daemon.manager import SessionManager
from robotad.daemon.operations import SessionOperations
from robotad.session.hooks.lifecycle import HookLifecycle

TIMEOUT = 20.0


@pytest.fixture
async def manager(tmp_path: Path, nursery: trio.Nursery) -> AsyncIterator[SessionManager]:
    state = tmp_path / "state"
    assembler = SessionAssembler.from_config(Config(), state_dir=state)
    manager = SessionManager(
        state_dir=state, assembler=assembler, nursery=nursery, idle_unload_seconds=0
    )
    await nursery.start(manager.run)
    yield manager
    with trio.fail_after(TIMEOUT):
        await manager.shutdown(0)


class _Ends:
    """The SessionEnd hooks that ran to their end, and the provider closes, of the sessions
    built from now on (patched on the class: a session loaded later is built later)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, *, hold: trio.Event | None = None):
        self.reached = trio.Event()
        self.ended: list[str] = []
        session_end = HookLifecycle.session_end

        async def held_end(lifecycle: HookLifecycle, reason: str) -> None:
            self.reached.set()
            if hold is not None:
                await hold.wait()
            await session_end(lifecycle, reason)
            self.ended.append(reason)

        monkeypatch.setattr(HookLifecycle, "session_end", held_end)

    @staticmethod
    def provider_closes(live: LiveSession) -> list[str]:
        closes: list[str] = []
        provider = live.session.get_provider()
        aclose = provider.aclose

        async def noted() -> None:
            closes.append(provider.name)
            await aclose()

        provider.aclose = noted  # type: ignore[method-assign]
        return closes


def _log_events(manager: SessionManager, session_id: str) -> list[str]:
    path = manager.logs_dir / f"{session_id}.jsonl"
    return [json.loads(line)["event"] for line in path.read_text().splitlines()]


async def test_a_close_whose_client_gives_up_still_closes_the_session(
    manager: SessionManager, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """G-129, G-130, G-072: a client ran a turn with ``wait: false`` (nobody waits for it),
    then asked ``session/close`` and went away — its request cancelled with the connection —
    while the close ran SessionEnd. The close stopped halfway: the SessionEnd hook was cut,
    the session unloaded with its provider (a pooled client's lease) and its own tool
    servers never closed. A close that has begun retiring now finishes without its client."""
    ops = SessionOperations(manager)
    hold = trio.Event()
    ends = _Ends(monkeypatch, hold=hold)
    with trio.fail_after(TIMEOUT):
        step = Step(text="reply", chunks=2, delay_ms=10)
        info = await manager.create(CreateParams(cwd=str(tmp_path), script=[step]))
        sid = info.session_id
        live = await manager.session(sid)
        closes = ends.provider_closes(live)
        started = await ops.run(RunParams(session_id=sid, prompt="go", wait=False), None)
        assert isinstance(started, TurnRunning)
        client = trio.CancelScope()

        async def close() -> None:
            with client:
                await manager.close(sid)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(close)
            await ends.reached.wait()  # the turn drained, the record saved: SessionEnd runs
            client.cancel()  # the client goes away
            await trio.testing.wait_all_tasks_blocked()
            hold.set()
    assert ends.ended == ["shutdown"]
    assert closes == [live.session.provider_name]
    assert manager.loaded(sid) is None
    assert _log_events(manager, sid)[-1] == "session_end"
    record = json.loads(manager.store.path_for(sid).read_bytes())["record"]
    assert [m["content"] for m in record["messages"]] == ["go", "reply"]


async def test_a_shutdown_deadline_during_session_end_still_lets_the_session_go(
    manager: SessionManager, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """G-132, PROTOCOL §5 daemon/shutdown: the daemon's deadline passing while a session's
    SessionEnd hook hangs cut the hook — and with it every later step of the close: the
    provider (its pooled client) and the session's tool servers were never closed. The
    shutdown still ends at its deadline, and the session lets go of what it holds."""
    ends = _Ends(monkeypatch, hold=trio.Event())  # never set: the hook hangs
    with trio.fail_after(TIMEOUT):
        info = await manager.create(CreateParams(cwd=str(tmp_path)))
        live = await manager.session(info.session_id)
        closes = ends.provider_closes(live)
        with trio.CancelScope() as deadline:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(manager.shutdown, 0)
                await ends.reached.wait()
                deadline.cancel()
    assert deadline.cancelled_caught
    assert ends.ended == []  # cut, as the deadline asks
    assert closes == [live.session.provider_name]
    assert manager.loaded(info.session_id) is None
    assert _log_events(manager, info.session_id)[-1] == "session_end"
