"""What a call touches that a person must judge: compound shell commands, critical removals and
protected paths (G-122).

These are conservative, syntactic readings of a shell command, used in two places:

- `split_compound` cuts a command at its control operators (``;``, ``&&``, ``||``, ``|``,
  ``&``, newlines) outside quotes. The permission gate lets an allow rule admit a command only
  when every part is admitted, and lets a deny or ask rule catch any part, so
  ``git status && rm -rf /`` is not admitted by ``Bash(git status:*)``. A command holding
  command or process substitution (``$(…)``, backticks, ``<(…)``) has no reliable parts:
  `split_compound` returns None and no allow rule admits it.
- `writes_to_file` finds an output redirection to a file (``>``, ``>>``, ``>|``, ``&>``,
  ``2>``, ``<>`` to anything but ``/dev/null`` or a descriptor): a prefix allow rule admits no
  such part, since ``Bash(echo:*)`` must not admit ``echo x >> ~/.bashrc``.
- `command_spellings` gives the other spellings of one simple command that run the same
  program — ``(rm x)``, ``\\rm x``, ``/bin/rm x``, ``FOO=1 rm x``, ``then rm x``, ``nice rm x``
  all also read ``rm x`` — so a deny or ask rule sees through them. This is a guard against
  mistakes, not a boundary: a shell has more ways to run a program than any reading of its
  text (the sandbox is the boundary).
- `is_critical_removal` and `ProtectedPaths` decide where auto mode must not let a classifier
  stand in for a person. Anything they cannot read (an unbalanced quote, a variable in a removal
  target) counts as hazardous.

Everything here is a plain function over strings and never touches the filesystem.
"""

from __future__ import annotations

import os
import posixpath
import re
import shlex
from collections.abc import Iterable

__all__ = [
    "SHELL_RC_FILES",
    "ProtectedPaths",
    "command_spellings",
    "command_words",
    "is_critical_removal",
    "path_words",
    "split_compound",
    "writes_to_file",
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

_WRAPPERS = frozenset({"sudo", "command", "exec", "nohup", "time", "nice", "doas", "builtin"})


def split_compound(command: str) -> list[str] | None:
    """The simple commands of `command`, stripped, empty ones dropped; None when it holds
    command or process substitution, whose effect no pattern can judge."""
    parts: list[str] = []
    current: list[str] = []
    quote = ""
    i = 0
    while i < len(command):
        ch = command[i]
        nxt = command[i + 1] if i + 1 < len(command) else ""
        if quote == "'":
            current.append(ch)
            if ch == "'":
                quote = ""
            i += 1
            continue
        if ch == "\\":
            current.append(command[i : i + 2])
            i += 2
            continue
        if ch == "`" or (ch == "$" and nxt == "("):
            return None
        if quote == '"':
            current.append(ch)
            if ch == '"':
                quote = ""
            i += 1
            continue
        if ch in "<>" and nxt == "(":
            return None
        if ch in "'\"":
            quote = ch
            current.append(ch)
            i += 1
            continue
        if ch in ";&|\n":
            if ch in "&|" and nxt == ">":  # "&>" and "|&" redirections stay in the command
                current.append(ch)
                i += 1
                continue
            if i > 0 and command[i - 1] in "<>":  # "2>&1", ">|": a redirection
                current.append(ch)
                i += 1
                continue
            parts.append("".join(current))
            current = []
            i += 2 if nxt == ch or (ch == "|" and nxt == "&") else 1
            continue
        current.append(ch)
        i += 1
    parts.append("".join(current))
    return [part.strip() for part in parts if part.strip()]


def command_words(command: str) -> list[str] | None:
    """Shell words of one simple command (quotes removed), redirection operators split off;
    None when the quoting is unbalanced."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|<>()")
    lexer.whitespace_split = True
    try:
        return list(lexer)
    except ValueError:
        return None


#: Where output may go without writing a file.
_HARMLESS_TARGETS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"})
_DESCRIPTOR = re.compile(r"[0-9]*-?\Z")
_WORD_END = frozenset(" \t\n;&|<>()")


def writes_to_file(command: str) -> bool:
    """Whether the simple command `command` redirects output to a file: ``>``, ``>>``, ``>|``,
    ``&>``, ``N>`` or ``<>`` (which creates its file) outside quotes, comments and arithmetic
    (``$((1 > 0))``), to a target other than ``/dev/null``, ``/dev/stdout``, ``/dev/stderr``,
    ``/dev/tty`` or a descriptor (``>&2``, ``2>&1``). A target that cannot be read plainly (an
    unclosed quote) counts as a file."""
    quote = ""
    i = 0
    while i < len(command):
        ch = command[i]
        if not quote and ch == "#" and (i == 0 or command[i - 1] in " \t\n;&|("):
            return False  # a comment to the end: it redirects nothing
        if not quote and command.startswith("$((", i):
            i = _arithmetic_end(command, i + 3)
            continue
        if quote:
            if ch == quote:
                quote = ""
            elif ch == "\\" and quote == '"':
                i += 1
            i += 1
            continue
        if ch == "\\":
            i += 2
            continue
        if ch in "'\"":
            quote = ch
            i += 1
            continue
        opens_both = ch == "<" and command[i + 1 : i + 2] == ">"
        if ch == ">" or opens_both:
            i += 2 if opens_both else 1
            if command[i : i + 1] in (">", "|"):
                i += 1
            duplicate = command[i : i + 1] == "&"
            i += 1 if duplicate else 0
            target, i = _redirection_target(command, i)
            if target is None:
                return True
            if duplicate and _DESCRIPTOR.match(target):
                continue
            if target not in _HARMLESS_TARGETS:
                return True
            continue
        i += 1
    return False


def _arithmetic_end(command: str, i: int) -> int:
    """Where the ``$((`` expression whose body starts at `i` ends (its ``))``), or the
    command's end when it never closes."""
    depth = 2
    while i < len(command) and depth:
        depth += {"(": 1, ")": -1}.get(command[i], 0)
        i += 1
    return i


def _redirection_target(command: str, i: int) -> tuple[str | None, int]:
    """The word a redirection at `i` names, quotes removed, and where it ends; None for a
    word this cannot read plainly (an unclosed quote)."""
    while i < len(command) and command[i] in " \t":
        i += 1
    words = command_words(command[i:])
    if words is None:
        return None, len(command)
    end = i
    while end < len(command) and command[end] not in _WORD_END:
        if command[end] in "'\"":
            closing = command.find(command[end], end + 1)
            if closing < 0:
                return None, len(command)
            end = closing
        end += 1
    return (words[0] if words else ""), end


#: Words before the program that do not change which program runs: shell keywords, the
#: opening of a group or subshell, negation.
_LEADING_KEYWORDS = frozenset(
    {"if", "then", "else", "elif", "do", "while", "until", "!", "{", "(", "time"}
)
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_WRAPPER_ARGUMENT = re.compile(r"-.*|[0-9.]+[smhd]?\Z")
#: Wrappers that run the next program with the rest of the words.
_RUNNERS = frozenset({*_WRAPPERS, "env", "timeout", "stdbuf", "ionice", "setsid", "xargs"})


def command_spellings(command: str) -> list[str]:
    """Other spellings of the simple command `command` that run the same program with the
    same arguments, for deny and ask rules to see (see the module doc): quotes and a leading
    backslash removed, subshell or group parentheses and braces, shell keywords, leading
    assignments and wrappers (with their options) dropped, a path to the program cut to its
    name. Each differs from `command`; empty when there is none or the quoting is unclosed."""
    text = command.strip().lstrip("({! \t").rstrip(")}; \t")
    try:
        words = shlex.split(text)
    except ValueError:
        return []
    found: list[str] = []
    while words:
        head = words[0]
        if head in _LEADING_KEYWORDS or _ASSIGNMENT.match(head):
            words = words[1:]
            continue
        if posixpath.basename(head) in _RUNNERS:
            words = words[1:]
            while words and _WRAPPER_ARGUMENT.match(words[0]):
                words = words[1:]
            if words:
                found.append(" ".join(words))
            continue
        break
    if words:
        found.append(" ".join(words))
        program = posixpath.basename(words[0])
        if program and program != words[0]:
            found.append(" ".join([program, *words[1:]]))
    return [spelling for spelling in dict.fromkeys(found) if spelling != command]


def _program(words: list[str]) -> tuple[str, list[str]]:
    """The program a simple command runs, after wrappers and leading assignments."""
    i = 0
    while i < len(words):
        word = words[i]
        assignment = "=" in word.split("/", 1)[0] and not word.startswith("-")
        if word in ("(", "{", "!") or assignment:
            i += 1
        elif posixpath.basename(word) in _WRAPPERS or word == "env":
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
