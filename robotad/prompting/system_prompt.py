"""A new session's system prompt: robota's default prompt (or the client's `systemMessage`),
followed by the project instructions found for its working directory.

The default prompt is the template `default_system_prompt.md` beside this module, filled with
facts of the session (`SessionFacts`): working directory, operating system, date, the tools
offered, the permission mode and, when there is one, the sandbox. It is short on purpose: a
small local model's context is small.
"""

from __future__ import annotations

import platform
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from functools import cache
from importlib import resources
from string import Template
from typing import Final

from robotad.prompting.instructions import InstructionFile

__all__ = ["MODE_MEANINGS", "SessionFacts", "compose_system_prompt", "render_default"]

#: What each permission mode means for the model, in a few words.
MODE_MEANINGS: Final = {
    "default": "reading is allowed; edits and commands need the user's approval",
    "acceptEdits": "reading and editing are allowed; commands need the user's approval",
    "plan": "read only: plan the change, do not edit files or run commands",
    "bypassPermissions": "every tool is allowed without asking",
    "auto": "a classifier approves or refuses edits and commands in place of the user",
}


@dataclass(frozen=True)
class SessionFacts:
    """What the default prompt tells the model about where it is."""

    cwd: str
    tools: Sequence[str]
    permission_mode: str
    sandbox: str | None = None
    today: date | None = None
    os_name: str | None = None


@cache
def _template() -> Template:
    text = resources.files("robotad.prompting").joinpath("default_system_prompt.md").read_text()
    return Template(text)


def render_default(facts: SessionFacts) -> str:
    """The default system prompt for `facts`."""
    sandbox = f"- Sandbox: {facts.sandbox}\n" if facts.sandbox else ""
    return (
        _template()
        .substitute(
            cwd=facts.cwd,
            os=facts.os_name or f"{platform.system()} {platform.release()}",
            date=(facts.today or date.today()).isoformat(),
            tools=", ".join(facts.tools) or "none",
            mode=facts.permission_mode,
            mode_meaning=MODE_MEANINGS.get(facts.permission_mode, "see the user's rules"),
            sandbox=sandbox,
        )
        .strip()
    )


def compose_system_prompt(base: str, instructions: Sequence[InstructionFile]) -> str:
    """`base` followed by each instruction file under a heading naming its path."""
    if not instructions:
        return base
    parts = [base.rstrip(), "", "# Project instructions", ""]
    parts.append(
        "These files from the user and the project say how to work here; where they disagree, "
        "the later (nearer) one wins."
    )
    for item in instructions:
        parts += ["", f"## {item.path}", "", item.text.strip()]
    return "\n".join(parts)
