"""The bubblewrap command line of one sandboxed command, as a pure function of a `MountPlan`.

`bwrap_argv` builds the argv and touches nothing: the plan (which folders are writable, which
are re-bound read-only inside them) is worked out beforehand by `layout.plan_mounts`, and the
seccomp program travels as an already open descriptor number. What the argv asks of bwrap:

- every namespace of its own: a user namespace in which no capability survives
  (``--cap-drop ALL``; robotad running as root gets no root powers inside) and no further user
  namespace can be made (``--disable-userns``), and its own IPC, PID, UTS and cgroup
  namespaces; the network namespace too unless the plan allows the network, so even the
  machine's loopback is out of reach;
- ``--new-session`` (no ``TIOCSTI`` into a terminal) and ``--die-with-parent``;
- ``/`` read-only, fresh ``/dev`` and ``/proc``, a private ``/tmp``; then the writable folders
  bound read-write at their own paths, and the pinned folders inside them bound onto
  themselves, parents before children; then the read-only re-binds
  (``.git``, robota's folders), which lie inside the writable ones and so must come after;
  last the well-known secrets hidden: their folders as empty ``tmpfs``, their files as
  ``/dev/null``;
- the command started in the plan's working directory, under the seccomp filter.

With its own PID namespace the command is process 1's only child: when it exits, bwrap ends and
the kernel kills whatever it left running, so nothing started inside outlives the call.
"""

from __future__ import annotations

from collections.abc import Sequence

from msgspec import Struct

__all__ = ["MountPlan", "bwrap_argv"]


class MountPlan(Struct, frozen=True):
    """The file system and network of one sandboxed command. Paths are absolute and canonical
    (symlinks resolved) and exist; `read_only` entries lie inside (or over) `writable` ones."""

    cwd: str
    writable: tuple[str, ...] = ()
    #: Folders inside `writable` ones, bound onto themselves so they cannot be renamed or
    #: removed: those between a writable folder and a `read_only` entry inside it.
    pinned: tuple[str, ...] = ()
    read_only: tuple[str, ...] = ()
    network: bool = False
    #: Secret folders shown empty, and secret files shown as empty files (``/dev/null``).
    hidden_dirs: tuple[str, ...] = ()
    hidden_files: tuple[str, ...] = ()


def _outer_first(paths: Sequence[str]) -> list[str]:
    """`paths` without repeats, a folder before anything inside it."""
    return sorted(set(paths), key=lambda path: (path.rstrip("/").count("/"), path))


def bwrap_argv(
    bwrap: str, plan: MountPlan, command: Sequence[str], *, seccomp_fd: int | None
) -> list[str]:
    """The argv running `command` (an argv itself) inside the sandbox `plan` describes.

    `bwrap` is the path of the bubblewrap executable; `seccomp_fd` an open descriptor holding
    the filter program (`seccomp.filter_program`) that the child inherits, or None to run
    without one (only the availability probe's version check does)."""
    argv = [
        bwrap,
        "--unshare-user",
        "--disable-userns",
        "--cap-drop",
        "ALL",
        "--unshare-ipc",
        "--unshare-pid",
        "--unshare-uts",
        "--unshare-cgroup-try",
    ]
    if not plan.network:
        argv.append("--unshare-net")
    argv += ["--new-session", "--die-with-parent"]
    argv += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    for path in _outer_first([*plan.writable, *plan.pinned]):
        argv += ["--bind", path, path]
    for path in _outer_first(plan.read_only):
        argv += ["--ro-bind", path, path]
    for path in _outer_first(plan.hidden_dirs):
        argv += ["--tmpfs", path]
    for path in _outer_first(plan.hidden_files):
        argv += ["--ro-bind", "/dev/null", path]
    argv += ["--chdir", plan.cwd, "--setenv", "TMPDIR", "/tmp"]
    if seccomp_fd is not None:
        argv += ["--seccomp", str(seccomp_fd)]
    argv.append("--")
    argv.extend(command)
    return argv
