"""Working out a session's `MountPlan` from its policy, cwd and robota's own folders (blocking).

The writable folders are the cwd tree and each configured root that exists, with symlinks
resolved (bubblewrap binds a folder at its real path; a link elsewhere on the read-only root
still leads into it) — but never through a symlink that lies inside a writable folder: an
earlier command could have made that link (``ln -s / .cache`` where ``.cache`` is a configured
root not made yet), so a folder reached through one is not writable (`links_on`). A configured
root is taken as written: one whose path goes through any symlink is not writable, since a
command of this session or of another could have made or re-pointed it. Inside them
these stay read-only:

- every ``.git`` (folder, or the file a worktree or submodule has) found by `find_git_entries`
  down to `GIT_SCAN_DEPTH` folders below each writable root: the repositories the user will
  run ``git`` in later, whose hooks and config would otherwise be the model's to rewrite. A
  ``.git`` that is a symlink is not followed (what it points to is read-only unless it lies in
  a writable root itself). The scan is repeated for every command, so a repository created by
  an earlier command is protected in the next;
- robota's configuration and state folders and its configuration file (`protected`), when
  they lie inside a writable root — or a folder of them contains one, then the whole of it
  stays read-only.

Every folder between a writable root and such a read-only entry is bound onto itself as well
(`MountPlan.pinned`): a mount point cannot be renamed or removed, so no command can move a
repository (or ``~/.config``) aside and put a copy with a planted hook in its place. The price:
a sandboxed command cannot rename or delete a folder that holds a repository.

A folder that is or holds one of `PERSISTENCE_FOLDERS` — the home itself (its shell start-up
files), ``~/.ssh``, or the autostart, systemd and fish folders of ``~/.config`` — is never
writable, whether it is the session's folder or a configured root (`held_read_only` names
them): the files there run later, outside any sandbox, and one that does not exist yet cannot
be bound read-only, so a writable home would let a command create ``~/.ssh/authorized_keys`` or
a ``~/.profile``. Such a session's commands still run, with that folder read-only.

The well-known secrets of the user's home (`SECRET_FOLDERS`, `SECRET_FILES`: SSH and GPG keys,
cloud and cluster credentials, ``~/.netrc``, the stored tokens of git, the GitHub CLI, npm,
PyPI, cargo and Terraform) are hidden altogether: a sandboxed command runs
without asking, so it must not be able to print a key for the model to read.

`writable_dirs` is the same list of writable folders that Write and Edit are held to
(`roots.write_refusal`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from typing import Final

from robotad.sandbox.bwrap import MountPlan
from robotad.sandbox.policy import SandboxPolicy

__all__ = [
    "GIT_SCAN_DEPTH",
    "PERSISTENCE_FOLDERS",
    "SECRET_FILES",
    "SECRET_FOLDERS",
    "find_git_entries",
    "held_read_only",
    "is_within",
    "links_on",
    "persistence_inside",
    "plan_mounts",
    "secret_paths",
    "writable_dirs",
]

GIT_SCAN_DEPTH: Final = 3
"""How many folder levels below a writable root are searched for ``.git``: ``root/.git`` down
to ``root/a/b/c/.git``. A bound, so a command in a huge tree does not pay for a full walk."""


SECRET_FOLDERS: Final = ("~/.ssh", "~/.aws", "~/.gnupg", "~/.config/gcloud", "~/.azure")
SECRET_FILES: Final = (
    "~/.kube/config",
    "~/.docker/config.json",
    "~/.netrc",
    "~/.git-credentials",  # git's credential store: tokens in plain text
    "~/.config/gh/hosts.yml",  # the GitHub CLI's tokens
    "~/.npmrc",
    "~/.pypirc",
    "~/.cargo/credentials.toml",
    "~/.terraform.d/credentials.tfrc.json",
)


#: Folders where files that run later live: the home's shell start-up files, SSH's
#: authorized_keys, desktop autostart entries, systemd user units, fish's configuration.
PERSISTENCE_FOLDERS: Final = (
    "~",
    "~/.ssh",
    "~/.config/autostart",
    "~/.config/systemd",
    "~/.config/fish",
)


def persistence_inside(folder: str) -> str | None:
    """The first of `PERSISTENCE_FOLDERS` (as spelled) that the canonical `folder` is or holds,
    or None. Blocking."""
    for spelling in PERSISTENCE_FOLDERS:
        if is_within(os.path.realpath(os.path.expanduser(spelling)), folder):
            return spelling
    return None


def is_within(path: str, folder: str) -> bool:
    """Whether canonical `path` is `folder` or lies below it."""
    return path == folder or path.startswith(folder.rstrip("/") + "/")


#: Symlinks followed while resolving one path, at most (the kernel's own bound).
_MAX_LINKS: Final = 40


def links_on(path: str) -> list[str]:
    """The symlinks met while resolving the absolute `path`, each as the canonical path of the
    link itself (its folder resolved), in the order they are met. Blocking."""
    links: list[str] = []
    pending = [part for part in reversed(path.split("/")) if part]
    current = "/"
    while pending:
        part = pending.pop()
        if part == ".":
            continue
        if part == "..":
            current = os.path.dirname(current)
            continue
        candidate = os.path.join(current, part)
        if not os.path.islink(candidate):
            current = candidate
            continue
        links.append(candidate)
        if len(links) > _MAX_LINKS:
            break  # a loop: the path resolves to nothing
        try:
            target = os.readlink(candidate)
        except OSError:
            break  # replaced while we looked: what it was is among `links` already
        if target.startswith("/"):
            current = "/"
        pending.extend(part for part in reversed(target.split("/")) if part)
    return links


def writable_dirs(policy: SandboxPolicy, cwd: str) -> list[str]:
    """The canonical folders a command of this policy may write (besides its private /tmp):
    none in ``read-only`` mode; in ``workspace-write`` the cwd and every existing root, unless
    reached through a symlink inside one of them (see the module doc)."""
    held = {folder for folder, _ in held_read_only(policy, cwd)}
    return [folder for folder in _candidates(policy, cwd) if folder not in held]


def held_read_only(policy: SandboxPolicy, cwd: str) -> list[tuple[str, str]]:
    """The folders of `writable_dirs`' candidates kept read-only because they are or hold a
    persistence folder (module doc): each canonical folder with the spelling it holds."""
    held: list[tuple[str, str]] = []
    for folder in _candidates(policy, cwd):
        spelling = persistence_inside(folder)
        if spelling is not None:
            held.append((folder, spelling))
    return held


def _candidates(policy: SandboxPolicy, cwd: str) -> list[str]:
    """The cwd and roots that may be writable, before persistence folders are held back."""
    if policy.mode != "workspace-write":
        return []
    spellings = (cwd, *policy.writable_roots)
    resolved = [(spelling, os.path.realpath(spelling)) for spelling in spellings]
    areas = [real for _, real in resolved if os.path.isdir(real)]
    found: list[str] = []
    for index, (spelling, real) in enumerate(resolved):
        if real in found or not os.path.isdir(real):
            continue
        links = links_on(spelling)
        if index and links:
            continue  # a root is taken as written, never through a link
        if any(is_within(link, area) for link in links for area in areas):
            continue  # a link a sandboxed command could have made or re-pointed
        found.append(real)
    return found


def find_git_entries(root: str, depth: int = GIT_SCAN_DEPTH) -> Iterator[str]:
    """Every ``.git`` entry (not a symlink) in `root` and its folders down to `depth` levels
    below it; the contents of a ``.git`` folder and symlinked folders are not entered."""
    pending = [(root, 0)]
    while pending:
        folder, level = pending.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_symlink():
                    continue
                if entry.name == ".git":
                    yield entry.path
                elif level < depth and entry.is_dir(follow_symlinks=False):
                    pending.append((entry.path, level + 1))
            except OSError:
                continue


def plan_mounts(policy: SandboxPolicy, cwd: str, protected: Sequence[str] = ()) -> MountPlan:
    """The mounts of one command of a confined session working in `cwd` (see the module doc).
    `protected` are robota's folders (configuration, state) to keep read-only."""
    writable = writable_dirs(policy, cwd)
    read_only: list[str] = []
    for root in writable:
        read_only.extend(find_git_entries(root))
    for folder in protected:
        real = os.path.realpath(folder)
        if os.path.exists(real) and any(
            is_within(real, root) or is_within(root, real) for root in writable
        ):
            read_only.append(real)
    return MountPlan(
        cwd=cwd,
        writable=tuple(writable),
        pinned=_between(writable, read_only),
        read_only=tuple(read_only),
        network=policy.network,
        hidden_dirs=_existing(SECRET_FOLDERS, os.path.isdir),
        hidden_files=_existing(SECRET_FILES, os.path.isfile),
    )


def _between(roots: Sequence[str], entries: Sequence[str]) -> tuple[str, ...]:
    """Every folder strictly between a root of `roots` and an entry of `entries` inside it."""
    found: set[str] = set()
    for entry in entries:
        for root in roots:
            if entry == root or not is_within(entry, root):
                continue
            folder = os.path.dirname(entry)
            while folder != root and is_within(folder, root):
                found.add(folder)
                folder = os.path.dirname(folder)
    return tuple(sorted(found))


def secret_paths(spellings: Sequence[str] = (*SECRET_FOLDERS, *SECRET_FILES)) -> list[str]:
    """The canonical paths of `spellings` (``~`` expanded), whether they exist or not."""
    return [os.path.realpath(os.path.expanduser(spelling)) for spelling in spellings]


def _existing(spellings: Sequence[str], kind: Callable[[str], bool]) -> tuple[str, ...]:
    """The canonical paths of `spellings` (``~`` expanded) that exist as `kind`."""
    return tuple(path for path in secret_paths(spellings) if kind(path))
