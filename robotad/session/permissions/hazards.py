"""What a call touches that a person must judge: critical removals and protected paths (G-122).

`is_critical_removal` and `ProtectedPaths` decide where auto mode must not let a classifier
stand in for a person. Anything they cannot read (an unbalanced quote, a variable in a removal
target) counts as hazardous. How a command's text reads — its parts, its redirections, its
program's other spellings — is `shell_text`'s. Plain functions over strings: nothing here
touches the filesystem.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterable

from robotad.session.permissions.shell_text import WRAPPERS, command_words, split_compound

__all__ = [
    "SHELL_RC_FILES",
    "ProtectedPaths",
    "is_critical_removal",
    "path_words",
]

#: Shell start-up files: writing one runs code in every later shell.
SHELL_RC_FILES = frozenset(
    {
        ".bashrc",
        ".bash_profile",
        ".bash_login",
        ".bash_logout",
        ".profile",
        ".zshrc",
        ".zshenv",
        ".zprofile",
        ".zlogin",
        ".zlogout",
        ".cshrc",
        ".tcshrc",
        ".kshrc",
        ".inputrc",
    }
)


def _program(words: list[str]) -> tuple[str, list[str]]:
    """The program a simple command runs, after wrappers and leading assignments."""
    i = 0
    while i < len(words):
        word = words[i]
        assignment = "=" in word.split("/", 1)[0] and not word.startswith("-")
        if word in ("(", "{", "!") or assignment:
            i += 1
        elif posixpath.basename(word) in WRAPPERS or word == "env":
            i += 1
            while i < len(words) and words[i].startswith("-"):
                i += 1
        else:
            return posixpath.basename(word), words[i + 1 :]
    return "", []


def _resolve(target: str, cwd: str, home: str) -> str:
    if target == "~" or target.startswith("~/"):
        target = home + target[1:]
    return posixpath.normpath(posixpath.join(cwd, target))


def _is_broad(target: str, cwd: str, home: str) -> bool:
    unknown_home = target.startswith("~") and not _home_relative(target)
    if "$" in target or "`" in target or unknown_home:
        return True
    # A last component made only of wildcards and dots ("*", ".*", "./*") removes the
    # directory's whole content: judge that directory.
    head, _, last = target.rstrip("/").rpartition("/")
    if last and "*" in last and set(last) <= set("*.?"):
        target = head or ("/" if target.startswith("/") else ".")
    path = _resolve(target, cwd, home)
    if path == "/" or path.count("/") == 1:
        return True
    return any(root == path or root.startswith(path.rstrip("/") + "/") for root in (cwd, home))


def _home_relative(target: str) -> bool:
    return target == "~" or target.startswith("~/")


def is_critical_removal(command: str, cwd: str, home: str | None = None) -> bool:
    """Whether `command` runs ``rm`` on a broad target: the root, a top-level directory, the
    home directory, the cwd or any ancestor of either, a wildcard over one of those (``*``,
    ``~/*``, ``./*``), or a target the shell would expand from a variable. A command this cannot
    read is treated as critical."""
    home = home or os.path.expanduser("~")
    parts = split_compound(command)
    for part in parts if parts is not None else [command]:
        words = command_words(part)
        if words is None:
            return True
        program, args = _program(words)
        if program != "rm":
            continue
        options_done = False
        for arg in args:
            if not options_done and arg == "--":
                options_done = True
                continue
            if not options_done and arg.startswith("-") and arg != "-":
                continue
            if arg in (";", "&", "|", "<", ">", "(", ")"):
                break
            if _is_broad(arg, cwd, home):
                return True
    return False


class ProtectedPaths:
    """Paths a classifier never judges: any ``.git`` directory and what is under it, shell
    start-up files anywhere, and the given protected roots (by default ``~/.ssh``, ``~/.gnupg``,
    ``~/.aws`` and robota's configuration directory)."""

    def __init__(self, roots: Iterable[str], *, home: str | None = None) -> None:
        self.home = home or os.path.expanduser("~")
        self.roots = tuple(posixpath.normpath(root) for root in roots)

    @classmethod
    def default(cls, *, config_dir: str | None = None, home: str | None = None) -> ProtectedPaths:
        home = home or os.path.expanduser("~")
        if config_dir is None:
            base = os.environ.get("XDG_CONFIG_HOME") or posixpath.join(home, ".config")
            config_dir = posixpath.join(base, "robota")
        roots = [posixpath.join(home, name) for name in (".ssh", ".gnupg", ".aws")]
        return cls([*roots, config_dir], home=home)

    def covers(self, path: str) -> bool:
        """Whether the absolute, normalised `path` is protected."""
        names = path.split("/")
        if ".git" in names or names[-1] in SHELL_RC_FILES:
            return True
        return any(path == root or path.startswith(root.rstrip("/") + "/") for root in self.roots)

    def touched_by(self, command: str, cwd: str) -> bool:
        """Whether any word of `command`, read as a path under `cwd`, is protected; a command
        whose quoting cannot be read counts as touching one."""
        words = path_words(command)
        if words is None:
            return True
        return any(self.covers(_resolve(word, cwd, self.home)) for word in words)


def path_words(command: str) -> list[str] | None:
    """The words of shell `command` that could name a path (an option's ``=value`` counts;
    options and operators do not), or None when its quoting cannot be read."""
    words = command_words(command)
    if words is None:
        return None
    found = []
    for word in words:
        if word.startswith("-") and "=" in word:
            word = word.split("=", 1)[1]
        if not word or word.startswith("-") or set(word) <= set(";&|<>()"):
            continue
        found.append(word)
    return found
