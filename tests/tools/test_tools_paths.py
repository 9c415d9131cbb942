"""canonical_path: the one spelling of a path argument, anchored at the session's cwd."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from robotad.tools import ArgumentError, ReadTool, canonical_path
from tests.tools.tool_calls import call

CWD = Path("/work/project")


@pytest.mark.parametrize(
    ("argument", "expected"),
    [
        ("src/main.py", "/work/project/src/main.py"),
        ("./src//main.py", "/work/project/src/main.py"),
        ("../other/x", "/work/other/x"),
        ("src/../../../../../etc", "/etc"),
        (".", "/work/project"),
        ("sub/", "/work/project/sub"),
        ("/etc/passwd", "/etc/passwd"),
        ("/etc/./ssh/../passwd", "/etc/passwd"),
        ("//etc//passwd", "/etc/passwd"),
        ("///", "/"),
    ],
)
def test_canonical_path_is_lexical_and_anchored_at_cwd(argument: str, expected: str) -> None:
    """G-116: a relative path argument is canonicalised against the session's cwd."""
    assert canonical_path(argument, CWD) == expected


def test_canonical_path_expands_home(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", "/home/someone")
    assert canonical_path("~/notes.md", CWD) == "/home/someone/notes.md"
    assert canonical_path("~", CWD) == "/home/someone"


def test_canonical_path_ignores_the_process_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """G-117: the session's cwd, never the daemon's own working directory, anchors a path."""
    monkeypatch.chdir(tmp_path)
    assert canonical_path("a.txt", CWD) == "/work/project/a.txt"


def test_canonical_path_does_not_resolve_symlinks(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert canonical_path("link/file", tmp_path) == f"{tmp_path}/link/file"


@pytest.mark.parametrize("argument", ["", "a\0b"])
def test_canonical_path_refuses_what_names_no_file(argument: str) -> None:
    with pytest.raises(ArgumentError):
        canonical_path(argument, CWD)


def test_canonical_path_requires_an_absolute_cwd() -> None:
    with pytest.raises(ValueError, match="absolute"):
        canonical_path("x", Path("relative/cwd"))


_segment = st.sampled_from(["a", "b", "..", ".", "", "dir name", "ü", "~x"])


@settings(max_examples=200, deadline=None)
@given(st.lists(_segment, max_size=8), st.booleans())
def test_canonical_path_is_absolute_normal_and_idempotent(
    segments: list[str], absolute: bool
) -> None:
    argument = ("/" if absolute else "") + "/".join(segments)
    if argument == "":
        return
    result = canonical_path(argument, CWD)
    assert result.startswith("/")
    assert not result.startswith("//")
    assert os.path.normpath(result) == result
    assert canonical_path(result, Path("/elsewhere")) == result


async def test_tools_see_relative_paths_under_the_session_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """G-117: the tool receives the path resolved under the session's cwd, whatever the process
    cwd is, and reports it in canonical form."""
    session = tmp_path / "session"
    elsewhere = tmp_path / "elsewhere"
    session.mkdir()
    elsewhere.mkdir()
    (session / "notes.txt").write_text("session copy\n")
    (elsewhere / "notes.txt").write_text("process-cwd copy\n")
    monkeypatch.chdir(elsewhere)

    result = await call(ReadTool(), session, file_path="./sub/../notes.txt")

    assert result.ok
    assert "session copy" in result.content
    assert result.metadata["path"] == str(session / "notes.txt")
