"""One session driven from several clients at once, in process: what a second client's
request does to the first one's turn, approval or save (the wire is covered by the other
test_daemon_* modules)."""

from __future__ import annotations

import errno
import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
import trio
import trio.testing

from protocol.errors import NotAllowed
from protocol.methods import CreateParams, ForkParams, RunParams, Step
from protocol.shapes import Message, TurnCompleted
from robotad.config import Config
from robotad.daemon import live as live_module
from robotad.daemon.assembly import SessionAssembler
from robotad.daemon.manager import SessionManager
from robotad.daemon.operations import SessionOperations
from robotad.storage.failure import StorageError
from robotad.storage.record import SessionRecord
from robotad.storage.spill import SpillStore

TIMEOUT = 20.0
T = TypeVar("T")


def stored(manager: SessionManager, session_id: str) -> dict[str, Any]:
    record: dict[str, Any] = json.loads(manager.store.path_for(session_id).read_bytes())["record"]
    return record


async def test_a_settings_save_during_a_turn_never_lands_over_the_turns_save(
    manager: SessionManager, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """G-010 with a second client: ``session/setPermissionMode`` while another client's turn
    runs saves a snapshot taken mid-turn. Its write went to a worker thread beside the turn's
    own save, and whichever thread wrote last won: the record lost the reply the turn had
    already been answered "completed" with. A session's saves now land in the order their
    snapshots were taken."""
    ops = SessionOperations(manager)
    reply = "slow reply"
    go = threading.Event()  # lets the mid-turn settings save write
    turn_save_started = False
    real_run_blocking = live_module.run_blocking

    def holds_reply(snapshot: Any) -> bool:
        return any(message.content == reply for message in snapshot.messages)

    async def ordered_writes(function: Callable[..., T], *args: Any) -> T:
        nonlocal turn_save_started
        if getattr(function, "__name__", "") != "_save":  # not a save (a digest, say)
            return await real_run_blocking(function, *args)
        if holds_reply(args[0]):  # the turn's save: the held settings save may go once it wrote
            turn_save_started = True

            def write_then_go() -> T:
                try:
                    return function(*args)
                finally:
                    go.set()

            return await real_run_blocking(write_then_go)

        def wait_then_write() -> T:
            go.wait(TIMEOUT)
            return function(*args)

        return await real_run_blocking(wait_then_write)

    monkeypatch.setattr(live_module, "run_blocking", ordered_writes)
    with trio.fail_after(TIMEOUT):
        info = await manager.create(
            CreateParams(cwd=str(tmp_path), script=[Step(text=reply, chunks=4, delay_ms=20)])
        )
        sid = info.session_id
        live = await manager.session(sid)
        streaming = trio.Event()

        async def watch(event: dict[str, Any]) -> None:
            if event["type"] == "text_delta":
                streaming.set()

        live.hub.subscribe("watcher", watch)
        turn_save_called = trio.Event()
        writer_save = live.writer.save

        async def noted_save(snapshot: Any) -> None:
            if any(message.content == reply for message in snapshot.messages):
                turn_save_called.set()
            await writer_save(snapshot)

        live.writer.save = noted_save  # type: ignore[method-assign]
        started = await ops.run(RunParams(session_id=sid, prompt="go", wait=False), None)
        await streaming.wait()
        async with trio.open_nursery() as clients:
            clients.start_soon(ops.set_permission_mode, sid, "acceptEdits")
            await turn_save_called.wait()
            await trio.testing.wait_all_tasks_blocked()
            if not turn_save_started:  # it waits behind the settings save: let that write
                go.set()
            outcome = await ops.run(
                RunParams(session_id=sid, prompt="go", turn_id=started.turn_id), None
            )
    assert isinstance(outcome, TurnCompleted)
    record = stored(manager, sid)
    assert [m["content"] for m in record["messages"]] == ["go", reply]
    assert record["settings"]["permissionMode"] == "acceptEdits"


class _Connection:
    """A subscriber standing for one client connection: the types of the events it got."""

    def __init__(self) -> None:
        self.closed = False
        self.types: list[str] = []
        self._arrived = trio.Event()

    async def notify(self, method: str, params: Any = None, *, checkpoint: bool = True) -> None:
        self.types.append(params["type"])
        self._arrived.set()
        self._arrived = trio.Event()

    async def wait_for(self, *types: str) -> None:
        while not set(types) & set(self.types):
            await self._arrived.wait()


async def test_a_subscription_during_an_idle_unload_follows_the_reloaded_session(
    manager: SessionManager, tmp_path: Path
) -> None:
    """An idle unload is not a close (PROTOCOL §5: the next use reloads the session
    transparently). A ``session/subscribe`` arriving while one was under way (its SessionEnd
    running) was attached to the stream being closed: the client got ``session_closed`` for a
    session nobody closed, and the next client's turn never reached it. It now waits for the
    unload and subscribes to the session loaded again."""
    ops = SessionOperations(manager)
    with trio.fail_after(TIMEOUT):
        info = await manager.create(CreateParams(cwd=str(tmp_path), script=[Step(text="later")]))
        sid = info.session_id
        live = await manager.session(sid)
        gate, shutdown = trio.Event(), live.session.shutdown

        async def held_shutdown() -> None:
            await gate.wait()
            await shutdown()

        live.session.shutdown = held_shutdown  # type: ignore[method-assign]
        watcher = _Connection()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(manager._unload_if_idle, sid)
            await trio.testing.wait_all_tasks_blocked()
            assert live.closing  # the unload holds at its SessionEnd
            nursery.start_soon(ops.subscribe, sid, watcher, None)
            await trio.testing.wait_all_tasks_blocked()
            gate.set()
        outcome = await ops.run(RunParams(session_id=sid, prompt="go"), None)
        await watcher.wait_for("turn_finished", "session_closed")
    assert isinstance(outcome, TurnCompleted)
    assert manager.loaded(sid) is not live
    assert "session_closed" not in watcher.types
    assert watcher.types[0] == "turn_started"


async def test_a_refused_settings_save_never_takes_back_another_clients_change(
    manager: SessionManager, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two clients change one session's permission mode at once and the first one's save is
    refused (a full disk). Putting the mode back used to restore what it was before the first
    change, over the second client's change, which had been saved and answered: the session
    then ran in the mode nobody chose while its record and the second client said otherwise.
    Settings changes of one session now take turns, each undo restoring only its own."""
    ops = SessionOperations(manager)
    refuse = threading.Event()
    store_save = manager.store.save

    def save(record: SessionRecord, *, messages: bytes | bytearray | None = None) -> SessionRecord:
        if record.settings.permission_mode == "acceptEdits":
            refuse.wait(TIMEOUT)
            raise StorageError(f"sessions/{sid}.json", "no space left on device", errno.ENOSPC)
        return store_save(record, messages=messages)

    monkeypatch.setattr(manager.store, "save", save)
    told: dict[str, object] = {}

    async def change(mode: str) -> None:
        try:
            told[mode] = await ops.set_permission_mode(sid, mode)
        except StorageError as exc:  # the edge answers it StorageFailed
            told[mode] = exc

    with trio.fail_after(TIMEOUT):
        sid = (await manager.create(CreateParams(cwd=str(tmp_path)))).session_id
        live = await manager.session(sid)
        async with trio.open_nursery() as clients:
            clients.start_soon(change, "acceptEdits")
            await trio.testing.wait_all_tasks_blocked()  # its save is under way
            clients.start_soon(change, "plan")
            await trio.testing.wait_all_tasks_blocked()
            refuse.set()
    assert isinstance(told["acceptEdits"], StorageError)
    assert told["plan"] == "plan"
    assert live.session.permission_mode == "plan"
    assert stored(manager, sid)["settings"]["permissionMode"] == "plan"


async def test_a_source_deleted_while_its_fork_is_made_leaves_the_fork_its_results(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    """``session/fork`` copies the source's history, then writes the fork and makes it an owner
    of the spilled tool results that history names. A second client could close and delete
    the source in between (a fork holds no claim on it): the delete released the source's
    results, the fork then found nothing to share, and its history named results nobody
    could read. A delete is now refused (NotAllowed, as for a loaded session) while a fork
    of that session is being made."""
    state = tmp_path / "state"
    with SpillStore(tmp_path / "run") as spill:
        assembler = SessionAssembler.from_config(Config(), state_dir=state, spill=spill)
        manager = SessionManager(state_dir=state, assembler=assembler, nursery=nursery)
        await nursery.start(manager.run)
        ops = SessionOperations(manager)
        with trio.fail_after(TIMEOUT):
            sid = (await manager.create(CreateParams(cwd=str(tmp_path)))).session_id
            reference = await spill.scoped(sid).put("a long tool result")
            source = await manager.session(sid)
            source.session.inject_message(Message.user(f"see {reference}"))
            gate, add = trio.Event(), manager.add

            async def held_add(*args: Any, **kwargs: Any) -> Any:
                await gate.wait()
                return await add(*args, **kwargs)

            manager.add = held_add  # type: ignore[method-assign]
            forked: list[str] = []
            refused: list[Exception] = []

            async def fork() -> None:
                forked.append((await ops.fork(ForkParams(session_id=sid))).session_id)

            async def close_and_delete() -> None:
                await manager.close(sid)
                try:
                    await manager.delete(sid)
                except NotAllowed as exc:
                    refused.append(exc)

            async with trio.open_nursery() as clients:
                clients.start_soon(fork)
                await trio.testing.wait_all_tasks_blocked()  # the fork waits to be written
                clients.start_soon(close_and_delete)
                await trio.testing.wait_all_tasks_blocked()
                gate.set()
            await manager.shutdown(0)
        assert refused
        assert spill.scoped(forked[0]).get(reference) == "a long tool result"
