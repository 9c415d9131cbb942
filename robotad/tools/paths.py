"""Canonical form of a path argument: the one spelling the permission gate, the hooks, the log
and the tool itself all see (G-116, G-117).

`canonical_path` is purely lexical: expand a leading ``~``, anchor a relative path at the
session's cwd (never the daemon's own working directory), and normalise away ``.``, ``..`` and
repeated separators. It does not touch the file system, so it works for paths that do not exist
yet (a file Write is about to create) and gives the same answer before and after the tool runs.

Symlinks are deliberately not resolved. A permission pattern is written in terms of the paths a
person sees (``src/**``), and resolving a link would make an allow rule for the link's own
location stop matching, while the link's target is exactly what the person can see and judge
when asked. The cost of the lexical choice is the usual one: ``link/..`` collapses to the
directory holding ``link``, not the parent of the link's target.
"""

from __future__ import annotations

import os
from pathlib import Path

from robotad.agent.tool import ArgumentError

__all__ = ["canonical_path"]


def canonical_path(arg: str, cwd: Path) -> str:
    """Return `arg` as an absolute, normalised path, relative paths taken against `cwd`.

    `cwd` must be absolute (a session's cwd always is); a relative one is a programming error
    and raises `ValueError`. An empty argument or one holding a NUL byte can name no file and
    raises `ArgumentError` (a `ValueError`) saying so. The result never ends in a separator
    (except for ``/`` itself) and never starts with ``//``.
    """
    if not cwd.is_absolute():
        raise ValueError(f"session cwd must be absolute, got {os.fspath(cwd)!r}")
    if arg == "":
        raise ArgumentError("path is empty")
    if "\0" in arg:
        raise ArgumentError(f"path contains a NUL byte: {arg!r}")
    joined = os.path.join(os.fspath(cwd), os.path.expanduser(arg))
    normal = os.path.normpath(joined)
    # POSIX lets normpath keep exactly two leading slashes; one spelling per path is the point.
    if normal.startswith("//"):
        normal = "/" + normal.lstrip("/")
    return normal
