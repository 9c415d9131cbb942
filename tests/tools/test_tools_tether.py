"""A command robotad starts dies with robotad: the tether (robotad.tools.tether).

robotad's death is what closes the tether's write end; these tests close it the same way the
kernel does (`tether.release` before the command ended, or a real process exiting) and watch
the whole process group go, grandchildren included, within a bound."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import trio

from robotad.tools import tether
from robotad.tools.process_group import terminate_process_tree
from tests.tools.tool_calls import is_running

#: How long a killed group may take to disappear (a bound, not a readiness sleep).
GONE_WITHIN = 10.0
TREE = "echo $$ > pids; sleep 1000 & echo $! >> pids; echo go > ready; wait"


async def _wait_for(path: Path) -> None:
    while not path.exists() or not path.read_text().endswith("\n"):
        await trio.sleep(0.02)


async def _gone(pids: list[int]) -> None:
    while any(is_running(pid) for pid in pids):
        await trio.sleep(0.02)


async def test_closing_the_tether_kills_the_whole_group(tmp_path: Path) -> None:
    with trio.fail_after(GONE_WITHIN):
        process = await tether.open_tethered_process(
            ["/bin/sh", "-c", TREE], cwd=tmp_path, stdin=subprocess.DEVNULL
        )
        try:
            assert tether.tethered(process.pid)
            await _wait_for(tmp_path / "ready")
            pids = [int(p) for p in (tmp_path / "pids").read_text().split()]
            assert pids[0] == process.pid  # the command is exec'd: $$ is the leader
            assert all(is_running(pid) for pid in pids)
            tether.release(process.pid)  # what robotad's death does to the write end
            await process.wait()
            await _gone(pids)
        finally:
            with trio.CancelScope(shield=True):
                await terminate_process_tree(process)
    assert not tether.tethered(process.pid)


async def test_a_command_outlives_nothing_but_its_tether(tmp_path: Path) -> None:
    """Ending the command normally releases the tether; a tethered command that is still
    running is not killed by anything else (it answers after the watcher started)."""
    with trio.fail_after(GONE_WITHIN):
        process = await tether.open_tethered_process(
            ["/bin/sh", "-c", "read line; echo got $line"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert process.stdin is not None
        assert process.stdout is not None
        await process.stdin.send_all(b"hello\n")
        output = await process.stdout.receive_some(100)
        await process.wait()
        await terminate_process_tree(process)
    assert output == b"got hello\n"
    assert process.returncode == 0
    assert not tether.tethered(process.pid)


def test_a_killed_owner_takes_its_commands_with_it(tmp_path: Path) -> None:
    """A real owner process starts a tethered tree, then dies by SIGKILL: the tree goes."""
    owner = textwrap.dedent(
        f"""
        import os, signal, subprocess, trio
        from robotad.tools import tether

        async def main():
            await tether.open_tethered_process(
                ["/bin/sh", "-c", {TREE!r}], cwd={str(tmp_path)!r}, stdin=subprocess.DEVNULL
            )
            while not os.path.exists({str(tmp_path / "ready")!r}):
                await trio.sleep(0.02)
            os.kill(os.getpid(), signal.SIGKILL)

        trio.run(main)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", owner], timeout=GONE_WITHIN, capture_output=True, check=False
    )
    assert done.returncode == -9, done.stderr
    pids = [int(p) for p in (tmp_path / "pids").read_text().split()]
    trio.run(lambda: _bounded(_gone(pids)))
    assert not any(is_running(pid) for pid in pids)


async def _bounded(waiting: object) -> None:
    with trio.fail_after(GONE_WITHIN):
        await waiting  # type: ignore[misc]


#: A tree with a child in a process group of its own (as GNU ``timeout`` or ``set -m`` make):
#: the child writes its pid and "ready" only once it has left the command's group.
OWN_GROUP = (
    "echo $$ > pids; "
    f"{sys.executable} -c 'import os, time; os.setpgid(0, 0); "
    'open("pids", "a").write(f"{os.getpid()}\\n"); open("ready", "w").write("go\\n"); '
    "time.sleep(1000)' & wait"
)


def test_a_killed_owner_takes_a_child_in_its_own_group_too(tmp_path: Path) -> None:
    """The watcher killed the command's process group only: a child that had moved to a group
    of its own outlived a SIGKILLed robotad. It kills the command's session now, with the
    system's pkill: not one the command's PATH would find (here a planted one in its cwd)."""
    planted = tmp_path / "pkill"
    planted.write_text(f"#!/bin/sh\necho ran > {tmp_path}/planted-ran\n")
    planted.chmod(0o755)
    owner = textwrap.dedent(
        f"""
        import os, signal, subprocess, trio
        from robotad.tools import tether

        async def main():
            await tether.open_tethered_process(
                ["/bin/sh", "-c", {OWN_GROUP!r}],
                cwd={str(tmp_path)!r},
                stdin=subprocess.DEVNULL,
                env={{"PATH": {str(tmp_path)!r} + ":"}},
            )
            while not os.path.exists({str(tmp_path / "ready")!r}):
                await trio.sleep(0.02)
            os.kill(os.getpid(), signal.SIGKILL)

        trio.run(main)
        """
    )
    pids: list[int] = []
    try:
        done = subprocess.run(
            [sys.executable, "-c", owner], timeout=GONE_WITHIN, capture_output=True, check=False
        )
        assert done.returncode == -9, done.stderr
        pids = [int(p) for p in (tmp_path / "pids").read_text().split()]
        assert len(pids) == 2
        trio.run(lambda: _bounded(_gone(pids)))
    finally:
        _kill(pids)
    assert not (tmp_path / "planted-ran").exists()


async def test_ending_a_command_ends_a_child_in_its_own_group(tmp_path: Path) -> None:
    """`terminate_process_tree` stops the command's whole session, not only its group: a
    background job of its own group (``timeout 300 sleep …  &``) was left running."""
    with trio.fail_after(GONE_WITHIN):
        process = await tether.open_tethered_process(
            ["/bin/sh", "-c", OWN_GROUP.replace("& wait", "& exit 0")],
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
        )
        await _wait_for(tmp_path / "ready")
        await process.wait()
        pids = [int(p) for p in (tmp_path / "pids").read_text().split()]
        try:
            assert is_running(pids[1])
            await terminate_process_tree(process)
            await _gone(pids)
        finally:
            _kill(pids)


async def test_the_watcher_is_no_child_of_the_command(tmp_path: Path) -> None:
    """A command waiting for its own children waited for the watcher (until its timeout)."""
    with trio.fail_after(GONE_WITHIN):
        process = await tether.open_tethered_process(
            [
                sys.executable,
                "-c",
                "import os\ntry:\n os.wait()\nexcept ChildProcessError:\n print('none')",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
        )
        assert process.stdout is not None
        output = b""
        while chunk := await process.stdout.receive_some(100):  # to the end: a print may
            output += chunk  # arrive in pieces (PYTHONUNBUFFERED)
        await process.wait()
        await terminate_process_tree(process)
    assert output == b"none\n"


def _kill(pids: list[int]) -> None:
    """Leave nothing running when a test fails half-way."""
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
