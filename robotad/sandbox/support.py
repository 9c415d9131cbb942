"""Whether this machine can sandbox commands, found out by trying (`probe_sandbox`).

robotad probes at start, beside serving, and logs the answer; ``session/create`` with a
sandbox waits for that answer, probes again when it was no (the user may have installed
bubblewrap since), and refuses with the reason while it stays no. The probe looks for
``bwrap`` on robotad's own PATH and a seccomp table for the machine, then runs
``/bin/sh -c :`` inside a read-only sandbox built by the very argv builder every command
uses — so "available" means the full set of flags works here (user namespaces allowed, a
bwrap new enough for ``--disable-userns``), not merely that a binary exists. When the trial
fails, the answer adds what to do where the cause is known (`remedy`): the kernel switches that
forbid user namespaces (Ubuntu's AppArmor restriction above all), a bubblewrap too old.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Final

import trio
from msgspec import Struct

from robotad.sandbox.bwrap import MountPlan, bwrap_argv
from robotad.sandbox.seccomp import UnsupportedArchitecture, filter_program, native_arch

__all__ = [
    "PROBE_TIMEOUT_S",
    "SandboxProbe",
    "SandboxSupport",
    "probe_sandbox",
    "remedy",
    "seccomp_descriptor",
]

PROBE_TIMEOUT_S: Final = 10.0
_FIRST_FD: Final = 10

log = logging.getLogger("robotad.sandbox")


class SandboxSupport(Struct, frozen=True):
    """The probe's answer: `bwrap` (its path) when available, else `reason` saying why not."""

    bwrap: str | None = None
    version: str | None = None
    reason: str | None = None

    @property
    def available(self) -> bool:
        return self.bwrap is not None

    def describe(self) -> str:
        """One line for the daemon log."""
        if self.bwrap is not None:
            return f"sandbox available: {self.version or 'bwrap'} at {self.bwrap}"
        return f"sandbox unavailable: {self.reason}"


class SandboxProbe:
    """The daemon's standing answer: `current()` probes the first time and again whenever the
    last answer was no, and keeps a yes (a vanished ``bwrap`` is caught when a command starts).
    Every fresh answer is logged (``robotad.sandbox``). `path` is the search path for
    ``bwrap`` (default: robotad's PATH); `known` seeds the answer (tests)."""

    def __init__(self, path: str | None = None, *, known: SandboxSupport | None = None) -> None:
        self.path = path
        self.latest = known
        self._lock = trio.Lock()

    async def current(self) -> SandboxSupport:
        async with self._lock:
            if self.latest is None or not self.latest.available:
                self.latest = await probe_sandbox(self.path)
                log.info("%s", self.latest.describe())
            return self.latest


def seccomp_descriptor() -> int:
    """A new descriptor (close-on-exec, the caller closes it) positioned at the start of this
    machine's seccomp program. Raises `OSError`, or `UnsupportedArchitecture`."""
    arch = native_arch()
    if arch is None:
        raise UnsupportedArchitecture(f"no seccomp filter is known for {os.uname().machine}")
    program = filter_program(arch)
    memfd = os.memfd_create("robota-seccomp", os.MFD_CLOEXEC)
    try:
        os.write(memfd, program)
        os.lseek(memfd, 0, os.SEEK_SET)
        # Above the low numbers a launcher may claim in the child (Bash's tether takes 3).
        return fcntl.fcntl(memfd, fcntl.F_DUPFD_CLOEXEC, _FIRST_FD)
    finally:
        os.close(memfd)


#: Reads one kernel switch under /proc/sys (``kernel.unprivileged_userns_clone``…): its
#: value, or None where this kernel has no such switch or it cannot be read.
SysctlReader = Callable[[str], str | None]


def read_sysctl(name: str) -> str | None:
    try:
        return (Path("/proc/sys") / name.replace(".", "/")).read_text().strip()
    except OSError:
        return None


def remedy(complaint: str, sysctl: SysctlReader = read_sysctl) -> str | None:
    """What a user can do about bwrap's `complaint`, when its cause is known; else None.

    A namespace bwrap may not make is nearly always one of three kernel switches, read to name
    the one that is set: Ubuntu 23.10+ (and Debian 13) restrict unprivileged user namespaces
    through AppArmor, older Debian kernels have ``unprivileged_userns_clone``, and
    ``user.max_user_namespaces`` 0 forbids them everywhere."""
    said = complaint.lower()
    if "--disable-userns" in said or "unknown option" in said:
        return "this bubblewrap is too old: robota needs 0.8.0 or later (--disable-userns)"
    namespace_words = ("uid map", "namespace", "operation not permitted", "permission denied")
    if not any(word in said for word in namespace_words):
        return None
    if sysctl("kernel.apparmor_restrict_unprivileged_userns") == "1":
        return (
            "AppArmor forbids unprivileged user namespaces here (Ubuntu 23.10 and later): give "
            "bwrap an AppArmor profile that allows them, or set "
            "kernel.apparmor_restrict_unprivileged_userns=0 (README: Troubleshooting)"
        )
    if sysctl("kernel.unprivileged_userns_clone") == "0":
        return (
            "user namespaces are off for unprivileged users: set kernel.unprivileged_userns_clone=1"
        )
    if sysctl("user.max_user_namespaces") == "0":
        return "user namespaces are disabled: set user.max_user_namespaces above 0"
    return None


async def probe_sandbox(
    path: str | None = None, *, sysctl: SysctlReader = read_sysctl
) -> SandboxSupport:
    """Find out whether commands can be sandboxed here. `path` is the search path for
    ``bwrap`` (default: robotad's PATH). Never raises for an unusable sandbox: the answer
    says why, and what to do where that is known (`remedy`)."""
    bwrap = shutil.which("bwrap", path=path)
    if bwrap is None:
        return SandboxSupport(
            reason="bwrap (the Debian package bubblewrap) is not on robotad's PATH"
        )
    if native_arch() is None:
        return SandboxSupport(reason=f"no seccomp filter is known for {os.uname().machine}")
    try:
        with trio.fail_after(PROBE_TIMEOUT_S):
            version = await _version(bwrap)
            failure = await _trial(bwrap)
    except trio.TooSlowError:
        return SandboxSupport(reason=f"{bwrap} did not answer within {PROBE_TIMEOUT_S:g} s")
    except OSError as exc:
        return SandboxSupport(reason=f"cannot run {bwrap}: {exc.strerror or exc}")
    if failure is not None:
        reason = f"{bwrap} cannot set up the sandbox here: {failure}"
        if (advice := remedy(failure, sysctl)) is not None:
            reason = f"{reason}; {advice}"
        return SandboxSupport(reason=reason)
    return SandboxSupport(bwrap=bwrap, version=version)


async def _version(bwrap: str) -> str | None:
    done = await trio.run_process([bwrap, "--version"], capture_stdout=True, check=False)
    text = done.stdout.decode("utf-8", "replace").strip()
    return text or None


async def _trial(bwrap: str) -> str | None:
    """None when a trivial command runs in the sandbox, else bwrap's complaint."""
    fd = seccomp_descriptor()
    try:
        argv = bwrap_argv(bwrap, MountPlan(cwd="/"), ["/bin/sh", "-c", ":"], seccomp_fd=fd)
        done = await trio.run_process(
            argv,
            stdin=subprocess.DEVNULL,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            pass_fds=(fd,),
        )
    finally:
        os.close(fd)
    if done.returncode == 0:
        return None
    said = done.stderr.decode("utf-8", "replace").strip().splitlines()
    return said[-1] if said else f"exit status {done.returncode}"
