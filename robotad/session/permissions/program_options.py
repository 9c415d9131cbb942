"""What a command's program may reach beyond its name: files it writes, programs it runs.

`writes_or_runs(part)` is whether one simple command writes a file it names — by an output
redirection (`shell_text.redirects_to_file`) or by an option of its program — or runs a
program an option names. A prefix allow rule admits no such part (`enforcer._Call`), and
"allow always" remembers it exactly (`consent`): ``Bash(git log:*)`` was written for reading
history, not for ``git log --output=~/.bashrc``.

The programs are the ones people approve as readers (`_OPTIONS`): their long options are
matched by any abbreviation GNU getopt and git accept (``--out=F``, ``--output F``), their
short letters anywhere in a cluster (``-ruo F``) up to a letter that takes a value (``sort
-t# -o F`` reads ``#`` as ``-t``'s value, then ``-o``; ``sort -to`` is the separator ``o``),
and a value in the next word is skipped (``sort -T -- -o F``: ``--`` is ``-T``'s folder, and
for these programs a ``--`` never ends the reading, so ``-o`` after one asks too). git's
short letters count per subcommand (``format-patch -o``, ``archive -o``, ``grep -O``,
``clone -u``); ``find``'s actions (``-exec``, ``-delete``, ``-fprint``…) and the second
operand of ``uniq``/``xxd`` (``uniq IN OUT``) count as well. A part whose program is one of
these and whose text the shell would still expand — an unquoted ``$``, backtick, brace list
(``{-o,F}``) or glob (``*``, a file named ``-o`` is a glob's word too) — counts whatever it
would expand to.

Programs that write what they are given (``cp``, ``tee``, ``sed -i``) are not listed: they
are never remembered as families, and a rule naming them is the user's own. This is a guard
against approving more than was meant, not a boundary (the sandbox is).
"""

from __future__ import annotations

import posixpath
import re
from typing import Final, NamedTuple

from robotad.session.permissions.shell_text import command_words, redirects_to_file

__all__ = ["writes_or_runs"]


class _Options(NamedTuple):
    """A program's risky options: long ones, short letters, and the letters that take a
    value (a cluster ends at one; alone, it takes the next word)."""

    long: tuple[str, ...]
    letters: str = ""
    valued: str = ""


_OPTIONS: Final[dict[str, _Options]] = {
    "sort": _Options(("--output", "--compress-program"), "o", "kStT"),
    "shuf": _Options(("--output", "--random-source"), "o", "in"),
    "iconv": _Options(("--output",), "o", "ft"),
    "tree": _Options((), "oR", "LPIHT"),
    "rg": _Options(("--pre", "--hostname-bin")),
}
#: git: long options naming a file to write or a program to run, for every subcommand.
_GIT_LONG: Final = (
    *("--output", "--output-directory", "--open-files-in-pager"),
    *("--upload-pack", "--receive-pack", "--exec"),
)
#: git's short letters that do, by subcommand (with the letters taking a value).
_GIT_SHORT: Final[dict[str, _Options]] = {
    "format-patch": _Options((), "o", "v"),
    "archive": _Options((), "o", ""),
    "grep": _Options((), "O", "efABCm"),
    "clone": _Options((), "u", "bcjo"),
}
#: git's own options before the subcommand that take the next word (``git -C DIR log``).
_GIT_VALUED: Final = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace"})
#: ``find`` primaries that run a program, delete, or write a file.
_FIND_ACTIONS: Final = frozenset(
    {"-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf", "-fls"}
)
#: Programs whose second operand is the file they write, with their options taking a value.
_SECOND_OPERAND: Final[dict[str, frozenset[str]]] = {
    "uniq": frozenset({"-f", "-s", "-w"}),
    "xxd": frozenset({"-c", "-g", "-l", "-o", "-s", "-n", "-R"}),
}
_PROGRAMS: Final = frozenset({*_OPTIONS, "git", "find", *_SECOND_OPERAND})
#: Brace expansion: a list or a sequence between unquoted braces (not git's ``@{u}``).
_BRACES: Final = re.compile(r"\{[^{}\s]*(?:,|\.\.)[^{}\s]*\}")
#: A redirection operator as `command_words` splits it off.
_OPERATOR: Final = re.compile(r"[<>&|]+")


def writes_or_runs(command: str) -> bool:
    """Whether the simple command `command` writes a file it names (a redirection or an
    option) or runs a program an option names (see the module doc)."""
    return redirects_to_file(command) or _risky_program(command)


def _risky_program(command: str) -> bool:
    words = command_words(command)
    if words is None:
        return True  # quoting this cannot read to its end
    if not words:
        return False
    program = posixpath.basename(words[0])
    if program not in _PROGRAMS:
        return False
    if _expands(command):
        return True
    arguments = _without_redirections(words[1:])
    if program == "git":
        return _git_risky(arguments)
    if program == "find":
        return any(word in _FIND_ACTIONS for word in arguments)
    if program in _SECOND_OPERAND:
        return _operands(arguments, _SECOND_OPERAND[program]) >= 2
    return _options_risky(arguments, _OPTIONS[program], stop_at_dashes=False)


def _options_risky(arguments: list[str], options: _Options, *, stop_at_dashes: bool) -> bool:
    """Whether `arguments` hold one of `options` (see `_Options`)."""
    skip = False
    for word in arguments:
        if skip:
            skip = False
            continue
        if word == "--":
            if stop_at_dashes:
                return False
            continue
        if word.startswith("--"):
            name = word[2:].partition("=")[0]
            if name and any(option[2:].startswith(name) for option in options.long):
                return True
        elif word.startswith("-") and len(word) > 1:
            for index, letter in enumerate(word[1:]):
                if letter in options.letters:
                    return True
                if letter in options.valued:
                    skip = index == len(word) - 2  # alone at the end: the next word is its value
                    break
    return False


def _git_risky(arguments: list[str]) -> bool:
    """git's global options, then its subcommand's (`_GIT_LONG`, `_GIT_SHORT`); a ``--``
    ends them (pathspecs follow)."""
    index = 0
    while index < len(arguments) and arguments[index].startswith("-"):
        if _options_risky([arguments[index]], _Options(_GIT_LONG), stop_at_dashes=True):
            return True
        index += 2 if arguments[index] in _GIT_VALUED else 1
    if index >= len(arguments):
        return False
    short = _GIT_SHORT.get(arguments[index], _Options(()))
    return _options_risky(
        arguments[index + 1 :],
        _Options(_GIT_LONG, short.letters, short.valued),
        stop_at_dashes=True,
    )


def _operands(arguments: list[str], valued: frozenset[str]) -> int:
    """How many operands `arguments` hold, skipping options and the values they take."""
    operands = 0
    skip = False
    for word in arguments:
        if skip:
            skip = False
        elif word in valued:
            skip = True
        elif word == "-" or not word.startswith("-"):
            operands += 1
    return operands


def _without_redirections(words: list[str]) -> list[str]:
    """`words` less the redirections `command_words` split off (an operator and its target):
    ``uniq < in.txt`` has no operand."""
    kept: list[str] = []
    skip = False
    for index, word in enumerate(words):
        following = words[index + 1] if index + 1 < len(words) else ""
        if skip:
            skip = False
        elif _OPERATOR.fullmatch(word):
            skip = True  # its target
        elif not (word.isdigit() and _OPERATOR.fullmatch(following)):  # ``2>``'s descriptor
            kept.append(word)
    return kept


def _expands(command: str) -> bool:
    """Whether the shell would still expand part of `command` into words: an unquoted ``$``,
    backtick, brace list or glob character, or a ``$``/backtick inside double quotes."""
    unquoted: list[str] = []
    quote = ""
    i = 0
    while i < len(command):
        ch = command[i]
        if quote == "'":
            quote = "" if ch == "'" else quote
        elif quote == '"':
            if ch in "$`":
                return True
            if ch == "\\":
                i += 1
            elif ch == '"':
                quote = ""
        elif ch == "\\":
            i += 1
            unquoted.append(" ")
        elif ch in "'\"":
            quote = ch
            unquoted.append(" ")
        else:
            unquoted.append(ch)
        i += 1
    text = "".join(unquoted)
    return bool(re.search(r"[$`*?\[]", text) or _BRACES.search(text))
