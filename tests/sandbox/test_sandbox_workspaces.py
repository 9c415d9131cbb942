"""Confined work on overlapping folders runs one piece at a time (`sandbox.workspaces`).

A command that runs while another's mounts are planned could swap a folder for a symlink in
between; a Write checked and then written could be led the same way. Two Bash calls (or a Bash
call and a Write) in overlapping folders therefore never overlap in time, while work in
folders apart runs side by side. A session's folder that a link now leads elsewhere than it
first did is refused.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import trio
import trio.testing

from robotad.sandbox import SandboxSupport
from robotad.sandbox.workspaces import hold, overlaps
from robotad.tools import BashTool, WriteTool
from tests.sandbox.conftest import Arena, confinement
from tests.tools.tool_calls import call


def test_folders_overlap_when_one_holds_the_other() -> None:
    assert overlaps(["/w"], ["/w"])
    assert overlaps(["/w"], ["/w/sub"])
    assert overlaps(["/x", "/w/sub"], ["/w"])
    assert not overlaps(["/w"], ["/w2", "/x"])
    assert not overlaps([], ["/w"])


async def test_overlapping_holds_wait_and_apart_ones_do_not() -> None:
    order: list[str] = []

    async def work(name: str, folders: list[str], gate: trio.Event) -> None:
        async with hold(folders):
            order.append(f"{name} in")
            await gate.wait()
            order.append(f"{name} out")

    first, second, apart = trio.Event(), trio.Event(), trio.Event()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(work, "first", ["/w"], first)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(work, "second", ["/w/sub"], second)
        nursery.start_soon(work, "apart", ["/x"], apart)
        await trio.testing.wait_all_tasks_blocked()
        assert order == ["first in", "apart in"]
        first.set()
        await trio.testing.wait_all_tasks_blocked()
        assert order == ["first in", "apart in", "first out", "second in"]
        second.set()
        apart.set()


async def _second_while_first_runs(
    first: Callable[[], Awaitable[None]], second: Callable[[], Awaitable[None]], started: Path
) -> None:
    """Start `first`, and `second` once `first`'s command has made `started`."""
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(first)
            while not await trio.Path(started).exists():
                await trio.sleep(0.01)
            nursery.start_soon(second)


async def test_a_second_command_in_the_same_folders_waits_for_the_first(
    sandbox_support: SandboxSupport, arena: Arena
) -> None:
    bash = BashTool(confinement(sandbox_support))
    results = {}

    async def first() -> None:
        command = "touch started && sleep 0.5 && touch finished"
        results["first"] = await call(bash, arena.ws, command=command)

    async def second() -> None:
        results["second"] = await call(bash, arena.ws, command="ls finished")

    await _second_while_first_runs(first, second, arena.ws / "started")
    assert results["first"].ok, results["first"].content
    assert results["second"].ok, results["second"].content  # it ran after the first


async def test_a_write_waits_for_a_command_in_the_same_folders(
    sandbox_support: SandboxSupport, arena: Arena
) -> None:
    session = confinement(sandbox_support)
    bash, write = BashTool(session), WriteTool(session)
    results = {}

    async def command() -> None:
        line = "touch started && sleep 0.5 && echo by-bash > note.txt"
        results["bash"] = await call(bash, arena.ws, command=line)

    async def written() -> None:
        results["write"] = await call(write, arena.ws, file_path="note.txt", content="by-write\n")

    await _second_while_first_runs(command, written, arena.ws / "started")
    assert results["bash"].ok, results["bash"].content
    assert results["write"].ok, results["write"].content
    assert (arena.ws / "note.txt").read_text() == "by-write\n"  # written after the command


async def test_a_session_folder_a_link_now_leads_elsewhere_is_refused(
    sandbox_support: SandboxSupport, arena: Arena
) -> None:
    (arena.base / "other").mkdir()
    link = arena.base / "project"
    link.symlink_to(arena.ws)
    bash = BashTool(confinement(sandbox_support))
    with trio.fail_after(30):
        assert (await call(bash, link, command="true")).ok
        link.unlink()
        link.symlink_to(arena.base / "other")
        refused = await call(bash, link, command="touch planted")
    assert not refused.ok
    assert "now leads to" in refused.content
    assert not (arena.base / "other" / "planted").exists()
