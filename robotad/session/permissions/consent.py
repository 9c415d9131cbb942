"""Remembered consent: the permission pattern an "allow always" answer grants (G-113).

Consent is projected from the call's effective argument, never the bare tool name, so that
approving one path, URL or command family does not approve every other use of the tool:

- a path: exactly that path, ``Read(/abs/file)``;
- a URL: its host and subdomains, ``WebFetch(domain:example.com)``;
- a command: its family — the program and a subcommand-like second word — as a prefix
  (``git status --short`` → ``Bash(git status:*)``). When the second word is an option, the
  program alone is the family only for a few plain viewers (``ls -la`` → ``Bash(ls:*)``);
  otherwise the option may change what the program runs (``git -c core.pager=… log``) and
  the command is remembered exactly. A compound command, one holding substitution, one
  redirecting output to a file, one with leading assignments, or one whose program can do
  anything — ``rm``, ``sudo``, shells, interpreters in any version (``python3.11``),
  ``curl``, and wrappers that run another program (``timeout``, ``nice``, ``command``,
  ``nohup`` …) — is remembered exactly instead: a family of those would approve far more
  than the person saw;
- any other argument: exactly that value.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any, Final

from robotad.agent.tool import ToolProfile
from robotad.session.errors import InvalidSetting
from robotad.session.permissions.patterns import escape_pattern_text, parse_rule, url_host
from robotad.session.permissions.program_options import writes_or_runs
from robotad.session.permissions.shell_text import RUNNERS, split_compound

__all__ = ["consent_pattern"]

#: Programs whose every use is its own decision: "allow always" remembers the exact command.
_NO_FAMILY: Final = frozenset(
    {
        *("rm", "rmdir", "shred", "dd", "mkfs", "chmod", "chown", "chgrp", "find"),
        *("kill", "pkill", "killall", "csh", "tcsh", "curl", "wget"),
        *("source", ".", "trap", "alias", "awk", "gawk", "mawk", "nawk", "sed", "npx", "bunx"),
        # Programs that run another (as Bash rules read them, `shell_text.RUNNERS`, and a few
        # more): what they run is a later word, which a family would leave open.
        *RUNNERS,
        *("script", "parallel", "systemd-run", "fakeroot", "firejail", "valgrind", "gdb"),
        *("ssh", "uvx", "pipx"),
        # Programs whose arguments name files they write: a family would admit any target.
        *("cp", "mv", "tee", "sort", "install", "ln", "rsync", "scp", "truncate", "patch"),
    }
)
#: Subcommands that run whatever follows them (``uv run``, ``docker exec``, ``npm exec``):
#: a family of those would admit any program.
_RUNNING_SUBCOMMANDS: Final = frozenset({"run", "exec", "x", "dlx", "shell", "eval"})
#: Interpreters, in any version (``python3.11``, ``pypy3``, ``node18``, ``perl5.36``).
_INTERPRETER = re.compile(
    r"(?:python|pypy|perl|ruby|node|nodejs|php|lua|luajit|tclsh|wish|pwsh|deno|bun|"
    r"Rscript|osascript|java|jshell|irb|ghci|runghc|guile|racket|julia)[0-9.]*\Z"
)
#: Programs that only show what they read or are given: whatever their second word (an
#: option, ``(x)*``), the program alone is their family.
_OPTION_FAMILY: Final = frozenset(
    {"ls", "cat", "head", "tail", "wc", "du", "df", "tree", "stat", "file", "pwd", "date"}
    | {"echo", "printf", "which", "whoami", "uname", "id"}
)
_FAMILY = re.compile(r"\s*([A-Za-z0-9_.+/-]+)(?:\s+([A-Za-z][A-Za-z0-9_-]*))?(?=\s|\Z)")


def consent_pattern(
    tool_name: str, arguments: Mapping[str, Any], profile: ToolProfile | None, cwd: str
) -> str | None:
    """The allow pattern "allow always" grants for this call (`arguments` already effective),
    or None when the tool has no argument key or the call lacks a usable value."""
    if profile is None or profile.argument_key is None:
        return None
    value = arguments.get(profile.argument_key)
    if value is None and profile.argument_kind == "path":
        value = cwd
    if not isinstance(value, str) or not value.strip():
        return None
    exact = f"{tool_name}({escape_pattern_text(value)})"
    candidate = exact
    if profile.argument_kind == "url":
        host = url_host(value)
        if host is not None:
            candidate = f"{tool_name}(domain:{host})"
    elif profile.argument_kind == "command":
        candidate = _command_family(tool_name, value) or exact
    for text in (candidate, exact):
        try:
            parse_rule(text, profile)
        except InvalidSetting:
            continue
        return text
    return None


def _command_family(tool_name: str, command: str) -> str | None:
    """The family "allow always" may remember for `command`, or None for the exact command:
    the program and a plain second word (``git status``), or the program alone when there is
    no second word or the program is a plain viewer (``ls -la``). A second word that is not
    a plain name (``git "log"``, ``git stash@{0}``, ``git -c x=y log``), a command with
    anything after it on the line (``git status;``), or a program that writes the files it
    is given or runs another (``cp``, ``uv run``) is remembered exactly."""
    parts = split_compound(command)
    if parts is None or len(parts) != 1 or parts[0] != command.strip():
        return None
    if writes_or_runs(command):
        return None  # a family would not admit a write to a file (or a run) anyway
    match = _FAMILY.match(command)
    if match is None:
        return None
    program = os.path.basename(match.group(1))
    if program in _NO_FAMILY or _INTERPRETER.match(program):
        return None
    if match.group(2) in _RUNNING_SUBCOMMANDS:
        return None
    words = command.split()
    if match.group(2) is None and len(words) > 1 and program not in _OPTION_FAMILY:
        return None  # "git -c x=y log", "git \"log\"": the second word is not a plain name
    return f"{tool_name}({escape_pattern_text(match.group(0))}:*)"
