"""Ending a command's whole process tree: the command, its children and their children.

A command is started as the leader of a new session and process group
(``start_new_session=True``, or tethered to robotad by `robotad.tools.tether`), so everything
it forks stays in that session, and in that group unless it moves to a group of its own
(``setpgid``: GNU ``timeout``, ``set -m`` job control). `terminate_process_tree` asks the
group, every other process of the session and every descendant still traceable through its
parent links to stop (SIGTERM), waits up to a grace period for them to go, kills what remains
(SIGKILL), reaps the leader and releases its tether.

On Linux, liveness is read from ``/proc`` so that an exited process nobody has reaped yet (a
zombie, common when the daemon's init does not reap orphans) does not count as running and
hold the call for the whole grace period. Elsewhere it falls back to probing the group with
signal 0. A process that left the session (``setsid``) *and* lost its parent link (a dead
parent) cannot be found by anyone and is out of reach, as intended for a deliberately detached
job.
"""

from __future__ import annotations

import contextlib
import os
import signal

import trio

from robotad.tools import tether

__all__ = ["KILL_GRACE_S", "kill_session", "terminate_process_tree"]

KILL_GRACE_S = 2.0
"""How long stopped processes get between SIGTERM and SIGKILL."""

_POLL_INTERVAL_S = 0.02


async def terminate_process_tree(process: trio.Process, *, grace: float = KILL_GRACE_S) -> None:
    """Stop `process` (a group leader), its process group and its descendants, then reap it.

    Idempotent, and cheap when everything has already exited. Call it inside a shielded cancel
    scope when the caller is being cancelled: it waits at most about twice `grace` (once for
    SIGTERM to work, once for SIGKILL to finish) and returns only once `process` itself has
    been reaped.
    """
    group = process.pid
    known = _tree(group, process)
    if known:
        _signal_all(known, group, signal.SIGTERM)
        with trio.move_on_after(grace):
            while known:
                await trio.sleep(_POLL_INTERVAL_S)
                process.poll()
                known = {pid for pid in known | _tree(group, process) if _is_running(pid)}
        known = {pid for pid in known | _tree(group, process) if _is_running(pid)}
        if known:
            _signal_all(known, group, signal.SIGKILL)
            # SIGKILL cannot be refused, but dying takes a moment; return once it is done.
            with trio.move_on_after(grace):
                while known:
                    await trio.sleep(_POLL_INTERVAL_S)
                    process.poll()
                    known = {pid for pid in known if _is_running(pid)}
    await process.wait()
    tether.release(process.pid)  # the group is gone: its watcher may go too


def kill_session(leader: int) -> None:
    """SIGKILL the group and the session `leader` leads, at once (a blocking caller's
    `terminate_process_tree`, for commands that get no grace: a key command)."""
    _signal_all(_members(_process_table() or {}, leader), leader, signal.SIGKILL)


def _tree(group: int, process: trio.Process) -> set[int]:
    """Running members of `group` and of the session it leads, plus running descendants of
    `process` while it lives. (No other session can take that id while any member of this
    one lives, so what is found by it is the command's.)"""
    table = _process_table()
    if table is None:
        try:
            os.killpg(group, 0)
        except OSError:
            return set()
        return {group}
    running = _members(table, group)
    if process.returncode is None:
        parents = {process.pid}
        while parents:
            children = {
                pid
                for pid, (ppid, _, _, state) in table.items()
                if ppid in parents and state != "Z" and pid not in running
            }
            running |= children
            parents = children
    return running


def _members(table: dict[int, tuple[int, int, int, str]], leader: int) -> set[int]:
    """The running processes of `table` in the group or the session `leader` leads."""
    return {
        pid
        for pid, (_, pgrp, session, state) in table.items()
        if leader in (pgrp, session) and state != "Z"
    }


def _process_table() -> dict[int, tuple[int, int, int, str]] | None:
    """``pid -> (ppid, pgrp, session, state)`` for every process, or None without a Linux
    ``/proc``."""
    try:
        entries = os.listdir("/proc")
    except OSError:
        return None
    table: dict[int, tuple[int, int, int, str]] = {}
    for name in entries:
        if not name.isdigit():
            continue
        stat = _read_stat(int(name))
        if stat is not None:
            table[int(name)] = stat
    return table if table else None


def _read_stat(pid: int) -> tuple[int, int, int, str] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            raw = file.read()
    except OSError:
        return None
    # The command name sits in parentheses and may itself hold ")" or spaces.
    fields = raw[raw.rfind(b")") + 2 :].split()
    if len(fields) < 4:
        return None
    state = fields[0].decode("ascii", "replace")
    # A dead-but-unreaped (Z) or fully dead (X) process runs no more code.
    return (
        int(fields[1]),
        int(fields[2]),
        int(fields[3]),
        "Z" if state in ("Z", "X", "x") else state,
    )


def _is_running(pid: int) -> bool:
    if os.path.isdir("/proc/self"):
        stat = _read_stat(pid)
        return stat is not None and stat[3] != "Z"
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _signal_all(pids: set[int], group: int, signum: signal.Signals) -> None:
    # The group signal also reaches members forked after the snapshot was taken.
    with contextlib.suppress(OSError):
        os.killpg(group, signum)
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signum)
