"""A sandboxed session whose folder is (or holds) the home, ``~/.ssh`` or ``~/.config``'s
autostart, systemd or fish folders: that folder stays read-only, so no command and no Write or
Edit can create a file that runs later — an ``authorized_keys`` line, a ``~/.profile``, a user
unit — even where none exists yet to be bound read-only (PROTOCOL.md §10.4)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import trio

from robotad.sandbox import Confinement, SandboxPolicy, SandboxSupport
from robotad.sandbox.layout import held_read_only, persistence_inside, writable_dirs
from robotad.tools import BashTool, WriteTool
from tests.sandbox.conftest import Arena, confinement
from tests.tools.tool_calls import call

PLANT = (
    "mkdir -p ~/.ssh && echo key >> ~/.ssh/authorized_keys; echo run >> ~/.profile; "
    "mkdir -p ~/.config/systemd/user && echo unit > ~/.config/systemd/user/evil.service; "
    "mkdir -p ~/.config/autostart && echo x > ~/.config/autostart/evil.desktop; ls"
)


def _everything_under(folder: Path) -> list[str]:
    return sorted(str(path.relative_to(folder)) for path in folder.rglob("*"))


def test_the_persistence_folders_a_folder_holds_are_named(arena: Arena) -> None:
    home = str(arena.home)
    assert persistence_inside(home) == "~"
    assert persistence_inside("/") == "~"
    assert persistence_inside(os.path.join(home, ".config")) == "~/.config/autostart"
    assert persistence_inside(os.path.join(home, ".ssh")) == "~/.ssh"
    assert persistence_inside(os.path.join(home, "project")) is None
    assert persistence_inside(str(arena.ws)) is None


def test_a_home_folder_or_root_is_held_back_from_the_writable_folders(arena: Arena) -> None:
    policy = SandboxPolicy(mode="workspace-write", writable_roots=("/", str(arena.home)))
    assert writable_dirs(policy, str(arena.ws)) == [str(arena.ws)]
    assert held_read_only(policy, str(arena.ws)) == [("/", "~"), (str(arena.home), "~")]
    at_home = SandboxPolicy(mode="workspace-write")
    assert writable_dirs(at_home, str(arena.home)) == []


async def test_a_command_in_the_home_plants_nothing_and_says_why(
    sandbox_support: SandboxSupport, arena: Arena
) -> None:
    """The reviewed escape: a session in the home, no ``~/.ssh`` yet, a sandboxed Bash (which
    runs without asking) appending to ``~/.ssh/authorized_keys``."""
    bash = BashTool(confinement(sandbox_support))
    with trio.fail_after(30):
        result = await call(bash, arena.home, command=PLANT)
    assert _everything_under(arena.home) == []
    assert "note: the sandbox keeps" in result.content
    assert "because it is ~" in result.content
    assert arena.untouched()


async def test_a_home_root_beside_the_workspace_stays_read_only(
    sandbox_support: SandboxSupport, arena: Arena
) -> None:
    bash = BashTool(confinement(sandbox_support, roots=(str(arena.home), "/")))
    with trio.fail_after(30):
        result = await call(bash, arena.ws, command=f"{PLANT}; echo made > made.txt")
    assert _everything_under(arena.home) == []
    assert (arena.ws / "made.txt").read_text() == "made\n"
    assert "note:" not in result.content  # the workspace itself is writable
    assert arena.untouched()


@pytest.mark.parametrize("folder", [".config", ".config/systemd", ".ssh"])
async def test_a_session_in_a_persistence_folder_cannot_write_there(
    sandbox_support: SandboxSupport, arena: Arena, folder: str
) -> None:
    cwd = arena.home / folder
    cwd.mkdir(parents=True)
    bash = BashTool(confinement(sandbox_support))
    with trio.fail_after(30):
        result = await call(bash, cwd, command="echo x > planted; mkdir -p user; echo y > user/u")
    assert _everything_under(cwd) == []
    assert "note: the sandbox keeps" in result.content


async def test_write_refuses_a_file_in_a_home_workspace_saying_why(arena: Arena) -> None:
    write = WriteTool(Confinement(SandboxPolicy(mode="workspace-write")))  # no bwrap needed
    for path in ("~/.ssh/authorized_keys", "~/.profile", "notes.txt"):
        with trio.fail_after(10):
            result = await call(write, arena.home, file_path=path, content="x\n")
        assert not result.ok
        assert "read-only because it is ~" in result.content
    assert _everything_under(arena.home) == []
