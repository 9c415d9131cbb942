"""What start-up made is exempted from the garbage collector's walks once the daemon serves
(`allocator.settle`), only in a process that is the daemon's alone: ``robotad run``."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

import robotad.cli
import robotad.log
import robotad.server.lifecycle
from robotad.server import allocator
from robotad.server.lifecycle import DaemonSettings, serve_daemon
from tests.robotad_process import PROCESS_TIMEOUT, child_environment
from tests.server.server_harness import IO_TIMEOUT, ProbeApp, short_tmpdir

#: Makes 10,000 objects in reference cycles, settles, then makes one more cycle and drops it.
#: Prints how many objects a full collection still walks, how many settling exempted, and
#: whether the cycle made afterwards was still freed.
SCRIPT = """
import gc, weakref
from robotad.server import allocator

class Node:
    pass

def cycle():
    a, b = Node(), Node()
    a.other, b.other = b, a
    return a

kept = [cycle() for _ in range(10_000)]
exempted = allocator.settle()
walked = len(gc.get_objects())
late = cycle()
gone = weakref.ref(late)
del late
gc.collect()
print(walked, exempted, gone() is None)
"""


def test_settle_exempts_what_exists_and_still_frees_later_cycles() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        capture_output=True,
        text=True,
        check=True,
        env=child_environment(),
        timeout=PROCESS_TIMEOUT,
    )
    walked, exempted, freed = done.stdout.split()
    assert int(exempted) > 20_000  # the nodes and their attribute dicts, modules besides
    assert int(walked) < 100
    assert freed == "True"


async def serve_once(settings: DaemonSettings) -> None:
    """Serve an in-process daemon until it is ready, then stop it."""

    @asynccontextmanager
    async def factory(context: Any) -> AsyncIterator[ProbeApp]:
        yield ProbeApp()

    with short_tmpdir() as base:
        settings = DaemonSettings(socket=base / "robotad.sock", settle_heap=settings.settle_heap)
        environ = {"ROBOTA_STATE_DIR": str(base / "state")}
        async with trio.open_nursery() as nursery:
            with trio.fail_after(IO_TIMEOUT):
                await nursery.start(
                    lambda task_status: serve_daemon(
                        settings, app_factory=factory, environ=environ, task_status=task_status
                    )
                )
            nursery.cancel_scope.cancel()


@pytest.mark.parametrize("settle_heap", [True, False])
async def test_the_daemon_settles_only_when_the_process_is_its_own(
    monkeypatch: pytest.MonkeyPatch, settle_heap: bool
) -> None:
    settled: list[bool] = []
    monkeypatch.setattr(allocator, "settle", lambda: settled.append(True) or 0)
    await serve_once(DaemonSettings(settle_heap=settle_heap))
    assert settled == ([True] if settle_heap else [])


def test_robotad_run_serves_with_the_heap_settled(monkeypatch: pytest.MonkeyPatch) -> None:
    given: list[DaemonSettings] = []

    async def capture(settings: DaemonSettings, **_: Any) -> None:
        given.append(settings)

    monkeypatch.setattr(robotad.server.lifecycle, "serve_daemon", capture)
    monkeypatch.setattr(robotad.log, "configure_logging", lambda level: None)
    options = {
        "socket": Path("/unused.sock"),
        "log_level": "info",
        "max_message_bytes": 1024,
        "event_buffer": 10,
        "ready_fd": None,
        "trace": False,
    }
    robotad.cli._serve(options)
    assert [settings.settle_heap for settings in given] == [True]
