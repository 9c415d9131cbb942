"""Slash commands: their names, arguments and help, and the parsing of a typed line.

A line starting with ``/`` is a command (``//text`` sends ``/text`` as a prompt). The table
`SLASH_COMMANDS` is the one list: the completer offers its names, ``/help`` prints it, and
`parse_slash` refuses anything else with a message naming ``/help``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = [
    "SLASH_COMMANDS",
    "SlashCommand",
    "UnknownCommand",
    "help_text",
    "parse_slash",
    "prompt_text",
]


@dataclass(frozen=True)
class SlashCommand:
    """A command as the person types it: `name` and its (possibly empty) `argument`."""

    name: str
    argument: str


class UnknownCommand(ValueError):
    """A ``/word`` that is no command, or a command missing its required argument."""


#: name → (argument synopsis, argument required, what it does).
SLASH_COMMANDS: Final[dict[str, tuple[str, bool, str]]] = {
    "help": ("", False, "this list"),
    "new": ("", False, "start a new session in this directory and switch to it"),
    "sessions": ("[N|ID]", False, "list sessions; pick one (by number or id) to switch"),
    "fork": ("[MESSAGE_ID]", False, "fork this session (up to MESSAGE_ID) and switch to it"),
    "compact": ("[INSTRUCTIONS]", False, "summarise the history to free context"),
    "context": ("", False, "show how much of the context window is used"),
    "mode": ("MODE", True, "permission mode: default, acceptEdits, plan, bypassPermissions, auto"),
    "model": ("[NAME]", False, "show the model; with NAME, a new session on that model"),
    "allow": ("RULE", True, "add a session allow rule, e.g. Bash(git status:*)"),
    "deny": ("RULE", True, "add a session deny rule"),
    "abort": ("", False, "abort the running turn"),
    "history": ("[N]", False, "show the last N messages (default 10)"),
    "last": ("", False, "show the last tool call in full"),
    "export": ("FILE", True, "write the session as a JSON artifact to FILE"),
    "quit": ("", False, "leave (a running turn goes on)"),
}


def parse_slash(line: str) -> SlashCommand | None:
    """The command `line` names, or None when `line` is a prompt.

    Raises `UnknownCommand` for an unknown name or a missing required argument.
    """
    text = line.strip()
    if not text.startswith("/") or text.startswith("//"):
        return None
    name, _, argument = text[1:].partition(" ")
    entry = SLASH_COMMANDS.get(name)
    if entry is None:
        raise UnknownCommand(f"unknown command /{name} (/help lists them)")
    synopsis, required, _ = entry
    argument = argument.strip()
    if required and not argument:
        raise UnknownCommand(f"/{name} needs {synopsis} (/help lists the commands)")
    return SlashCommand(name, argument)


def prompt_text(line: str) -> str:
    """The prompt a non-command line sends (``//x`` sends ``/x``)."""
    return line[1:] if line.lstrip().startswith("//") else line


def help_text() -> str:
    """Every command with its synopsis, then the keys."""
    heads = [f"/{name} {synopsis}".rstrip() for name, (synopsis, _, _) in SLASH_COMMANDS.items()]
    column = max(map(len, heads)) + 2
    rows = [
        head.ljust(column) + what
        for head, (synopsis, _, what) in zip(heads, SLASH_COMMANDS.values(), strict=True)
    ]
    keys = [
        "Enter sends · Alt-Enter or a trailing \\ adds a line · Up/Down, Ctrl-R: prompt history",
        "Tab completes commands and paths · y/a/n answer an approval (once/always/no)",
        "Ctrl-C aborts the running turn (twice leaves) · Ctrl-D leaves (the turn goes on)",
    ]
    return "\n".join([*rows, "", *keys])
