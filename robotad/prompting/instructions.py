"""Project instructions: the ``AGENTS.md`` convention, found and read for one working directory.

Where robota looks, in the order the files are added to the system prompt (nearest last, so the
most specific instructions are read last and win where they disagree):

1. the user's folder: ``$XDG_CONFIG_HOME/robota/<name>``;
2. the session's repository: every folder from the repository root down to the working
   directory, ``<folder>/<name>``. The repository root is the nearest folder, the working
   directory included, holding a ``.git`` entry (folder or file, so worktrees count); outside a
   repository only the working directory itself is looked at, never its parents.

``<name>`` runs over the configured names (``[instructions] files``, default ``["AGENTS.md"]``),
in that order, within each folder. A file larger than `INSTRUCTION_BYTES_CAP` is cut there, and
the cut is said in the text the model gets. A file that cannot be read is skipped (and logged);
bytes that are not UTF-8 are replaced. Blocking: call it from a thread.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

__all__ = [
    "INSTRUCTION_BYTES_CAP",
    "InstructionFile",
    "find_instruction_files",
    "load_instructions",
]

log = logging.getLogger("robotad.prompting")

#: The most of one instruction file the model is given; the rest is cut with a note.
INSTRUCTION_BYTES_CAP: Final = 32 * 1024


@dataclass(frozen=True)
class InstructionFile:
    """One instruction file as the model gets it: `text` already carries the note of a cut."""

    path: Path
    text: str
    cut: bool


def repository_root(cwd: Path) -> Path | None:
    """The nearest folder from `cwd` upwards (itself included) holding ``.git``; None outside
    a repository."""
    for folder in (cwd, *cwd.parents):
        if os.path.lexists(folder / ".git"):
            return folder
    return None


def find_instruction_files(cwd: Path, names: Sequence[str], user_dir: Path) -> list[Path]:
    """The instruction files that exist for `cwd`, in the order they are added (see the module
    doc). `user_dir` is the user's robota config folder."""
    root = repository_root(cwd)
    folders = [cwd] if root is None else [cwd, *cwd.parents[: len(cwd.parents) - len(root.parents)]]
    folders.reverse()  # root first, the working directory last
    found: list[Path] = []
    for folder in (user_dir, *folders):
        for name in names:
            candidate = folder / name
            if candidate.is_file() and candidate not in found:
                found.append(candidate)
    return found


def load_instructions(
    cwd: Path, names: Sequence[str], user_dir: Path, *, cap: int = INSTRUCTION_BYTES_CAP
) -> list[InstructionFile]:
    """Read every instruction file of `cwd` (see `find_instruction_files`), each cut at `cap`
    bytes with a visible note."""
    loaded: list[InstructionFile] = []
    for path in find_instruction_files(cwd, names, user_dir):
        try:
            with open(path, "rb") as handle:
                data = handle.read(cap + 1)
                size = os.fstat(handle.fileno()).st_size
        except OSError as exc:
            log.warning("cannot read instruction file %s: %s", path, exc.strerror or exc)
            continue
        cut = len(data) > cap
        text = data[:cap].decode("utf-8", errors="replace")
        if cut:
            text = text.rstrip("\ufffd")  # a character split by the cut
            text += (
                f"\n\n[robota: {path.name} was cut here: it has {size} bytes and only the first "
                f"{cap} are included]"
            )
        loaded.append(InstructionFile(path, text, cut))
    return loaded
