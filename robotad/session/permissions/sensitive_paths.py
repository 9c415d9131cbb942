"""Where reading or writing needs a person whatever the mode (PROTOCOL.md §10.7).

`SensitivePaths` answers three questions about an absolute, canonical path, for one session:

- `protected_read`: is it a well-known secret — keys, cloud credentials, ``.env`` files,
  robota's own configuration? Read, Grep and Glob on one ask in every mode but
  ``bypassPermissions``. ``[permissions] protected_reads`` replaces `DEFAULT_PROTECTED_READS`.
- `persistence`: would writing it make something run later — a shell start-up file, an SSH
  key or ``authorized_keys``, an autostart or systemd user unit, anything in a ``.git`` folder
  (hooks, config, a submodule's under ``.git/modules/``) or a ``.git`` file, robota's
  configuration? Write and Edit there ask in every mode but ``bypassPermissions``,
  inside the workspace or not.
- `touched_by`: does a shell command name one of those (auto mode then asks a person)?
- `in_workspace`: is it inside the session's cwd tree or a ``[permissions] additional_dirs``
  folder, the only places ``acceptEdits`` lets Write and Edit change without asking?

Patterns use the permission-pattern path syntax (``*`` within a segment, ``**`` across, ``~/``
the home folder, a relative pattern against the session's cwd); a pattern starting with
``**/`` matches at any depth anywhere (``**/.env``). Nothing here reads a file's contents or
touches the file system, except resolving symlinks of the configured roots.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Callable, Sequence
from typing import Final

from protocol.errors import Issue
from robotad.agent.tool import ToolProfile
from robotad.session.errors import InvalidSetting
from robotad.session.permissions.hazards import SHELL_RC_FILES, path_words
from robotad.session.permissions.patterns import (
    Matcher,
    compile_rule,
    escape_pattern_text,
    parse_rule,
)

__all__ = [
    "DEFAULT_PROTECTED_READS",
    "PERSISTENCE_PATHS",
    "SensitivePaths",
    "check_path_patterns",
    "robota_config_paths",
]

#: Secrets a model must not read without a person's say (PROTOCOL.md §10.7).
DEFAULT_PROTECTED_READS: Final[tuple[str, ...]] = (
    "~/.ssh/**",
    "~/.aws/**",
    "~/.gnupg/**",
    "~/.config/gcloud/**",
    "~/.kube/config",
    "~/.docker/config.json",
    "~/.netrc",
    "**/.env",
    "**/.env.*",
)

#: Files whose change runs code later: shell start-up files, keys, autostart, git's folder.
PERSISTENCE_PATHS: Final[tuple[str, ...]] = (
    *(f"~/{name}" for name in sorted(SHELL_RC_FILES)),
    "~/.config/fish/**",
    "~/.ssh/**",
    "~/.config/autostart/**",
    "~/.config/systemd/**",
    # All of a repository's git folder: hooks and config (also a submodule's under
    # .git/modules/, a worktree's config.worktree) make git run code the next time it is used,
    # and a .git *file* names the folder git takes them from.
    "**/.git",
    "**/.git/**",
)

_PATH_PROFILE: Final = ToolProfile("inspect", "file_path", "path")


def robota_config_paths() -> list[str]:
    """robota's configuration as patterns: its folder (``$XDG_CONFIG_HOME/robota``) and the
    file ``ROBOTA_CONFIG`` names, when set."""
    home = os.path.expanduser("~")
    base = os.environ.get("XDG_CONFIG_HOME") or posixpath.join(home, ".config")
    found = [escape_pattern_text(posixpath.join(base, "robota")) + "/**"]
    override = os.environ.get("ROBOTA_CONFIG")
    if override and posixpath.isabs(override):
        found.append(escape_pattern_text(posixpath.normpath(override)))
    return found


def check_path_patterns(patterns: Sequence[str], where: str) -> list[Issue]:
    """Every malformed pattern of `patterns`, each at ``{where}[i]``."""
    issues: list[Issue] = []
    for index, text in enumerate(patterns):
        try:
            _parse(text)
        except InvalidSetting as exc:
            issues.extend(
                {"path": f"{where}[{index}]", "message": i["message"]} for i in exc.issues
            )
    return issues


def _parse(text: str) -> str:
    """`text` as the argument of a path rule (``**/x`` anchored at the root); raises
    `InvalidSetting` when malformed."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidSetting(
            [{"path": "$", "message": "a path pattern must be a non-empty string"}]
        )
    anchored = "/" + text if text.startswith("**/") else text
    parse_rule(f"Read({anchored})", _PATH_PROFILE)
    return anchored


class SensitivePaths:
    """The protected reads, persistence paths and workspace of one session (see the module
    doc). `protected_reads` None means the defaults; `config_paths` are robota's own
    configuration (`robota_config_paths` by default), protected for reads and writes."""

    def __init__(
        self,
        cwd: str,
        *,
        home: str | None = None,
        protected_reads: Sequence[str] | None = None,
        additional_dirs: Sequence[str] = (),
        config_paths: Sequence[str] | None = None,
        resolve: Callable[[str], str] = os.path.realpath,
    ) -> None:
        self.cwd = cwd
        self.home = home or os.path.expanduser("~")
        self._resolve = resolve
        config = list(robota_config_paths() if config_paths is None else config_paths)
        reads = DEFAULT_PROTECTED_READS if protected_reads is None else tuple(protected_reads)
        self._reads = self._compiled([*reads, *config])
        self._writes = self._compiled([*PERSISTENCE_PATHS, *config])
        roots = [cwd, *(self._root(d) for d in additional_dirs)]
        self.workspace = tuple(dict.fromkeys([*roots, *(resolve(r) for r in roots)]))

    def _compiled(self, patterns: Sequence[str]) -> list[tuple[str, Matcher]]:
        out = []
        for text in patterns:
            rule = parse_rule(f"Read({_parse(text)})", _PATH_PROFILE)
            matcher = compile_rule(
                rule, _PATH_PROFILE, self.cwd, home=self.home, resolve=self._resolve
            )
            out.append((text, matcher))
        return out

    def _root(self, directory: str) -> str:
        if directory == "~" or directory.startswith("~/"):
            directory = self.home + directory[1:]
        return posixpath.normpath(posixpath.join(self.cwd, directory))

    def protected_read(self, path: str) -> str | None:
        """The protected-read pattern `path` matches, or None."""
        return _first(self._reads, path)

    def persistence(self, path: str) -> str | None:
        """The persistence pattern `path` matches, or None."""
        return _first(self._writes, path)

    def touched_by(self, command: str) -> bool:
        """Whether any word of the shell `command`, read as a path under the cwd, is a
        protected read or a persistence path (so auto mode hands it to a person); a command
        whose quoting cannot be read counts as touching one."""
        words = path_words(command)
        if words is None:
            return True
        return any(
            self.protected_read(path) is not None or self.persistence(path) is not None
            for path in map(self._root, words)
        )

    def in_workspace(self, path: str) -> bool:
        """Whether `path` is a workspace root or under one."""
        return any(
            path == root or path.startswith(root.rstrip("/") + "/") for root in self.workspace
        )


def _first(matchers: Sequence[tuple[str, Matcher]], path: str) -> str | None:
    return next((text for text, matcher in matchers if _caught(matcher, path)), None)


def _caught(matcher: Matcher, path: str) -> bool:
    """Whether `matcher` catches `path`; a path it cannot tell in time is caught (a person
    decides then, decision 40)."""
    try:
        return matcher.matches(path)
    except TimeoutError:
        return True
