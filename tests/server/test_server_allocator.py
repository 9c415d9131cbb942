"""The allocator settings that keep robotad's resident memory near what it holds
(robotad/server/allocator.py), observed in a fresh interpreter: record-sized buffers freed
among long-lived small blocks stay resident under glibc's defaults, and go back to the kernel
once `tune` ran, or after a `trim`."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable

import pytest
import trio
import trio.testing

from robotad.server import allocator
from tests.robotad_process import PROCESS_TIMEOUT, child_environment

pytestmark = pytest.mark.skipif(
    platform.libc_ver()[0] != "glibc", reason="the settings apply to glibc only"
)

#: Frees 64 one-MiB buffers that were allocated between long-lived 64 KiB blocks (what a save
#: leaves behind: the record's encoding freed, the session's new messages kept), after one
#: earlier such buffer was freed (which, untuned, raises glibc's mmap threshold). Prints how
#: many KiB of resident memory freeing them gave back.
SCRIPT = """
import sys
from pathlib import Path
from robotad.server import allocator

def rss_kib():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])

mode = sys.argv[1]
if mode == "tuned":
    assert allocator.tune()
warm = b"w" * (4 << 20)
del warm
big, small = [], []
for _ in range(64):
    big.append(b"x" * (1 << 20))
    small.append(b"y" * 65536)
before = rss_kib()
big.clear()
if mode == "trimmed":
    allocator.trim()
print(before - rss_kib())
"""


def returned_kib(mode: str) -> int:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, mode],
        capture_output=True,
        text=True,
        check=True,
        env=child_environment(),
        timeout=PROCESS_TIMEOUT,
    )
    return int(done.stdout.strip())


@pytest.mark.skipif(
    any(name.startswith("MALLOC_") or name == "GLIBC_TUNABLES" for name in os.environ),
    reason="the environment tunes glibc already",
)
def test_untuned_glibc_keeps_freed_record_sized_buffers() -> None:
    """The premise the two tests below rest on (glibc's own behaviour, not ours): without the
    settings, freeing 64 MiB returns almost none, so returning it proves they work."""
    assert returned_kib("untuned") < 16 * 1024


def test_tuning_returns_freed_record_sized_buffers() -> None:
    assert returned_kib("tuned") > 56 * 1024


def test_trim_returns_freed_pages_inside_the_heap() -> None:
    assert returned_kib("trimmed") > 56 * 1024


async def test_the_periodic_trim_skips_idle_intervals(
    monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> None:
    """`trim_periodically` trims after an interval in which the daemon used CPU time and
    not after one in which it sat idle."""
    cpu = [0.0]
    trims: list[float] = []

    async def inline(function: Callable[[], object]) -> object:
        return function()

    def trim() -> bool:
        trims.append(trio.current_time())
        return True

    monkeypatch.setattr(time, "process_time", lambda: cpu[0])
    monkeypatch.setattr(allocator, "trim", trim)
    monkeypatch.setattr(trio.to_thread, "run_sync", inline)

    async def work_then_idle() -> None:
        await trio.sleep(7)
        cpu[0] += 1.0  # work between the ticks at 5 s and 10 s
        await trio.sleep(10)
        cpu[0] += 1.0  # work between 15 s and 20 s; none after

    start = trio.current_time()
    with trio.move_on_after(5 * allocator.TRIM_INTERVAL + 1):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(work_then_idle)
            await allocator.trim_periodically()
    assert [round(t - start) for t in trims] == [10, 20]  # not at the idle 5, 15, 25 s
