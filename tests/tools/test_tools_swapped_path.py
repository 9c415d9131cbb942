"""A path swapped between the permission check and the open (a link made meanwhile by a
command running beside the call) never leads Read or Grep to another file than was checked.

The race is made deterministic here: the check's real path is taken, then the path is turned
into a link to a secret, then the tool runs with the check's answer in `ToolContext`.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import trio

from robotad.tools import GlobTool, GrepTool, ReadTool, Tool, ToolContext, ToolResult
from robotad.tools.textfile import moved_since_check, open_regular_file


def _swapped(tmp_path: Path) -> tuple[Path, str, Path]:
    """A decoy ``x`` whose real path a check judged, then made a link to ``vault/key``."""
    vault = tmp_path / "vault"
    vault.mkdir()
    secret = vault / "key"
    secret.write_text("TOKEN=hunter2\n")
    decoy = tmp_path / "x"
    decoy.write_text("TOKEN=decoy\n")
    judged = os.path.realpath(decoy)
    decoy.unlink()
    decoy.symlink_to(secret)
    return decoy, judged, secret


async def _run(tool: Tool, cwd: Path, ctx_real: str | None, **arguments: str) -> ToolResult:
    typed = tool.decode_arguments(arguments)
    with trio.fail_after(10):
        return await tool.run(typed, ToolContext(cwd, "s", real_path=ctx_real))


def test_moved_since_check_compares_the_opened_file(tmp_path: Path) -> None:
    decoy, judged, secret = _swapped(tmp_path)
    with open_regular_file(str(decoy)) as raw:
        assert moved_since_check(raw.fileno(), str(decoy), None) is None
        assert moved_since_check(raw.fileno(), str(decoy), str(secret)) is None
        refusal = moved_since_check(raw.fileno(), str(decoy), judged)
    assert refusal is not None
    assert "changed after its permission check" in refusal
    assert "vault" not in refusal  # says nothing of where the link leads


async def test_read_refuses_a_path_swapped_after_its_check(tmp_path: Path) -> None:
    _decoy, judged, secret = _swapped(tmp_path)
    result = await _run(ReadTool(), tmp_path, judged, file_path="x")
    assert not result.ok
    assert "hunter2" not in result.content
    assert "changed after its permission check" in result.content
    # A link the check itself resolved is read as before.
    allowed = await _run(ReadTool(), tmp_path, str(secret), file_path="x")
    assert allowed.ok
    assert "hunter2" in allowed.content


async def test_grep_of_a_file_refuses_a_path_swapped_after_its_check(tmp_path: Path) -> None:
    _decoy, judged, _secret = _swapped(tmp_path)
    result = await _run(GrepTool(), tmp_path, judged, pattern="TOKEN", path="x")
    assert not result.ok
    assert "hunter2" not in result.content


class _WithholdsTheVault:
    """A policy that withholds the vault by the path it is given, resolving nothing: only
    the file actually opened, judged by its real path, can be caught."""

    def __init__(self, vault: Path) -> None:
        self.vault = str(vault)

    def exempts(self, tool_name: str, host: str) -> bool:
        return False

    def withholds(self, tool_name: str, path: str, root: str) -> bool:
        return path.startswith(self.vault + "/")


async def test_grep_over_a_folder_judges_each_file_it_opened(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "notes").write_text("TOKEN=plain\n")
    _decoy, _, secret = _swapped(tmp_path)
    (tree / "x").symlink_to(secret)
    tool = GrepTool()
    typed = tool.decode_arguments({"pattern": "TOKEN", "path": str(tree)})
    with trio.fail_after(10):
        result = await tool.run(
            typed, ToolContext(tmp_path, "s", _WithholdsTheVault(secret.parent))
        )
    assert result.ok
    assert "hunter2" not in result.content
    assert "TOKEN=plain" in result.content
    assert "1 file(s) the permission rules withhold" in result.content


async def test_glob_refuses_a_folder_swapped_after_its_check(tmp_path: Path) -> None:
    _, _, secret = _swapped(tmp_path)
    folder = tmp_path / "d"
    folder.mkdir()
    (folder / "plain.txt").write_text("")
    judged = os.path.realpath(folder)
    listed = await _run(GlobTool(), tmp_path, judged, pattern="*", path="d")
    assert listed.ok
    assert "plain.txt" in listed.content
    folder.rename(tmp_path / "d.old")
    folder.symlink_to(secret.parent)
    result = await _run(GlobTool(), tmp_path, judged, pattern="*", path="d")
    assert not result.ok
    assert "key" not in result.content.replace(str(tmp_path), "")
    assert "changed after its permission check" in result.content


def _without_proc(monkeypatch: pytest.MonkeyPatch) -> None:
    """As on macOS or in a container without ``/proc``: no descriptor names its file."""
    real_readlink, real_isdir = os.readlink, os.path.isdir

    def readlink(path: str, *args: object, **kwargs: object) -> str:
        if str(path).startswith("/proc/"):
            raise FileNotFoundError(2, "No such file or directory", path)
        return real_readlink(path)

    def isdir(path: object) -> bool:
        return False if str(path).startswith("/proc/") else real_isdir(path)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "readlink", readlink)
    monkeypatch.setattr(os.path, "isdir", isdir)


async def test_without_proc_the_tools_read_what_was_checked_and_refuse_a_swap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without ``/proc`` the opened file is told by its name resolved again and compared by
    device and inode: a checked file reads and globs as before (it was refused outright),
    and a swap is still refused."""
    _without_proc(monkeypatch)
    plain = tmp_path / "plain.txt"
    plain.write_text("TOKEN=plain\n")
    read = await _run(ReadTool(), tmp_path, os.path.realpath(plain), file_path="plain.txt")
    assert read.ok
    assert "TOKEN=plain" in read.content
    grep = await _run(GrepTool(), tmp_path, os.path.realpath(tmp_path), pattern="TOKEN")
    assert grep.ok
    assert "plain.txt" in grep.content
    listed = await _run(GlobTool(), tmp_path, os.path.realpath(tmp_path), pattern="*.txt")
    assert listed.ok
    assert "plain.txt" in listed.content
    _decoy, judged, _secret = _swapped(tmp_path)
    swapped = await _run(ReadTool(), tmp_path, judged, file_path="x")
    assert not swapped.ok
    assert "hunter2" not in swapped.content
