"""Write and Edit in a sandboxed session: held to the same writable roots as Bash, with every
symlink resolved, whatever the permission mode (the tools refuse; no gate is involved)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import trio

from robotad.agent.tool import ToolResult
from robotad.sandbox import Confinement, SandboxPolicy
from robotad.tools import EditTool, WriteTool
from tests.sandbox.conftest import ORIGINAL, Arena
from tests.tools.tool_calls import call


def _tools(
    mode: str = "workspace-write", protected: tuple[str, ...] = ()
) -> tuple[WriteTool, EditTool]:
    confinement = Confinement(SandboxPolicy(mode=mode), protected=protected)  # type: ignore[arg-type]
    return WriteTool(confinement), EditTool(confinement)


async def _write(tool: WriteTool, arena: Arena, path: str) -> ToolResult:
    with trio.fail_after(10):
        return await call(tool, arena.ws, file_path=path, content="pwned\n")


async def _edit(tool: EditTool, arena: Arena, path: str) -> ToolResult:
    with trio.fail_after(10):
        return await call(tool, arena.ws, file_path=path, old_string="original", new_string="x")


async def test_inside_the_workspace_writes_and_edits_work(arena: Arena) -> None:
    write, edit = _tools()
    assert (await _write(write, arena, "notes.txt")).ok
    (arena.ws / "code.py").write_text(ORIGINAL)
    assert (await _edit(edit, arena, "code.py")).ok
    assert (arena.ws / "code.py").read_text() == "x\n"


@pytest.mark.parametrize(
    "spelling",
    [
        pytest.param("{target}", id="absolute"),
        pytest.param("../outside/target.txt", id="dot-dot"),
        pytest.param("link/target.txt", id="symlinked-folder"),
        pytest.param("file-link", id="symlinked-file"),
        pytest.param("~/planted", id="home"),
        pytest.param(".git/hooks/pre-commit", id="git-hooks"),
        pytest.param(".git/HEAD", id="git-head"),
        pytest.param("/proc/self/root{target}", id="proc-self-root"),
    ],
)
async def test_outside_the_roots_both_tools_refuse(arena: Arena, spelling: str) -> None:
    (arena.ws / "link").symlink_to(arena.outside)
    (arena.ws / "file-link").symlink_to(arena.target)
    path = spelling.format(target=arena.target)
    write, edit = _tools()
    for result in (await _write(write, arena, path), await _edit(edit, arena, path)):
        assert not result.ok
        assert "sandbox" in result.content or "read-only" in result.content
    assert arena.untouched()


async def test_the_refusal_names_where_a_link_leads(arena: Arena) -> None:
    (arena.ws / "link").symlink_to(arena.outside)
    result = await _write(_tools()[0], arena, "link/target.txt")
    assert f"resolves to {os.path.realpath(arena.target)}" in result.content
    assert str(arena.ws) in result.content  # the roots it may write


async def test_read_only_mode_refuses_even_the_workspace(arena: Arena) -> None:
    write, edit = _tools("read-only")
    (arena.ws / "code.py").write_text(ORIGINAL)
    assert not (await _write(write, arena, "notes.txt")).ok
    assert not (await _edit(edit, arena, "code.py")).ok
    assert not (arena.ws / "notes.txt").exists()
    assert (arena.ws / "code.py").read_text() == ORIGINAL


async def test_robotas_own_folder_inside_the_workspace_is_refused(arena: Arena) -> None:
    config = arena.ws / "robota-config"
    config.mkdir()
    result = await _write(_tools(protected=(str(config),))[0], arena, "robota-config/config.toml")
    assert not result.ok
    assert "robota's own folder" in result.content
    assert not (config / "config.toml").exists()


async def test_an_unconfined_session_writes_anywhere(arena: Arena, tmp_path: Path) -> None:
    result = await call(WriteTool(), arena.ws, file_path=str(tmp_path / "f"), content="x")
    assert result.ok


async def test_a_writable_root_made_a_link_inside_the_workspace_is_refused_too(
    arena: Arena,
) -> None:
    """Write and Edit hold to Bash's rule: a configured root reached through a link inside a
    writable folder (which a command could have made) is not writable."""
    (arena.ws / ".cache").symlink_to(arena.outside)
    confinement = Confinement(
        SandboxPolicy(mode="workspace-write", writable_roots=(str(arena.ws / ".cache"),))
    )
    write, edit = WriteTool(confinement), EditTool(confinement)
    for path in (str(arena.target), ".cache/target.txt"):
        for result in (await _write(write, arena, path), await _edit(edit, arena, path)):
            assert not result.ok
            assert "outside the sandbox's writable roots" in result.content
    assert arena.untouched()


async def test_a_hidden_secret_is_refused_even_inside_the_workspace(
    arena: Arena, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a secret folder as the workspace (``~/.aws``), a command sees it as an empty
    throwaway folder; Write and Edit hold to that, so no credential is read back or planted.
    (A home as the workspace is read-only altogether: tests/sandbox/test_sandbox_home.py.)"""
    monkeypatch.setenv("HOME", str(arena.ws))
    aws = arena.ws / ".aws"
    aws.mkdir()
    (aws / "credentials").write_text("original\n")
    write = WriteTool(Confinement(SandboxPolicy(mode="workspace-write")))
    edit = EditTool(Confinement(SandboxPolicy(mode="workspace-write")))
    for path in ("~/.aws/credentials", "config"):
        with trio.fail_after(10):
            results = (
                await call(write, aws, file_path=path, content="pwned\n"),
                await call(edit, aws, file_path=path, old_string="original", new_string="x"),
            )
        for result in results:
            assert not result.ok
            assert "which the sandbox hides from commands" in result.content
    assert (aws / "credentials").read_text() == "original\n"
    assert not (aws / "config").exists()
