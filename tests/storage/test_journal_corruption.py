"""Corruption is reported, never read as "nothing pending"; only a torn tail is repaired.

G-087 depends on this: a resume refused because the journal cannot be trusted leaves the
execution pending, which needs the journal to say "corrupt" rather than "empty".
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import msgspec
import pytest

from robotad.storage.journal import (
    MAX_ISSUES,
    FileExecutionJournal,
    JournalCorrupt,
    decode_journal,
    encode_journal_record,
)

from .journal_samples import SESSION, every_kind, request, started


def lines_of(execution_id: str, count: int) -> bytes:
    return b"".join(encode_journal_record(r) for r in every_kind(execution_id)[:count])


def corrupt_issues(execution_id: str, data: bytes) -> list[dict[str, object]]:
    with pytest.raises(JournalCorrupt) as caught:
        decode_journal(execution_id, data)
    assert caught.value.execution_id == execution_id
    return [dict(issue) for issue in caught.value.issues]


# -- the pure decoder -----------------------------------------------------------------------


def test_a_well_formed_file_decodes_in_order() -> None:
    records = every_kind("x-1")
    data = b"".join(encode_journal_record(r) for r in records)
    assert decode_journal("x-1", data) == records
    assert decode_journal("x-1", b"") == []


def test_every_bad_line_is_located() -> None:
    """G-087 (journal part): every problem of the file is listed with its line."""
    good = encode_journal_record(started("x-1"))
    wrong_type = msgspec.json.encode(
        {**msgspec.to_builtins(request("x-1", "r-1")), "toolName": 1, "tool": 7}
    )
    data = good + b"{not json\n" + wrong_type + b"\n" + b'{"kind":"launched"}\n' + b"\n"
    issues = corrupt_issues("x-1", data)
    assert {"line": 2, "message": issues[0]["message"]} == issues[0]
    assert str(issues[0]["message"]).startswith("$: invalid JSON")
    assert {"line": 3, "message": "$.tool: expected string, got integer"} in issues
    assert {"line": 3, "message": "$.toolName: unknown member"} in issues
    assert any(i["line"] == 4 and str(i["message"]).startswith("$.kind") for i in issues)
    assert any(i["line"] == 5 for i in issues)  # an empty line is not a record
    assert not any(i["line"] == 1 for i in issues)


def test_a_torn_final_line_is_corruption_to_the_decoder() -> None:
    data = lines_of("x-1", 2)
    torn = encode_journal_record(request("x-1", "r-9"))[:-7]
    assert corrupt_issues("x-1", data + torn) == [
        {"line": 3, "message": "torn final line: an append that never completed"}
    ]


def test_a_record_of_another_execution_or_a_reused_id_is_corruption() -> None:
    data = lines_of("x-1", 2) + encode_journal_record(started("x-2"))
    data += encode_journal_record(request("x-1", "r-1"))
    data += encode_journal_record(msgspec.structs.replace(request("x-1", "r-1"), reason="other"))
    assert corrupt_issues("x-1", data) == [
        {"line": 3, "message": "$.executionId: names another execution"},
        {"line": 5, "message": "$.id: already used on line 4"},
    ]


def test_issues_are_capped_and_never_echo_content() -> None:
    secret = "sk-live-0123456789abcdef"
    bad = msgspec.json.encode({"kind": "reply", "id": 5, "apiKey": secret, "message": secret})
    bad += b"\n"
    with pytest.raises(JournalCorrupt) as caught:
        decode_journal("x-1", bad * (MAX_ISSUES + 10))
    assert len(caught.value.issues) == MAX_ISSUES + 1
    assert caught.value.issues[-1]["line"] == 0
    assert "more problems" in caught.value.issues[-1]["message"]
    assert secret not in str(caught.value)
    assert secret not in repr(caught.value.issues)


# -- through the file journal ---------------------------------------------------------------


def write_file(state: Path, execution_id: str, data: bytes) -> Path:
    folder = state / "journal" / SESSION
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = folder / f"{execution_id}.jsonl"
    path.write_bytes(data)
    return path


@pytest.mark.parametrize(
    "tail",
    [
        pytest.param(encode_journal_record(request("x-1", "r-9"))[:-1], id="all-but-newline"),
        pytest.param(encode_journal_record(request("x-1", "r-9"))[:15], id="prefix"),
        pytest.param(b"\0" * 300, id="zeros"),  # a size extended by a crash, data never written
        pytest.param(b"x" * 140_000, id="longer-than-the-scan-chunk"),
    ],
)
async def test_open_repairs_a_torn_tail(
    tmp_path: Path, tail: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    """A tail after the last newline was never acknowledged (append returns only after the
    whole line was fsynced), so open cuts it, saying so in the daemon's log (a file cut by
    hand loses a record somebody saw); the complete lines stay byte for byte."""
    state = tmp_path / "state"
    kept = lines_of("x-1", 3)
    path = write_file(state, "x-1", kept + tail)
    with caplog.at_level(logging.WARNING, logger="robotad.storage"):
        async with FileExecutionJournal(state, SESSION) as journal:
            assert path.read_bytes() == kept
    said = [r.getMessage() for r in caplog.records if r.name == "robotad.storage"]
    assert said == [
        f"journal x-1.jsonl: removed {len(tail)} bytes of an unfinished last line (an append "
        "that never completed: robotad stopped while writing it)"
    ]
    async with FileExecutionJournal(state, SESSION) as journal:
        assert path.read_bytes() == kept
        assert await journal.read("x-1") == decode_journal("x-1", kept)
        retried = request("x-1", "r-9")
        await journal.append(retried)
        assert (await journal.read("x-1"))[-1] == retried


@pytest.mark.parametrize("content", [b"", b'{"kind":"start'])
async def test_open_removes_a_file_holding_only_an_unfinished_append(
    tmp_path: Path, content: bytes
) -> None:
    """A crash during an execution's first append leaves no phantom execution behind."""
    state = tmp_path / "state"
    path = write_file(state, "x-1", content)
    async with FileExecutionJournal(state, SESSION) as journal:
        assert not path.exists()
        assert await journal.executions() == []
        assert await journal.read("x-1") == []


async def test_a_complete_undecodable_line_is_never_repaired(tmp_path: Path) -> None:
    """Half a record followed by its newline might have been acknowledged: it stays corrupt,
    append refuses to write behind it, and the execution stays listed (never "nothing")."""
    state = tmp_path / "state"
    damaged = lines_of("x-1", 2) + encode_journal_record(request("x-1", "r-1"))[:20] + b"\n"
    path = write_file(state, "x-1", damaged)
    for _ in range(2):
        async with FileExecutionJournal(state, SESSION) as journal:
            assert path.read_bytes() == damaged
            assert await journal.executions() == ["x-1"]
            with pytest.raises(JournalCorrupt) as caught:
                await journal.read("x-1")
            assert [issue["line"] for issue in caught.value.issues] == [3]
            with pytest.raises(JournalCorrupt):
                await journal.append(request("x-1", "r-2"))
            assert path.read_bytes() == damaged


async def test_a_torn_tail_appearing_while_open_is_reported_not_repaired(tmp_path: Path) -> None:
    """Repair happens only on open; bytes a foreign writer leaves later are corruption."""
    state = tmp_path / "state"
    async with FileExecutionJournal(state, SESSION) as journal:
        await journal.append(started("x-1"))
        with journal.path_for("x-1").open("ab") as rogue:
            rogue.write(b'{"kind":')
        with pytest.raises(JournalCorrupt) as caught:
            await journal.read("x-1")
        assert caught.value.issues[0]["message"].startswith("torn final line")


async def test_a_folder_or_fifo_in_place_of_a_file_is_corruption(tmp_path: Path) -> None:
    state = tmp_path / "state"
    folder = state / "journal" / SESSION
    folder.mkdir(parents=True, mode=0o700)
    (folder / "x-dir.jsonl").mkdir()
    os.mkfifo(folder / "x-fifo.jsonl")
    async with FileExecutionJournal(state, SESSION) as journal:  # open is not blocked by them
        assert await journal.executions() == ["x-dir", "x-fifo"]
        for execution in ("x-dir", "x-fifo"):
            with pytest.raises(JournalCorrupt) as caught:
                await journal.read(execution)
            assert caught.value.issues[0]["line"] == 0
