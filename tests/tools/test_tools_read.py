"""Read: numbered windows of text files, and every refusal as a clear failed result."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import trio

from robotad.storage.spill import SpillStore
from robotad.tools import ReadTool
from robotad.tools import read as read_module
from robotad.tools.read import DEFAULT_LINE_LIMIT, MAX_LINE_CHARS, WHOLE_FILE_MAX_BYTES
from tests.tools.tool_calls import call


async def test_whole_file_comes_back_numbered_like_cat_n(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_bytes(b"first\nsecond\r\n\n\tfourth")
    result = await call(ReadTool(), tmp_path, file_path="a.txt")
    assert result.ok
    assert result.content == "     1\tfirst\n     2\tsecond\n     3\t\n     4\t\tfourth"
    assert result.metadata == {
        "path": str(tmp_path / "a.txt"),
        "start_line": 1,
        "lines": 4,
        "truncated": False,
    }


async def test_offset_and_limit_select_a_window_and_say_where_to_continue(
    tmp_path: Path,
) -> None:
    (tmp_path / "n.txt").write_text("".join(f"line {i}\n" for i in range(1, 101)))
    result = await call(ReadTool(), tmp_path, file_path="n.txt", offset=10, limit=3)
    assert result.ok
    assert result.content.splitlines() == [
        "    10\tline 10",
        "    11\tline 11",
        "    12\tline 12",
        "[more lines follow; continue with offset=13]",
    ]
    assert result.metadata["truncated"] is True


async def test_window_reaching_the_end_has_no_continuation_note(tmp_path: Path) -> None:
    (tmp_path / "n.txt").write_text("a\nb\nc\n")
    result = await call(ReadTool(), tmp_path, file_path="n.txt", offset=2, limit=2)
    assert result.content == "     2\tb\n     3\tc"
    assert result.metadata["truncated"] is False


async def test_default_limit_applies_without_offset_or_limit(tmp_path: Path) -> None:
    (tmp_path / "long.txt").write_text("x\n" * (DEFAULT_LINE_LIMIT + 5))
    result = await call(ReadTool(), tmp_path, file_path="long.txt")
    assert result.metadata["lines"] == DEFAULT_LINE_LIMIT
    assert result.content.endswith(
        f"[more lines follow; continue with offset={DEFAULT_LINE_LIMIT + 1}]"
    )


async def test_offset_past_the_end_is_refused(tmp_path: Path) -> None:
    (tmp_path / "short.txt").write_text("one\ntwo\n")
    result = await call(ReadTool(), tmp_path, file_path="short.txt", offset=3)
    assert not result.ok
    assert "offset 3 is past the end" in result.content
    assert "2 line(s)" in result.content


async def test_empty_file_is_reported_as_empty(tmp_path: Path) -> None:
    (tmp_path / "empty.txt").write_bytes(b"")
    result = await call(ReadTool(), tmp_path, file_path="empty.txt")
    assert result.ok
    assert result.content == f"[{tmp_path / 'empty.txt'} is empty]"


async def test_long_lines_are_cut_with_a_marker(tmp_path: Path) -> None:
    (tmp_path / "wide.txt").write_text("y" * (MAX_LINE_CHARS + 500) + "\nshort\n")
    result = await call(ReadTool(), tmp_path, file_path="wide.txt")
    first, second = result.content.splitlines()
    assert first == f"     1\t{'y' * MAX_LINE_CHARS} … [line truncated: 500 more characters]"
    assert second == "     2\tshort"


async def test_output_limit_stops_early_with_the_offset_to_continue(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(read_module, "MAX_OUTPUT_CHARS", 40)
    (tmp_path / "n.txt").write_text("".join(f"row {i}\n" for i in range(1, 20)))
    result = await call(ReadTool(), tmp_path, file_path="n.txt")
    lines = result.content.splitlines()
    assert lines[:2] == ["     1\trow 1", "     2\trow 2"]
    assert lines[-1] == f"[output limit reached; continue with offset={len(lines)}]"
    assert result.metadata["truncated"] is True


async def test_huge_file_needs_offset_or_limit(tmp_path: Path) -> None:
    (tmp_path / "big.log").write_text(
        "z" * 99 + "\n" * 1 + "0123456789\n" * (WHOLE_FILE_MAX_BYTES // 10)
    )
    refused = await call(ReadTool(), tmp_path, file_path="big.log")
    assert not refused.ok
    assert "offset and limit" in refused.content
    assert str(WHOLE_FILE_MAX_BYTES) in refused.content

    window = await call(ReadTool(), tmp_path, file_path="big.log", offset=2, limit=2)
    assert window.ok
    assert window.content.splitlines()[:2] == ["     2\t0123456789", "     3\t0123456789"]


async def test_binary_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "blob.bin").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    result = await call(ReadTool(), tmp_path, file_path="blob.bin")
    assert not result.ok
    assert "binary" in result.content


async def test_non_utf8_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "latin.txt").write_bytes("café crème\n".encode("latin-1"))
    result = await call(ReadTool(), tmp_path, file_path="latin.txt")
    assert not result.ok
    assert "not UTF-8" in result.content


async def test_stray_bytes_past_the_sniffed_start_are_replaced(tmp_path: Path) -> None:
    (tmp_path / "log.txt").write_bytes(b"ok\n" * 5000 + b"bad \xff byte\n")
    result = await call(ReadTool(), tmp_path, file_path="log.txt", offset=5001, limit=1)
    assert result.ok
    assert result.content == "  5001\tbad \ufffd byte"


async def test_utf8_bom_is_not_shown(tmp_path: Path) -> None:
    (tmp_path / "bom.txt").write_bytes(b"\xef\xbb\xbfhello\n")
    result = await call(ReadTool(), tmp_path, file_path="bom.txt")
    assert result.content == "     1\thello"


async def test_missing_file_is_refused(tmp_path: Path) -> None:
    result = await call(ReadTool(), tmp_path, file_path="nope.txt")
    assert not result.ok
    assert result.content == f"{tmp_path / 'nope.txt'} does not exist"


async def test_directory_is_refused(tmp_path: Path) -> None:
    result = await call(ReadTool(), tmp_path, file_path=".")
    assert not result.ok
    assert "is a directory" in result.content


async def test_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    with trio.fail_after(10):
        result = await call(ReadTool(), tmp_path, file_path="pipe")
    assert not result.ok
    assert "not a regular file" in result.content


async def test_nul_in_path_is_a_failed_result(tmp_path: Path) -> None:
    result = await call(ReadTool(), tmp_path, file_path="a\0b")
    assert not result.ok
    assert "NUL" in result.content


async def test_absolute_and_home_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "h.txt").write_text("at home\n")
    monkeypatch.setenv("HOME", str(home))
    by_home = await call(ReadTool(), Path("/"), file_path="~/h.txt")
    by_absolute = await call(ReadTool(), Path("/"), file_path=str(home / "h.txt"))
    assert by_home.content == by_absolute.content == "     1\tat home"


async def test_a_stored_result_reads_by_its_reference_in_windows(tmp_path: Path) -> None:
    """A tool result too long to show reaches the model as a `tool-result:` reference only;
    nothing could read it back. Read takes the reference like a file path."""
    with SpillStore(tmp_path / "run") as spill:
        reference = await spill.put("".join(f"entry {n}\n" for n in range(1, 5001)))
        read = ReadTool(spill)
        window = await call(read, tmp_path, file_path=reference, offset=2, limit=2)
        first = await call(read, tmp_path, file_path=reference)
        unknown = await call(read, tmp_path, file_path="tool-result:" + "A" * 32)
        without_store = await call(ReadTool(), tmp_path, file_path=reference)
    assert window.ok
    assert window.content.splitlines() == [
        "     2\tentry 2",
        "     3\tentry 3",
        "[more lines follow; continue with offset=4]",
    ]
    assert (
        first.content.splitlines()[-1]
        == f"[more lines follow; continue with offset={DEFAULT_LINE_LIMIT + 1}]"
    )
    assert not unknown.ok
    assert "unknown or has expired" in unknown.content
    assert not without_store.ok


class _Stopped(Exception):
    pass


async def test_skipping_a_long_line_can_be_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rest of a line past `MAX_LINE_CHARS` is read and dropped in chunks — gigabytes of
    one line take seconds — and between chunks the call looks whether it was cancelled (here
    a stand-in for the turn's abort says stop), instead of reading to the line's end."""
    path = tmp_path / "one-line.txt"
    path.write_text("x" * (4 * 1024 * 1024) + "\nsecond\n")
    checks = 0

    def check_cancelled() -> None:
        nonlocal checks
        checks += 1
        if checks == 3:
            raise _Stopped

    monkeypatch.setattr(trio.from_thread, "check_cancelled", check_cancelled)
    with pytest.raises(_Stopped):
        await call(ReadTool(), tmp_path, file_path=str(path), limit=1)
    assert checks == 3
