"""A long tool result stored off the event loop, seen from a session (architecture decision 54).

The gate stores a result over the spill threshold on a worker thread. While the write is held
(`tests.storage.held_disk`) the loop goes on — the test's own task aborts the turn meanwhile —
and whatever happens to the turn, the spill store holds either the whole result and the
history its reference, or nothing of it: never a half-written file, never a reference to none.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from protocol.errors import TurnAborted
from robotad.agent.tool import ToolContext, ToolResult
from robotad.session.turn.tool_admission import DEFAULT_SPILL_THRESHOLD
from robotad.storage.spill import SpillStore
from tests.full_disk import fill, small_tmpfs
from tests.session.session_harness import LIMIT, ShoutArgs, ShoutTool, new_session, scripted
from tests.storage.held_disk import HeldDisk

#: Characters of Shout's result: well over the spill threshold.
SIZE = 200_000
WHOLE = ("ABC" * SIZE)[:SIZE]


def shout_then(*replies: str) -> list[dict[str, Any]]:
    return [{"toolCalls": [{"name": "Shout", "arguments": {"text": "abc"}}]}] + [
        {"text": reply} for reply in replies
    ]


def stored_files(runtime: Path) -> list[str]:
    return [
        name
        for folder in runtime.iterdir()
        if folder.is_dir()
        for name in os.listdir(folder)
        if name != ".owner"
    ]


async def test_an_abort_while_a_long_result_is_stored_keeps_it_whole_and_referenced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The call's body finished, so its result stands (decision 45): an abort that comes
    while the result is being written ends the turn aborted once the write is done, with the
    reference in history and the whole result behind it."""
    runtime = tmp_path / "run"
    with SpillStore(runtime) as spill:
        session = new_session(
            tmp_path,
            scripted(shout_then("never reached")),
            tools=[ShoutTool(size=SIZE)],
            permissions={"allow": ["Shout"]},
            spill=spill,
        )
        disk = HeldDisk(monkeypatch)
        outcome: list[BaseException] = []

        async def run() -> None:
            try:
                await session.run("big")
            except TurnAborted as exc:
                outcome.append(exc)

        with trio.fail_after(LIMIT):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(run)
                await disk.entered.wait()
                assert session.abort(), "the loop ran this task while the result was written"
                await trio.testing.wait_all_tasks_blocked()
                assert not outcome, "the turn ended before its result's write did"
                disk.release()
        assert len(outcome) == 1
        (tool,) = [m for m in session.get_history() if m.role == "tool"]
        assert tool.ok
        assert tool.metadata["spilled"] is True  # type: ignore[index]
        assert spill.get(tool.content or "") == WHOLE
        assert len(stored_files(runtime)) == 1


class ThreadedShout(ShoutTool):
    """Shout, whose body waits on a worker thread (as Read's and Grep's do) until `finish`:
    an abort meanwhile does not stop it, and it returns its whole result."""

    def __init__(self) -> None:
        super().__init__(size=SIZE)
        self.started = trio.Event()
        self.finish = threading.Event()

    async def run(self, arguments: ShoutArgs, ctx: ToolContext) -> ToolResult:
        self.started.set()
        await trio.to_thread.run_sync(self.finish.wait, LIMIT)
        return ToolResult(True, WHOLE)  # no checkpoint after the thread: the abort waits


async def test_a_body_that_finished_as_the_turn_was_aborted_keeps_its_long_result(
    tmp_path: Path,
) -> None:
    """A body on a worker thread finishes after an abort came, with the cancellation still
    to be delivered; its result stands (decision 45), also when it is long: the write is
    shielded, so the reference reaches history and the whole result the store, as it did
    when the write was made on the loop."""
    runtime = tmp_path / "run"
    with SpillStore(runtime) as spill:
        shout = ThreadedShout()
        session = new_session(
            tmp_path,
            scripted(shout_then("never reached")),
            tools=[shout],
            permissions={"allow": ["Shout"]},
            spill=spill,
        )
        with trio.fail_after(LIMIT):
            async with trio.open_nursery() as nursery:

                async def run() -> None:
                    with pytest.raises(TurnAborted):
                        await session.run("big")

                nursery.start_soon(run)
                await shout.started.wait()
                assert session.abort()
                shout.finish.set()
        (tool,) = [m for m in session.get_history() if m.role == "tool"]
        assert tool.ok, tool.content
        assert spill.get(tool.content or "") == WHOLE
        assert len(stored_files(runtime)) == 1


async def test_an_abort_of_a_direct_call_while_its_result_is_stored_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A direct invocation aborted before it settled answers "interrupted": the result it
    was storing when the abort came is removed again, since nothing will ever name it."""
    runtime = tmp_path / "run"
    with SpillStore(runtime) as spill:
        session = new_session(
            tmp_path, tools=[ShoutTool(size=SIZE)], permissions={"allow": ["Shout"]}, spill=spill
        )
        disk = HeldDisk(monkeypatch)
        results: list[Any] = []

        async def invoke() -> None:
            results.append(await session.invoke_tool("Shout", {"text": "abc"}))

        with trio.fail_after(LIMIT):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(invoke)
                await disk.entered.wait()
                assert session.abort()
                disk.release()
        (result,) = results
        assert not result.ok
        assert result.metadata.get("aborted") is True
        assert len(spill) == 0
        assert stored_files(runtime) == []


async def test_a_long_result_the_disk_refuses_is_shown_cut_short_saying_why(
    tmp_path: Path,
) -> None:
    """A full runtime folder (a real tmpfs, filled but for less than the result) refuses the
    write partway: the model reads the result's head with a note naming the refusal, the
    store keeps no part of it, and the turn goes on."""
    runtime = tmp_path / "run"
    runtime.mkdir()
    with small_tmpfs(runtime), SpillStore(runtime, budget=1024 * 1024) as spill:
        filler = fill(runtime)
        os.truncate(filler, filler.stat().st_size - 64 * 1024)
        session = new_session(
            tmp_path,
            scripted(shout_then("done")),
            tools=[ShoutTool(size=SIZE)],
            permissions={"allow": ["Shout"]},
            spill=spill,
        )
        with trio.fail_after(LIMIT):
            assert await session.run("big") == "done"
        (tool,) = [m for m in session.get_history() if m.role == "tool"]
        content = tool.content or ""
        assert tool.ok
        assert tool.metadata["spilled"] is False  # type: ignore[index]
        assert content.startswith(WHOLE[:DEFAULT_SPILL_THRESHOLD] + "\n[truncated: ")
        assert "could not be stored: cannot store a tool result (ENOSPC)" in content
        assert str(runtime) not in content
        assert stored_files(runtime) == []
        assert len(spill) == 0
