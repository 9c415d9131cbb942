"""What a new session's model is told before the first prompt: robota's default system prompt
(a template shipped as data, `default_system_prompt.md`) and the project instructions
(``AGENTS.md`` files) found for the session's working directory."""

from __future__ import annotations

from robotad.prompting.instructions import (
    INSTRUCTION_BYTES_CAP,
    InstructionFile,
    find_instruction_files,
    load_instructions,
)
from robotad.prompting.system_prompt import SessionFacts, compose_system_prompt, render_default

__all__ = [
    "INSTRUCTION_BYTES_CAP",
    "InstructionFile",
    "SessionFacts",
    "compose_system_prompt",
    "find_instruction_files",
    "load_instructions",
    "render_default",
]
