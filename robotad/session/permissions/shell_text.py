"""How a shell command reads to the permission rules: its parts, its redirections, the other
spellings of its program.

Conservative, syntactic readings of command text (nothing here touches the filesystem):

- `split_compound` cuts a command at its control operators (``;``, ``&&``, ``||``, ``|``,
  ``&``, newlines) outside quotes, a comment dropped. The permission gate lets an allow rule
  admit a command only when every part is admitted, and lets a deny or ask rule catch any part,
  so ``git status && rm -rf /`` is not admitted by ``Bash(git status:*)``. A command holding
  command or process substitution (``$(…)``, backticks, ``<(…)``), a here-document, or
  quoting this cannot read to its end has no reliable parts: `split_compound` returns None and
  no prefix allow rule admits it.
- `redirects_to_file` finds an output redirection to a file (``>``, ``>>``, ``>|``, ``&>``,
  ``2>``, ``<>`` to anything but ``/dev/null``, a terminal or a descriptor): with what a
  program's options reach (`program_options.writes_or_runs`), a prefix allow rule admits no
  such part, since ``Bash(echo:*)`` must not admit ``echo x >> ~/.bashrc``.
- `command_spellings` and `rough_parts` give the other spellings that may run a program —
  ``(rm x)``, ``\\rm x``, ``/bin/rm x``, ``FOO=1 rm x``, ``then rm x``, ``timeout -s KILL 5 rm
  x``, ``sh -c 'rm x'``, ``echo $(rm x)`` all also read ``rm x`` — so a deny or ask rule sees
  through them (they over-read on purpose: a deny rule may catch more than it must). This is a
  guard against mistakes, not a boundary: a shell has more ways to run a program than any
  reading of its text (the sandbox is the boundary).
"""

from __future__ import annotations

import posixpath
import re
import shlex

__all__ = [
    "RUNNERS",
    "WRAPPERS",
    "command_spellings",
    "command_words",
    "redirects_to_file",
    "rough_parts",
    "split_compound",
]

#: Words before a program that run it (with options of their own).
WRAPPERS = frozenset({"sudo", "command", "exec", "nohup", "time", "nice", "doas", "builtin"})


def split_compound(command: str) -> list[str] | None:
    """The simple commands of `command`, stripped, empty ones dropped (a comment is dropped
    with them); None when it holds command or process substitution, whose effect no pattern
    can judge, a here-document (its body is no command, and no command either), or quoting
    this cannot read to its end — rather than one "part" that runs on over the next lines."""
    parts: list[str] = []
    current: list[str] = []
    quote = ""
    i = 0
    while i < len(command):
        ch = command[i]
        nxt = command[i + 1] if i + 1 < len(command) else ""
        if not quote and ch == "#" and (i == 0 or command[i - 1] in " \t\n;&|("):
            line_end = command.find("\n", i)  # a comment runs to the end of its line
            i = len(command) if line_end < 0 else line_end
            continue
        if not quote and ch == "$" and nxt == "'":  # $'…': backslash escapes inside
            closed = _ansi_c_end(command, i + 2)
            if closed is None:
                return None
            current.append(command[i:closed])
            i = closed
            continue
        if not quote and command.startswith("$((", i):  # arithmetic, not a substitution
            end = _arithmetic_end(command, i + 3)
            if "$(" in command[i + 3 : end] or "`" in command[i + 3 : end]:
                return None
            current.append(command[i:end])
            i = end
            continue
        if not quote and command.startswith("<<<", i):  # a here-string: one word of input
            current.append("<<<")
            i += 3
            continue
        if not quote and command.startswith("<<", i):
            return None
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
    if quote:
        return None
    parts.append("".join(current))
    return [part.strip() for part in parts if part.strip()]


def _ansi_c_end(command: str, i: int) -> int | None:
    """Just past the ``'`` that closes a ``$'…'`` whose body starts at `i` (a backslash
    escapes the next character there); None when it never closes."""
    while i < len(command):
        if command[i] == "\\":
            i += 2
            continue
        if command[i] == "'":
            return i + 1
        i += 1
    return None


def command_words(command: str) -> list[str] | None:
    """Shell words of one simple command (quotes removed), redirection operators split off;
    None when the quoting is unbalanced."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|<>()")
    lexer.whitespace_split = True
    lexer.commenters = ""  # a shell comment starts a word, never inside one (``a#b``)
    try:
        return list(lexer)
    except ValueError:
        return None


#: Where output may go without writing a file.
_HARMLESS_TARGETS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"})
_DESCRIPTOR = re.compile(r"[0-9]*-?\Z")
_WORD_END = frozenset(" \t\n;&|<>()")


def redirects_to_file(command: str) -> bool:
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
    {"if", "then", "else", "elif", "do", "while", "until", "!", "{", "(", "case", "in"}
)
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
#: A redirection written before the program (``>/dev/null rm x``, ``2> f rm x``, ``<in rm``):
#: the operator with its target in one word, or alone (its target is the next word).
_LEADING_REDIRECTION = re.compile(r"[0-9]*(?:&>>?|>>?\|?|<>?|>&|<&)(.*)\Z")
#: Programs that run a program given among their words: wrappers, shells given a command,
#: tools that run one per input or under a lock, multi-call binaries. Which of their words
#: is the program depends on options this cannot know (``timeout -s KILL 5 rm``, ``flock f
#: rm``), so every later word is taken as the possible start.
RUNNERS = frozenset(
    {
        *WRAPPERS,
        *("env", "timeout", "stdbuf", "ionice", "setsid", "xargs", "watch", "chroot", "flock"),
        *("busybox", "coproc", "eval", "strace", "ltrace", "unshare", "nsenter", "chrt"),
        *("taskset", "sh", "bash", "dash", "zsh", "ksh", "fish", "su", "runuser", "pkexec"),
    }
)


def rough_parts(command: str) -> list[str]:
    """`command` cut at every character that can start another command — ``;``, ``&``,
    ``|``, newlines, parentheses, backticks, ``$(`` — quotes or not, and line continuations
    joined: over-cut on purpose, for deny and ask rules only (``echo "a; rm b"`` yields
    ``rm b"``: a deny rule may catch more than it must, never less)."""
    joined = command.replace("\\\n", "")
    return [part.strip() for part in re.split(r"[;&|\n()`]|\$\(", joined) if part.strip()]


def command_spellings(command: str) -> list[str]:
    """Other spellings of the simple command `command` that may run the same program with
    the same arguments, for deny and ask rules to see (see the module doc): quotes, ``$'…'``
    and a leading backslash removed, line continuations joined, subshell or group
    parentheses and braces, shell keywords, leading assignments and redirections dropped, a
    path to the program cut to its name, and after a program that runs another (`RUNNERS`)
    every later word taken as where the program may start. Each differs from `command`;
    empty when there is none or the quoting is unclosed."""
    text = command.replace("\\\n", "").strip().lstrip("({! \t").rstrip(")}; \t")
    text = re.sub(r"\$'([^'\\]*)'", r"'\1'", text)
    try:
        words = shlex.split(text)
    except ValueError:
        return []
    starts: list[list[str]] = []
    while words:
        head = words[0]
        redirection = _LEADING_REDIRECTION.match(head)
        if head in _LEADING_KEYWORDS or _ASSIGNMENT.match(head):
            words = words[1:]
        elif redirection is not None:
            words = words[1:] if redirection.group(1) else words[2:]
        elif posixpath.basename(head) in RUNNERS:
            words = words[1:]
            starts.extend(words[start:] for start in range(1, len(words)))
        else:
            break
    found: list[str] = []
    for start in [words, *starts]:
        if start:
            found.append(" ".join(start))
            program = posixpath.basename(start[0])
            if program and program != start[0]:
                found.append(" ".join([program, *start[1:]]))
    return [spelling for spelling in dict.fromkeys(found) if spelling != command]
