"""The tool-result spill store (G-195…G-201)."""

from __future__ import annotations

import os
import re
import stat
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import robotad.storage.fsio
from robotad.storage.sidecars import digest
from robotad.storage.spill import (
    INLINE_MAX_CHARS,
    SpillError,
    SpillNotFound,
    SpillStore,
    references_in,
    sweep_abandoned,
)
from tests.full_disk import fill, small_tmpfs

from .held_disk import HOLD_LIMIT, HeldDisk


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def runtime(tmp_path: Path) -> Path:
    return tmp_path / "run" / "robota"


def _store_dir(runtime: Path) -> Path:
    (folder,) = list(runtime.iterdir())
    return folder


def _results(folder: Path) -> list[str]:
    """The result files of a store's folder (its ``.owner`` lock file aside)."""
    return [name for name in os.listdir(folder) if name != ".owner"]


def test_references_are_opaque_random_tokens(runtime: Path) -> None:
    """G-195, G-196: "tool-result:" + a random token; the same content twice gives two
    references; no path, digest or payload byte appears in one."""
    payload = "secret-payload " * 100
    with SpillStore(runtime) as store:
        first, second = store.put_blocking(payload), store.put_blocking(payload)
        folder = _store_dir(runtime)
        assert first != second
        for reference in (first, second):
            assert re.fullmatch(r"tool-result:[A-Za-z0-9_-]{32}", reference)
            token = reference.removeprefix("tool-result:")
            assert token not in _results(folder)
            assert folder.name not in reference
            assert digest(payload.encode()) not in reference
            assert "secret" not in reference


def test_results_read_back_in_full_until_they_expire(runtime: Path) -> None:
    """G-200, G-201: full content while fresh; gone (file removed) once expired."""
    clock = _Clock()
    with SpillStore(runtime, ttl=60.0, clock=clock) as store:
        text = "line\n" * 50_000 + "ünïcödé"
        reference = store.put_blocking(text)
        clock.now += 59.0
        assert store.get(reference) == text
        clock.now += 2.0
        with pytest.raises(SpillNotFound):
            store.get(reference)
        assert _results(_store_dir(runtime)) == []


def test_the_hours_count_time_the_machine_spent_suspended(
    runtime: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """G-201: "24 hours at most" in wall time: the default clock counts a suspend, which the
    monotonic clock does not (a laptop's night would have stretched a result's life)."""
    boot = [1000.0]
    real = time.clock_gettime

    def clock_gettime(which: int) -> float:
        return boot[0] if which == time.CLOCK_BOOTTIME else real(which)

    monkeypatch.setattr(time, "clock_gettime", clock_gettime)
    with SpillStore(runtime, ttl=60.0) as store:
        reference = store.put_blocking("kept")
        boot[0] += 59.0
        assert store.get(reference) == "kept"
        boot[0] += 2.0  # suspended: no monotonic second passed
        with pytest.raises(SpillNotFound):
            store.get(reference)


def test_purge_removes_only_expired_results(runtime: Path) -> None:
    clock = _Clock()
    with SpillStore(runtime, ttl=10.0, clock=clock) as store:
        old = store.put_blocking("old")
        clock.now += 5.0
        young = store.put_blocking("young")
        clock.now += 6.0
        assert store.purge_expired() == 1
        assert store.get(young) == "young"
        with pytest.raises(SpillNotFound):
            store.get(old)
        assert len(_results(_store_dir(runtime))) == 1


def test_close_removes_everything(runtime: Path) -> None:
    """G-201: shutdown removes every result and the folder; the store refuses further use."""
    store = SpillStore(runtime)
    reference = store.put_blocking("x")
    store.close()
    store.close()
    assert list(runtime.iterdir()) == []
    with pytest.raises(SpillNotFound):
        store.get(reference)
    with pytest.raises(SpillError):
        store.put_blocking("y")


def test_folder_and_files_are_private_and_fresh(runtime: Path) -> None:
    """G-198: a mkdtemp folder 0700 in the runtime folder; each result an exclusively created
    0600 file, whatever the umask."""
    previous = os.umask(0)
    try:
        with SpillStore(runtime) as first, SpillStore(runtime):
            first.put_blocking("a")
            first.put_blocking("b")
            folders = sorted(runtime.iterdir())
            assert len(folders) == 2, "each store gets its own fresh folder"
            for folder in folders:
                assert stat.S_IMODE(folder.stat().st_mode) == 0o700
            files = [folder / name for folder in folders for name in _results(folder)]
            assert len(files) == 2
            for file in files:
                assert stat.S_IMODE(file.stat().st_mode) == 0o600
    finally:
        os.umask(previous)


def test_the_folder_prefix_is_product_neutral(runtime: Path) -> None:
    """G-199: the folder name does not contain the product's name."""
    with SpillStore(runtime):
        name = _store_dir(runtime).name
        assert "robota" not in name.lower()
        assert name.startswith("tr-")


def test_errors_and_repr_disclose_nothing(runtime: Path) -> None:
    """G-197: no path, digest or payload in errors, their causes, or repr."""
    payload = "sk-super-secret-output"
    store = SpillStore(runtime)
    reference = store.put_blocking(payload)
    folder = _store_dir(runtime)
    for name in _results(folder):
        (folder / name).unlink()
        (folder / name).mkdir()  # something unreadable where the result was
    messages: list[str] = [repr(store)]
    for attempt in (reference, "tool-result:nope"):
        with pytest.raises(SpillError) as caught:
            store.get(attempt)
        messages.append(str(caught.value))
        assert caught.value.__cause__ is None
        assert caught.value.__context__ is None or caught.value.__suppress_context__
    folder.chmod(0o500)
    try:
        if not os.access(folder, os.W_OK):
            with pytest.raises(SpillError) as caught:
                store.put_blocking(payload)
            messages.append(str(caught.value))
    finally:
        folder.chmod(0o700)
    store.close()
    blocked = runtime.parent / "blocked"
    blocked.write_text("a file where the runtime folder should be")
    with pytest.raises(SpillError) as caught:
        SpillStore(blocked)
    messages.append(str(caught.value))
    for message in messages:
        for forbidden in (
            str(runtime),
            str(blocked),
            folder.name,
            payload,
            digest(payload.encode()),
        ):
            assert forbidden not in message


def test_a_killed_daemons_spill_folder_is_swept_and_a_live_one_kept(runtime: Path) -> None:
    """A daemon killed before `close` left its folder (and the results in it) until reboot;
    the next daemon removes it at start, and never another daemon's live store."""
    live = SpillStore(runtime)
    live.put_blocking("still needed")
    dead = SpillStore(runtime)
    dead.put_blocking("secret tool output")
    dead_folder = dead._shelf.dir
    os.close(dead._shelf.owner_lock)  # what the kernel does when its daemon is killed
    old_unowned = runtime / "tr-older-robotad"
    old_unowned.mkdir(mode=0o700)
    (old_unowned / "result").write_text("x")
    os.utime(old_unowned, (0, 0))
    fresh_unowned = runtime / "tr-being-made"
    fresh_unowned.mkdir(mode=0o700)
    not_ours = runtime / "other-folder"
    not_ours.mkdir()
    try:
        assert sweep_abandoned(runtime) == 2
        assert not dead_folder.exists()
        assert not old_unowned.exists()
        assert fresh_unowned.exists()
        assert not_ours.exists()
        assert live.get(live.put_blocking("again")) == "again"
    finally:
        live.close()


def test_a_spill_folder_link_is_never_followed(runtime: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("kept")
    runtime.mkdir(parents=True)
    (runtime / "tr-link").symlink_to(elsewhere)
    assert sweep_abandoned(runtime) == 0
    assert (elsewhere / "keep.txt").read_text() == "kept"


def test_a_session_reads_only_the_results_it_owns(runtime: Path) -> None:
    """One store serves the daemon: a session's view reads back what it stored and what was
    shared with it (a fork), never another session's result; the store itself reads all."""
    with SpillStore(runtime) as store:
        mine, theirs = store.scoped("mine"), store.scoped("theirs")
        reference = mine.put_blocking("my result")
        assert mine.get(reference) == "my result"
        assert store.get(reference) == "my result"
        with pytest.raises(SpillNotFound, match="unknown or expired"):
            theirs.get(reference)
        assert store.share([reference, "tool-result:" + "x" * 32], "mine", "fork") == 1
        assert store.scoped("fork").get(reference) == "my result"
        assert store.share([reference], "nobody", "theirs") == 0
        with pytest.raises(SpillNotFound):
            theirs.get(reference)
        mine.close()  # a view never closes the store
        assert mine.get(reference) == "my result"


def test_a_released_session_takes_its_results_with_it(runtime: Path) -> None:
    """A deleted session's results are removed, files and all, unless a fork still owns
    them; the fork's go when it is released in turn."""
    with SpillStore(runtime) as store:
        source, fork = store.scoped("source"), store.scoped("fork")
        alone = source.put_blocking("only the source's")
        shared = source.put_blocking("the fork's too")
        store.share([shared], "source", "fork")
        assert store.release("source") == 1
        assert len(_results(_store_dir(runtime))) == 1
        with pytest.raises(SpillNotFound):
            store.get(alone)
        assert fork.get(shared) == "the fork's too"
        assert store.release("fork") == 1
        assert _results(_store_dir(runtime)) == []


def test_references_are_found_in_text() -> None:
    first, second = "tool-result:" + "a" * 32, "tool-result:" + "B-_" * 10 + "cd"
    text = f"{first}\n[image, 3 bytes, stored as {second}] tool-result:short"
    assert references_in(text) == [first, second]


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda data: data[: len(data) // 2], id="cut-short"),
        pytest.param(lambda data: data[: len(data) // 2 + 1], id="cut-in-a-character"),
        pytest.param(lambda data: data.replace("ü".encode(), b"\xff\xfe"), id="undecodable"),
        pytest.param(None, id="removed"),
    ],
)
def test_a_result_changed_on_disk_is_refused_never_shown_in_part(
    runtime: Path, damage: Any
) -> None:
    """G-200, G-197: a spill file cut short read back as the whole result (the model was told
    it saw all of it), one cut inside a character raised a decoding error quoting its bytes,
    and a removed one read as "unknown or expired". Each is now a SpillError saying what
    happened to the stored result, naming no path or payload."""
    payload = "secret-ünïcödé " * 10_000
    with SpillStore(runtime) as store:
        reference = store.put_blocking(payload)
        (name,) = _results(_store_dir(runtime))
        file = _store_dir(runtime) / name
        if damage is None:
            file.unlink()
        else:
            file.write_bytes(damage(file.read_bytes()))
        with pytest.raises(SpillError) as caught:
            store.get(reference)
    assert not isinstance(caught.value, SpillNotFound)
    message = str(caught.value)
    assert "removed" in message if damage is None else "changed" in message
    assert "secret" not in message
    assert name not in message


def test_results_past_the_budget_are_refused_and_room_comes_back(runtime: Path) -> None:
    """G-200: the store wrote results into the runtime folder — a tmpfs in memory, shared
    with the user's other programs — without limit for 24 hours, so a day of large results
    (an MCP server's screenshots) could fill it for everyone. A result that would take the
    store past its budget is now refused like a full disk (the caller shows it cut short),
    the ones stored read back in full, and room comes back as results expire or go."""
    clock = _Clock()
    with SpillStore(runtime, ttl=60.0, clock=clock, budget=1000) as store:
        view = store.scoped("one")
        first = view.put_blocking("a" * 600)
        with pytest.raises(SpillError) as caught:
            view.put_blocking("b" * 600)
        assert "budget" in str(caught.value)
        assert len(_results(_store_dir(runtime))) == 1
        second = store.scoped("two").put_blocking("c" * 400)
        assert view.get(first) == "a" * 600
        store.release("two")
        assert store.get(view.put_blocking("d" * 400)) == "d" * 400
        clock.now += 61.0
        assert store.get(store.put_blocking("e" * 1000)) == "e" * 1000
        with pytest.raises(SpillNotFound):
            store.get(second)


# -- writing off the event loop (architecture decision 54) --------------------------------------

#: A result long enough to be written on a worker thread.
LONG = "a long tool result\n" * 10_000


async def test_a_long_result_is_written_while_the_event_loop_serves(
    runtime: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A spilled result of up to 64 MiB was written (and encoded) on the event loop, and
    every session and client of the daemon waited for it. It is written on a worker thread
    now: while its write is held, the loop runs other tasks, which read, store and purge in
    the same store (its lock is not held across the write)."""
    assert len(LONG) > 4 * INLINE_MAX_CHARS
    with SpillStore(runtime) as store:
        earlier = store.put_blocking("stored before")
        disk = HeldDisk(monkeypatch)
        stored: list[str] = []

        async def spill_long() -> None:
            stored.append(await store.put(LONG))

        with trio.fail_after(HOLD_LIMIT):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(spill_long)
                await disk.entered.wait()
                served = trio.Event()

                async def serve_another() -> None:
                    served.set()

                nursery.start_soon(serve_another)  # another task runs while the write is held
                await served.wait()
                assert store.get(earlier) == "stored before"
                short = await store.put("a short result")  # on the loop: it takes the lock
                store.purge_expired()
                assert stored == [], "the long write finished while it was held"
                disk.release()
        assert store.get(stored[0]) == LONG
        assert store.get(short) == "a short result"
        assert (disk.writes, disk.on_loop) == (1, 1), "a short result is written on the loop"


async def test_a_write_under_way_when_its_caller_is_cancelled_ends_whole_and_referenced(
    runtime: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cancellation never cuts a spill's write: the caller gets the reference of a whole file
    and meets the cancellation at its next checkpoint. A cancellation before the write starts
    stores nothing and takes nothing of the budget."""
    with SpillStore(runtime, budget=len(LONG)) as store:
        disk = HeldDisk(monkeypatch)
        outcome: list[str] = []

        async def spill_long(task_status: trio.TaskStatus[trio.CancelScope]) -> None:
            with trio.CancelScope() as scope:
                task_status.started(scope)
                outcome.append(await store.put(LONG))
                await trio.lowlevel.checkpoint()
                outcome.append("not cancelled")

        with trio.fail_after(HOLD_LIMIT):
            async with trio.open_nursery() as nursery:
                scope = await nursery.start(spill_long)
                await disk.entered.wait()
                scope.cancel()
                await trio.testing.wait_all_tasks_blocked()
                disk.release()
        (reference,) = outcome
        assert store.get(reference) == LONG
        assert len(_results(_store_dir(runtime))) == 1
        assert store.discard(reference)
        assert _results(_store_dir(runtime)) == []

        with trio.CancelScope() as early:
            early.cancel()
            await store.put(LONG)
        assert early.cancelled_caught
        assert len(store) == 0
        assert _results(_store_dir(runtime)) == []
        assert store.get(await store.put(LONG)) == LONG  # the whole budget is still there


@pytest.mark.parametrize("room", [0, 100 * 1024], ids=["no-byte", "part-of-it"])
async def test_a_disk_that_refuses_a_result_leaves_nothing_of_it(tmp_path: Path, room: int) -> None:
    """A full runtime folder (a real tmpfs, filled) refuses a long result at its first byte
    or partway: `put` raises a SpillError naming the cause and no path, no file of it is
    left, and its bytes are given back to the budget: once there is room the next one is
    stored whole."""
    runtime = tmp_path / "run"
    runtime.mkdir()
    budget = 1024 * 1024
    with small_tmpfs(runtime), SpillStore(runtime, budget=budget) as store:
        folder = _store_dir(runtime)
        filler = fill(runtime)
        os.truncate(filler, filler.stat().st_size - room)
        text = "ü" * (200 * 1024)  # more than the room left, less than the budget
        with pytest.raises(SpillError) as refused:
            await store.put(text)
        message = str(refused.value)
        assert "ENOSPC" in message
        assert str(runtime) not in message
        assert folder.name not in message
        assert _results(folder) == []
        assert len(store) == 0
        filler.unlink()
        fits = "x" * budget  # the whole budget: nothing of the refused write is counted
        assert store.get(await store.put(fits)) == fits


async def test_a_result_read_on_a_worker_thread_holds_no_lock_the_loop_needs(
    runtime: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Read takes a stored result back on a worker thread; `get` held the store's lock while
    it read the file, so the loop's own uses of the store (a short result stored, the purge
    of expired ones) stopped it for as long as the read took. The lock now covers only the
    bookkeeping."""
    with SpillStore(runtime) as store:
        reference = store.put_blocking(LONG)
        reading, let_go = threading.Event(), threading.Event()
        read = robotad.storage.fsio.read_regular

        def held_read(path: Path) -> bytes | None:
            reading.set()
            assert let_go.wait(HOLD_LIMIT), "the held read was never let go"
            return read(path)

        monkeypatch.setattr(robotad.storage.fsio, "read_regular", held_read)
        with trio.fail_after(HOLD_LIMIT):
            async with trio.open_nursery() as nursery:
                read_back: list[str] = []

                async def read_it() -> None:
                    read_back.append(await trio.to_thread.run_sync(store.get, reference))

                nursery.start_soon(read_it)
                assert await trio.to_thread.run_sync(reading.wait, HOLD_LIMIT)
                short = await store.put("stored while the read waits")
                store.purge_expired()
                let_go.set()
        monkeypatch.undo()
        assert read_back == [LONG]
        assert store.get(short) == "stored while the read waits"
