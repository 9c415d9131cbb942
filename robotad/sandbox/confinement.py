"""One session's sandbox as its tools use it: `Confinement`.

Bash asks it for the `Launch` of each command (`launch`): unconfined, the command's own argv;
confined, the bubblewrap argv of a freshly planned `MountPlan` plus the seccomp descriptor the
child must inherit. Write and Edit ask it whether a path may be written (`write_refusal`).

A confined session never runs a command unconfined: when the sandbox cannot be set up (the
support probe said no, bubblewrap vanished, the seccomp program cannot be made) `launch` raises
`SandboxUnavailable` with the reason, and Bash reports that as a failed result without running
anything.

Bash runs each command, and Write and Edit check and write each file, inside `exclusive`: no
other confined work on overlapping folders runs meanwhile (`workspaces`), so nothing can swap
a path between the check or plan and its use. The session's folder is pinned to where it led
the first time: if it later resolves elsewhere, the work is refused.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Final

import trio

from robotad.sandbox import workspaces
from robotad.sandbox.bwrap import MountPlan, bwrap_argv
from robotad.sandbox.layout import find_git_entries, held_read_only, is_within, plan_mounts
from robotad.sandbox.policy import UNCONFINED, SandboxPolicy
from robotad.sandbox.roots import held_reason, write_refusal
from robotad.sandbox.seccomp import UnsupportedArchitecture
from robotad.sandbox.support import SandboxProbe, seccomp_descriptor

__all__ = ["BWRAP_PARENT", "Confinement", "Launch", "SandboxUnavailable"]


class SandboxUnavailable(Exception):
    """A confined command cannot be started confined; `reason` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"not run: the sandbox cannot be set up: {reason}")
        self.reason = reason


#: What bwrap runs under: a shell that waits for it. bwrap's ``--die-with-parent`` ties it to
#: the *thread* that forked it, and trio forks in a worker thread that exits after 10 s idle:
#: bwrap started straight from robotad was killed (SIGKILL) 10 s into any sandboxed command.
#: This shell is single-threaded and lives as long as bwrap; ``exit`` after the command keeps
#: it from exec'ing bwrap in its place.
BWRAP_PARENT: Final = ("/bin/sh", "-c", '"$@"; exit "$?"', "robota-sandbox")


class Launch:
    """What to start: `argv`, with `pass_fds` inherited by the child. `close` (or leaving the
    ``with`` block) releases the descriptors once the child has started. A confined launch
    also knows its writable folders and the ``.git`` entries in them it keeps read-only."""

    def __init__(
        self,
        argv: list[str],
        pass_fds: tuple[int, ...] = (),
        *,
        writable: tuple[str, ...] = (),
        repositories: frozenset[str] = frozenset(),
        held: tuple[str, ...] = (),
    ) -> None:
        self.argv = argv
        self.pass_fds = pass_fds
        self.writable = writable
        self.repositories = repositories
        #: Why the command's folder is read-only though the mode is workspace-write, if it is.
        self.held = held

    def close(self) -> None:
        for fd in self.pass_fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.pass_fds = ()

    def __enter__(self) -> Launch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Confinement:
    """The sandbox of one session: its `policy`, the daemon's `probe` of what this machine
    supports, and robota's own folders (`protected`) to keep read-only. Unconfined by
    default."""

    def __init__(
        self,
        policy: SandboxPolicy = UNCONFINED,
        *,
        probe: SandboxProbe | None = None,
        protected: Sequence[str] = (),
    ) -> None:
        self.policy = policy
        self.probe = probe or SandboxProbe()
        self.protected = tuple(protected)
        #: Where each cwd spelling led the first time it was used.
        self._anchors: dict[str, str] = {}

    @property
    def confined(self) -> bool:
        return self.policy.confined

    @contextlib.asynccontextmanager
    async def exclusive(self, cwd: Path) -> AsyncIterator[None]:
        """Hold this session's writable folders for the block (see the module doc): no other
        confined work on overlapping folders runs meanwhile. Raises `SandboxUnavailable` when
        the session's folder resolves elsewhere than it first did. Unconfined: no-op."""
        if self.policy.mode != "workspace-write":
            yield
            return
        spelling = str(cwd)
        real = await trio.to_thread.run_sync(os.path.realpath, spelling)
        anchor = self._anchors.setdefault(spelling, real)
        if real != anchor:
            raise SandboxUnavailable(
                f"the session's folder {spelling} now leads to {real}, not to {anchor} as it "
                "did before (a link on its path was changed)"
            )
        async with workspaces.hold((anchor, *self.policy.writable_roots)):
            yield

    async def launch(self, command: Sequence[str], cwd: Path) -> Launch:
        """The `Launch` of `command` working in `cwd`. Raises `SandboxUnavailable`."""
        if not self.policy.confined:
            return Launch(list(command))
        support = await self.probe.current()
        bwrap = support.bwrap
        if bwrap is None:
            raise SandboxUnavailable(support.reason or "bwrap is not available")
        if not os.access(bwrap, os.X_OK):
            raise SandboxUnavailable(f"{bwrap} is no longer executable")
        plan, held = await trio.to_thread.run_sync(self._plan, str(cwd))
        try:
            fd = seccomp_descriptor()
        except (OSError, UnsupportedArchitecture) as exc:
            raise SandboxUnavailable(f"no seccomp filter: {exc}") from None
        return Launch(
            [*BWRAP_PARENT, *bwrap_argv(bwrap, plan, command, seccomp_fd=fd)],
            (fd,),
            writable=plan.writable,
            repositories=frozenset(e for e in plan.read_only if os.path.basename(e) == ".git"),
            held=held,
        )

    def _plan(self, cwd: str) -> tuple[MountPlan, tuple[str, ...]]:
        """The command's mounts, and why the session's folder is read-only when it is held
        back (`layout.held_read_only`). Blocking."""
        plan = plan_mounts(self.policy, cwd, self.protected)
        real = os.path.realpath(cwd)
        if any(is_within(real, folder) for folder in plan.writable):
            return plan, ()
        held = tuple(
            held_reason(folder, spelling)
            for folder, spelling in held_read_only(self.policy, cwd)
            if is_within(real, folder)
        )
        return plan, held[:1]

    async def repositories_made(self, launch: Launch) -> list[str]:
        """The ``.git`` entries in `launch`'s writable folders that were not there when it
        started: repositories its command made, which nothing protected while it ran (git
        runs their hooks and config for whoever uses git there later)."""
        if not launch.writable:
            return []

        def scan() -> list[str]:
            found = {entry for root in launch.writable for entry in find_git_entries(root)}
            return sorted(found - launch.repositories)

        return await trio.to_thread.run_sync(scan)

    async def write_refusal(self, path: str, cwd: Path) -> str | None:
        """Why a file tool may not write `path` (absolute) in this sandbox, or None."""
        if not self.policy.confined:
            return None
        return await trio.to_thread.run_sync(
            write_refusal, path, self.policy, str(cwd), self.protected
        )
