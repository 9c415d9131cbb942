"""How many files the daemon may hold open: raised at start-up, given back to what it starts.

One robotad holds every session of its user, and each loaded session keeps descriptors open
(its journal folder, its log, its MCP servers' pipes), so the soft ``RLIMIT_NOFILE`` most
systems start a user's programs with (1,024) runs out at a few hundred sessions, when a
create or a load answers StorageFailed "too many open files". At start-up `raise_limit`
lifts the soft limit to `WANTED`, or to the hard limit when that is lower; nothing of robotad
uses ``select()``, whose sets stop at 1,024. `WANTED` is not the hard limit itself (often
524,288, sometimes unlimited): programs that close every descriptor up to the limit before
they exec would then take seconds.

What robotad starts (the model's commands, hooks, MCP servers, key commands) gets the limit
robotad was started with: `restore_in_child` runs in the child between fork and exec, as
systemd asks of programs that raise their own limit, so an old program that uses ``select()``
meets the limit it was written for.
"""

from __future__ import annotations

import logging
import resource
from typing import Final

__all__ = ["WANTED", "raise_limit", "restore_in_child", "target"]

log = logging.getLogger("robotad.open_files")

#: The soft limit robotad asks for itself (less when the hard limit is lower).
WANTED: Final = 65_536

#: The soft limit robotad was started with, once `raise_limit` changed it (children get it).
_inherited: int | None = None


def target(soft: int, hard: int, wanted: int = WANTED) -> int:
    """The soft limit to set, given the current `soft` and `hard` ones: `wanted`, capped by
    `hard`, never below `soft` (a limit already higher is kept)."""
    if soft == resource.RLIM_INFINITY:
        return soft
    ceiling = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    return max(soft, ceiling)


def raise_limit(wanted: int = WANTED) -> int:
    """Raise this process's soft open-files limit (see the module doc); the limit now."""
    global _inherited
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    new = target(soft, hard, wanted)
    if new == soft:
        return soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
    except (ValueError, OSError) as exc:  # e.g. above the kernel's nr_open
        log.warning("could not raise the open-files limit from %d to %d: %s", soft, new, exc)
        return soft
    if _inherited is None:
        _inherited = soft
    log.debug("open-files limit raised from %d to %d (hard %d)", soft, new, hard)
    return new


def restore_in_child() -> None:
    """Give a child the soft limit robotad was started with. Runs between fork and exec
    (a ``preexec_fn``): plain system calls only."""
    if _inherited is not None:
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        resource.setrlimit(resource.RLIMIT_NOFILE, (_inherited, hard))
