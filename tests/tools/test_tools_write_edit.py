"""Write and Edit: atomic replacement, kept permissions, and every refusal as a failed result."""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import tempfile
import time
from pathlib import Path

import pytest
import trio

from robotad.tools import EditTool, WriteTool
from robotad.tools.edit import MAX_EDIT_BYTES
from tests.tools.tool_calls import call

# --- Write ---------------------------------------------------------------------------------


async def test_write_creates_the_file_and_missing_parents(tmp_path: Path) -> None:
    result = await call(WriteTool(), tmp_path, file_path="deep/er/new.txt", content="a\nb\nc")
    target = tmp_path / "deep" / "er" / "new.txt"
    assert result.ok
    assert target.read_text() == "a\nb\nc"
    assert result.content == f"Created {target} (5 bytes, 3 lines)"
    assert result.metadata == {"path": str(target), "bytes": 5, "lines": 3, "created": True}


async def test_write_counts_bytes_not_characters(tmp_path: Path) -> None:
    result = await call(WriteTool(), tmp_path, file_path="u.txt", content="é\n")
    assert result.metadata["bytes"] == 3
    assert result.metadata["lines"] == 1
    assert (tmp_path / "u.txt").read_bytes() == "é\n".encode()


async def test_write_overwrites_keeping_the_mode_and_leaves_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "script.sh"
    target.write_text("old\n")
    target.chmod(0o750)
    result = await call(WriteTool(), tmp_path, file_path="script.sh", content="new\n")
    assert result.ok
    assert result.content.startswith(f"Overwrote {target}")
    assert result.metadata["created"] is False
    assert target.read_text() == "new\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o750
    assert os.listdir(tmp_path) == ["script.sh"]


async def test_new_file_gets_the_default_mode_under_the_umask(tmp_path: Path) -> None:
    previous = os.umask(0o027)
    try:
        await call(WriteTool(), tmp_path, file_path="fresh.txt", content="x")
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / "fresh.txt").stat().st_mode) == 0o640


async def test_write_goes_through_a_symlink(tmp_path: Path) -> None:
    (tmp_path / "real.txt").write_text("before")
    (tmp_path / "link.txt").symlink_to("real.txt")
    result = await call(WriteTool(), tmp_path, file_path="link.txt", content="after")
    assert result.ok
    assert (tmp_path / "link.txt").is_symlink()
    assert (tmp_path / "real.txt").read_text() == "after"


async def test_write_refuses_a_directory(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    result = await call(WriteTool(), tmp_path, file_path="d", content="x")
    assert not result.ok
    assert "is a directory" in result.content
    assert os.listdir(tmp_path / "d") == []


@pytest.mark.parametrize("mode", [0o444, 0o400, 0o555])
async def test_write_and_edit_refuse_a_read_only_file(tmp_path: Path, mode: int) -> None:
    """A file marked read-only is not replaced: the atomic rename would have replaced it
    (also as root, who may write anything), where an in-place write is refused."""
    target = tmp_path / "locked.txt"
    target.write_text("keep me\n")
    target.chmod(mode)
    written = await call(WriteTool(), tmp_path, file_path="locked.txt", content="new\n")
    edited = await call(
        EditTool(), tmp_path, file_path="locked.txt", old_string="keep", new_string="lose"
    )
    for result in (written, edited):
        assert not result.ok
        assert (
            result.content
            == f"{target} is read-only ({stat.filemode(0o100000 | mode)}); it was left as it is"
        )
    assert target.read_text() == "keep me\n"
    assert stat.S_IMODE(target.stat().st_mode) == mode
    assert os.listdir(tmp_path) == ["locked.txt"]


async def test_write_goes_through_a_link_to_a_writable_file_only(tmp_path: Path) -> None:
    (tmp_path / "real.txt").write_text("before")
    (tmp_path / "real.txt").chmod(0o444)
    (tmp_path / "link.txt").symlink_to("real.txt")
    result = await call(WriteTool(), tmp_path, file_path="link.txt", content="after")
    assert not result.ok
    assert "read-only" in result.content
    assert (tmp_path / "real.txt").read_text() == "before"


async def test_write_refuses_a_parent_that_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("keep")
    result = await call(WriteTool(), tmp_path, file_path="f/child.txt", content="x")
    assert not result.ok
    assert result.content == f"a parent of {tmp_path / 'f' / 'child.txt'} is not a directory"
    assert (tmp_path / "f").read_text() == "keep"


#: The unprivileged user the permission case runs as when the suite runs as root.
NOBODY = 65534
#: Bound on the unprivileged child.
CHILD_TIMEOUT = 30.0


def _failed_write_as_nobody(root: Path) -> dict[str, object]:
    """In a forked child that dropped to uid/gid 65534 (root ignores permissions): make a
    read-only folder holding a file, Write over it, report what happened."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        status = 1
        try:
            os.close(read_end)
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            target = root / "locked" / "file.txt"
            target.parent.mkdir()
            target.write_text("original")
            target.parent.chmod(0o555)
            result = trio.run(lambda: call(WriteTool(), root, file_path=str(target), content="new"))
            report = {
                "uid": os.getuid(),
                "ok": result.ok,
                "content": result.content,
                "kept": target.read_text(),
                "entries": os.listdir(target.parent),
            }
            os.write(write_end, json.dumps(report).encode())
            status = 0
        finally:
            os._exit(status)
    os.close(write_end)
    deadline = time.monotonic() + CHILD_TIMEOUT
    while os.waitpid(pid, os.WNOHANG) == (0, 0):
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail("the unprivileged child did not finish")
        time.sleep(0.02)
    with os.fdopen(read_end, "rb") as pipe:
        data = pipe.read()
    assert data, "the unprivileged child reported nothing"
    report: dict[str, object] = json.loads(data)
    return report


def test_failed_write_leaves_the_file_untouched(tmp_path: Path) -> None:
    """A Write the folder's permissions refuse is a failed result and changes nothing. Root
    ignores folder permissions, so as root it runs in a child that became uid 65534."""
    if os.geteuid() == 0:
        root = Path(tempfile.mkdtemp(prefix="robota-nobody-"))
        try:
            os.chown(root, NOBODY, NOBODY)
            report = _failed_write_as_nobody(root)
        finally:
            for folder in root.rglob("*"):
                if folder.is_dir():
                    folder.chmod(0o755)
            shutil.rmtree(root)
        assert report["uid"] == NOBODY
    else:
        target = tmp_path / "locked" / "file.txt"
        target.parent.mkdir()
        target.write_text("original")
        target.parent.chmod(0o555)
        try:
            result = trio.run(
                lambda: call(WriteTool(), tmp_path, file_path=str(target), content="new")
            )
        finally:
            target.parent.chmod(0o755)
        report = {
            "ok": result.ok,
            "content": result.content,
            "kept": target.read_text(),
            "entries": os.listdir(target.parent),
        }
    assert report["ok"] is False
    assert "permission denied" in str(report["content"])
    assert report["kept"] == "original"
    assert report["entries"] == ["file.txt"]


async def test_write_refuses_unencodable_content(tmp_path: Path) -> None:
    result = await call(WriteTool(), tmp_path, file_path="s.txt", content="ok \ud800")
    assert not result.ok
    assert "UTF-8" in result.content
    assert not (tmp_path / "s.txt").exists()


# --- Edit ----------------------------------------------------------------------------------


async def test_edit_replaces_one_occurrence_and_shows_the_region(tmp_path: Path) -> None:
    target = tmp_path / "code.py"
    target.write_text("".join(f"line{i}\n" for i in range(1, 11)))
    target.chmod(0o640)
    result = await call(
        EditTool(), tmp_path, file_path="code.py", old_string="line5\n", new_string="five\n"
    )
    assert result.ok
    assert result.metadata == {"path": str(target), "replacements": 1}
    assert target.read_text().splitlines()[4] == "five"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert result.content.splitlines() == [
        f"Replaced 1 occurrence in {target}:",
        "     2\tline2",
        "     3\tline3",
        "     4\tline4",
        "     5\tfive",
        "     6\tline6",
        "     7\tline7",
        "     8\tline8",
        "     9\tline9",
    ]
    assert os.listdir(tmp_path) == ["code.py"]


async def test_edit_refuses_a_string_that_is_not_there(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("alpha\n")
    result = await call(EditTool(), tmp_path, file_path="a.txt", old_string="beta", new_string="x")
    assert not result.ok
    assert "not found" in result.content
    assert (tmp_path / "a.txt").read_text() == "alpha\n"


async def test_edit_refuses_an_ambiguous_string_and_says_how_often_it_occurs(
    tmp_path: Path,
) -> None:
    (tmp_path / "a.txt").write_text("x = 1\nx = 1\nx = 1\n")
    result = await call(
        EditTool(), tmp_path, file_path="a.txt", old_string="x = 1", new_string="x = 2"
    )
    assert not result.ok
    assert "found 3 times" in result.content
    assert "replace_all" in result.content
    assert (tmp_path / "a.txt").read_text() == "x = 1\nx = 1\nx = 1\n"


async def test_replace_all_replaces_every_occurrence_and_reports_the_count(
    tmp_path: Path,
) -> None:
    (tmp_path / "a.txt").write_text("x = 1\ny\nx = 1\nx = 1\n")
    result = await call(
        EditTool(),
        tmp_path,
        file_path="a.txt",
        old_string="x = 1",
        new_string="x = 2",
        replace_all=True,
    )
    assert result.ok
    assert result.metadata["replacements"] == 3
    assert result.content.startswith(f"Replaced 3 occurrences in {tmp_path / 'a.txt'}:")
    assert (tmp_path / "a.txt").read_text() == "x = 2\ny\nx = 2\nx = 2\n"


async def test_edit_refuses_equal_strings(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("same\n")
    result = await call(
        EditTool(), tmp_path, file_path="a.txt", old_string="same", new_string="same"
    )
    assert not result.ok
    assert "the same" in result.content


async def test_edit_refuses_an_empty_old_string(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("text\n")
    result = await call(EditTool(), tmp_path, file_path="a.txt", old_string="", new_string="x")
    assert not result.ok
    assert "old_string is empty" in result.content


async def test_edit_refuses_a_missing_file(tmp_path: Path) -> None:
    result = await call(EditTool(), tmp_path, file_path="ghost.txt", old_string="a", new_string="b")
    assert not result.ok
    assert result.content == f"{tmp_path / 'ghost.txt'} does not exist"
    assert not (tmp_path / "ghost.txt").exists()


async def test_edit_refuses_a_binary_file(tmp_path: Path) -> None:
    (tmp_path / "b.bin").write_bytes(b"ab\x00cd")
    result = await call(EditTool(), tmp_path, file_path="b.bin", old_string="ab", new_string="x")
    assert not result.ok
    assert "binary" in result.content
    assert (tmp_path / "b.bin").read_bytes() == b"ab\x00cd"


async def test_edit_refuses_a_file_over_the_limit(tmp_path: Path) -> None:
    with open(tmp_path / "big.txt", "wb") as file:
        file.truncate(MAX_EDIT_BYTES + 1)  # sparse: costs no disk
    result = await call(EditTool(), tmp_path, file_path="big.txt", old_string="a", new_string="b")
    assert not result.ok
    assert str(MAX_EDIT_BYTES) in result.content


async def test_edit_refuses_to_make_a_file_over_the_limit(tmp_path: Path) -> None:
    # Every one of a small file's characters replaced by a long text: built in memory whole,
    # 200 KB of them and a 16 MiB new_string would have been gigabytes.
    (tmp_path / "x.txt").write_text("x\n" * 2000)
    result = await call(
        EditTool(),
        tmp_path,
        file_path="x.txt",
        old_string="x",
        new_string="y" * (MAX_EDIT_BYTES // 1000),
        replace_all=True,
    )
    assert not result.ok
    assert str(MAX_EDIT_BYTES) in result.content
    assert (tmp_path / "x.txt").read_text() == "x\n" * 2000


async def test_edit_refuses_an_unencodable_new_string(tmp_path: Path) -> None:
    (tmp_path / "s.txt").write_text("hello\n")
    result = await call(
        EditTool(), tmp_path, file_path="s.txt", old_string="hello", new_string="a\ud800"
    )
    assert not result.ok
    assert result.content == "new_string cannot be written as UTF-8 (at character 1)"
    assert (tmp_path / "s.txt").read_text() == "hello\n"


async def test_edit_keeps_undecodable_bytes_elsewhere_exactly(tmp_path: Path) -> None:
    (tmp_path / "mixed.txt").write_bytes(b"caf\xe9\nname = old\n\xff\xfe end\n")
    result = await call(
        EditTool(), tmp_path, file_path="mixed.txt", old_string="old", new_string="new"
    )
    assert result.ok
    assert (tmp_path / "mixed.txt").read_bytes() == b"caf\xe9\nname = new\n\xff\xfe end\n"


async def test_edit_matches_read_style_newlines_in_a_crlf_file(tmp_path: Path) -> None:
    (tmp_path / "win.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    result = await call(
        EditTool(), tmp_path, file_path="win.txt", old_string="one\ntwo", new_string="1\n2"
    )
    assert result.ok
    assert (tmp_path / "win.txt").read_bytes() == b"1\r\n2\r\nthree\r\n"
    assert result.content.splitlines()[1:] == ["     1\t1", "     2\t2", "     3\tthree"]


async def test_edit_works_through_a_symlink(tmp_path: Path) -> None:
    (tmp_path / "real.txt").write_text("value = 1\n")
    (tmp_path / "link.txt").symlink_to("real.txt")
    result = await call(EditTool(), tmp_path, file_path="link.txt", old_string="1", new_string="2")
    assert result.ok
    assert (tmp_path / "link.txt").is_symlink()
    assert (tmp_path / "real.txt").read_text() == "value = 2\n"


async def test_a_write_that_fails_at_the_rename_removes_its_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "keep.txt"
    target.write_text("original")

    def refuse(source: str, destination: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "rename", refuse)
    written = await call(WriteTool(), tmp_path, file_path="keep.txt", content="new")
    edited = await call(
        EditTool(), tmp_path, file_path="keep.txt", old_string="original", new_string="x"
    )
    assert not written.ok
    assert not edited.ok
    assert "No space left on device" in written.content
    assert target.read_text() == "original"
    assert os.listdir(tmp_path) == ["keep.txt"]
