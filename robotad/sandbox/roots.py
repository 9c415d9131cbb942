"""Holding Write and Edit to the sandbox's writable roots (PROTOCOL.md §10.4).

A confined session's file tools may change only what its commands could: a file whose
canonical target — every symlink resolved, the file's own included, as the write would follow
it — lies in one of `layout.writable_dirs`, not inside a ``.git`` there (at any depth, as a path
component), not inside robota's own folders, and not one of the secrets a command sees hidden
(``~/.ssh``, ``~/.netrc``…: its writes there land on a throwaway copy). Whatever the
permission rules and mode say (``bypassPermissions`` included), anything else is refused with
a reason the model can read.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from robotad.sandbox.layout import (
    SECRET_FILES,
    SECRET_FOLDERS,
    held_read_only,
    is_within,
    secret_paths,
    writable_dirs,
)
from robotad.sandbox.policy import SandboxPolicy

__all__ = ["held_reason", "write_refusal"]


def held_reason(folder: str, spelling: str) -> str:
    """Why the sandbox keeps `folder` read-only, holding the persistence folder `spelling`."""
    holds = "is" if os.path.realpath(os.path.expanduser(spelling)) == folder else "holds"
    return (
        f"the sandbox keeps {folder} read-only because it {holds} {spelling}, where files that "
        "run later live (shell start-up files, SSH keys, autostart entries, systemd units); "
        "start the session in a project folder for commands to write there"
    )


def write_refusal(
    path: str, policy: SandboxPolicy, cwd: str, protected: Sequence[str] = ()
) -> str | None:
    """Why a confined session may not write `path` (absolute), or None when it may (always
    None for an unconfined policy). Blocking: it resolves symlinks."""
    if not policy.confined:
        return None
    real = os.path.realpath(path)
    shown = path if real == path else f"{path} (which resolves to {real})"
    if policy.mode == "read-only":
        return f"{shown} is not writable: this session's sandbox is read-only"
    roots = writable_dirs(policy, cwd)
    root = next((r for r in roots if is_within(real, r)), None)
    if root is None:
        for folder, spelling in held_read_only(policy, cwd):
            if is_within(real, folder):
                return f"{shown} is not writable: {held_reason(folder, spelling)}"
        listed = ", ".join(roots) or "none"
        return f"{shown} is outside the sandbox's writable roots ({listed})"
    inside = os.path.relpath(real, root).split(os.sep)
    if ".git" in inside:
        return f"{shown} is inside a .git folder, which the sandbox keeps read-only"
    for folder in protected:
        if is_within(real, os.path.realpath(folder)):
            return f"{shown} is inside robota's own folder {folder}, which stays read-only"
    spellings = (*SECRET_FOLDERS, *SECRET_FILES)
    for spelling, secret in zip(spellings, secret_paths(spellings), strict=True):
        if is_within(real, secret):
            return f"{shown} is inside {spelling}, which the sandbox hides from commands"
    return None
