"""A real full disk for tests and the soak: a small tmpfs mounted as a state folder, filled.

`small_tmpfs` mounts ``tmpfs -o size=…`` on a folder (root only: it skips the test, saying why,
where mounting is not allowed) and unmounts it afterwards. `fill` writes a filler file until the
file system refuses even one more byte, so the next write of any size fails with ENOSPC;
removing the file it returns gives the space back. `remount_read_only` makes such a tmpfs
read-only, as a disk the kernel remounted after an error (or a read-only bind mount) is.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

__all__ = ["fill", "mount_refusal", "remount_read_only", "small_tmpfs", "unmount"]

#: How long mount/umount may take.
MOUNT_TIMEOUT = 30


def mount_refusal(where: Path, size: str = "4m") -> str | None:
    """Mount a tmpfs of `size` on `where`; None when mounted, else why it could not be."""
    if os.geteuid() != 0:
        return "mounting a tmpfs needs root"
    try:
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(where)],
            capture_output=True,
            text=True,
            timeout=MOUNT_TIMEOUT,
            check=False,
        )
    except FileNotFoundError:
        return "no mount command"
    if done.returncode != 0:
        return f"mount is not allowed here: {done.stderr.strip() or done.returncode}"
    return None


@contextlib.contextmanager
def small_tmpfs(where: Path, size: str = "4m") -> Iterator[Path]:
    """`where` as a fresh tmpfs of `size` for the block (the test skips when that is not
    possible), unmounted afterwards."""
    refused = mount_refusal(where, size)
    if refused is not None:
        pytest.skip(refused)
    try:
        yield where
    finally:
        unmount(where)


def unmount(where: Path) -> None:
    """Unmount what `mount_refusal` mounted on `where` (lazily: nothing may hold it)."""
    subprocess.run(["umount", "-l", str(where)], timeout=MOUNT_TIMEOUT, check=False)


def remount_read_only(where: Path) -> None:
    """Make the tmpfs `small_tmpfs` mounted on `where` read-only, what it holds kept."""
    subprocess.run(["mount", "-o", "remount,ro", str(where)], timeout=MOUNT_TIMEOUT, check=True)


def fill(folder: Path) -> Path:
    """Fill `folder`'s file system to the last byte with one file; return that file."""
    filler = folder / "filler.bin"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        chunk = 1 << 20
        while chunk:
            try:
                os.write(fd, b"\0" * chunk)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                chunk //= 2
    finally:
        os.close(fd)
    return filler
