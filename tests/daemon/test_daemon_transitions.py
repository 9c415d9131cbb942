"""Sessions on their way in and out while their requesters leave or the daemon stops, in
process: a close whose client gives up, a shutdown whose deadline passes during a SessionEnd
hook, and a shutdown that meets a load still firing SessionStart (`robotad.daemon.transitions`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from protocol.errors import NotAllowed
from protocol.methods import CreateParams, RunParams, Step
from protocol.shapes import TurnRunning
from robotad.daemon.live import LiveSession
from robotad.daemon.manager import SessionManager
from robotad.daemon.operations import SessionOperations
from robotad.session.hooks.lifecycle import HookLifecycle

TIMEOUT = 20.0


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


async def _stored(manager: SessionManager, cwd: Path) -> str:
    """A session that is stored and not loaded."""
    session_id = (await manager.create(CreateParams(cwd=str(cwd)))).session_id
    await manager.close(session_id)
    return session_id


def _hold_session_start(monkeypatch: pytest.MonkeyPatch, gate: trio.Event) -> trio.Event:
    """SessionStart of the sessions loaded from now on waits for `gate`; the event returned
    is set once one is waiting."""
    reached = trio.Event()
    session_start = HookLifecycle.session_start

    async def held_start(lifecycle: HookLifecycle, source: str) -> None:
        reached.set()
        await gate.wait()
        await session_start(lifecycle, source)

    monkeypatch.setattr(HookLifecycle, "session_start", held_start)
    return reached


async def test_a_load_under_way_at_shutdown_finishes_and_is_closed(
    manager: SessionManager, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PROTOCOL §5 daemon/shutdown, G-129: ``session/history`` on a stored session loads it;
    a shutdown arriving while its SessionStart ran returned at once (the session was not
    loaded yet, so there was nothing to close), and the load then finished into a daemon
    that had closed everything: the session stayed loaded, never saved or ended by the
    shutdown. The shutdown now waits for loads under way within its grace, then closes the
    sessions they brought."""
    with trio.fail_after(TIMEOUT):
        sid = await _stored(manager, tmp_path)
        gate = trio.Event()
        reached = _hold_session_start(monkeypatch, gate)
        ends = _Ends(monkeypatch)
        loaded: list[LiveSession] = []
        shut = trio.Event()

        async def shutdown() -> None:
            await manager.shutdown(TIMEOUT)
            shut.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(lambda: _load_into(manager, sid, loaded))
            await reached.wait()
            nursery.start_soon(shutdown)
            await trio.testing.wait_all_tasks_blocked()
            assert not shut.is_set()  # it waits for the load
            gate.set()
    assert [live.session_id for live in loaded] == [sid]
    assert manager.loaded(sid) is None
    assert ends.ended == ["shutdown"]
    events = _log_events(manager, sid)
    assert events[-1] == "session_end"
    assert events.count("session_start") == events.count("session_end") == 2
    with pytest.raises(NotAllowed):
        await manager.session(sid)


async def _load_into(manager: SessionManager, session_id: str, loaded: list[Any]) -> None:
    try:
        loaded.append(await manager.session(session_id))
    except NotAllowed as exc:
        loaded.append(exc)


async def test_a_load_still_starting_at_the_grace_is_refused_and_ended(
    manager: SessionManager, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PROTOCOL §5 daemon/shutdown, G-129: a load whose SessionStart hook outlasts the
    shutdown's grace was left running by the shutdown, to be cut when the daemon closed the
    connections — its client got no answer, and its session a SessionStart but no
    SessionEnd. It is now stopped at the grace: refused NotAllowed, its SessionEnd fired
    and its log ended, nothing left loaded."""
    with trio.fail_after(TIMEOUT):
        sid = await _stored(manager, tmp_path)
        reached = _hold_session_start(monkeypatch, trio.Event())  # never set: it hangs
        ends = _Ends(monkeypatch)
        loaded: list[Any] = []
        async with trio.open_nursery() as nursery:
            nursery.start_soon(lambda: _load_into(manager, sid, loaded))
            await reached.wait()
            await manager.shutdown(0)
    assert len(loaded) == 1
    assert isinstance(loaded[0], NotAllowed)
    assert manager.loaded(sid) is None
    assert ends.ended == ["shutdown"]
    events = _log_events(manager, sid)
    assert events[-1] == "session_end"
    assert events.count("session_start") == events.count("session_end") == 2


async def test_a_turn_accepted_but_not_begun_at_the_grace_begins_aborted(
    manager: SessionManager, tmp_path: Path
) -> None:
    """PROTOCOL §5 daemon/shutdown ("abort the rest"): a turn answered "running" whose task
    had not begun when the grace ran out was missed by the shutdown's abort (it signalled
    only the work holding the session), so it began unaborted and the shutdown waited for
    the whole turn — a model call of minutes — past its grace. It now begins aborted, as
    ``session/abort`` makes it."""
    ops = SessionOperations(manager)
    with trio.fail_after(TIMEOUT):
        slow = Step(text="slow reply", chunks=2, delay_ms=60_000)
        info = await manager.create(CreateParams(cwd=str(tmp_path), script=[slow]))
        live = await manager.session(info.session_id)
        started = await ops.run(
            RunParams(session_id=info.session_id, prompt="go", wait=False), None
        )
        assert isinstance(started, TurnRunning)
        assert not live.session.is_running()  # accepted, not begun
        await manager.shutdown(0)
    assert manager.loaded(info.session_id) is None
    events = _log_events(manager, info.session_id)
    assert "turn_aborted" in events
    assert events[-1] == "session_end"
