"""The allocator settings that keep robotad's resident memory near what it holds
(robotad/server/allocator.py), observed in a fresh interpreter: record-sized buffers freed
among long-lived small blocks stay resident under glibc's defaults, and go back to the kernel
once `tune` ran, or after a `trim`."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

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


def test_untuned_glibc_keeps_freed_record_sized_buffers() -> None:
    """The problem the settings address: without them, freeing 64 MiB returns almost none."""
    assert returned_kib("untuned") < 16 * 1024


def test_tuning_returns_freed_record_sized_buffers() -> None:
    assert returned_kib("tuned") > 56 * 1024


def test_trim_returns_freed_pages_inside_the_heap() -> None:
    assert returned_kib("trimmed") > 56 * 1024
