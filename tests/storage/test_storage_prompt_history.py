"""The prompt-history file and its backwards search (G-009, G-164…G-171)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from robotad.storage.prompt_history import (
    ANSWER_BUDGET,
    SHOWN_PROMPT_CHARS,
    PromptEntry,
    PromptHistory,
)
from robotad.storage.record import Valid
from robotad.storage.store import FileSessionStore

from .storage_factories import make_record


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "state" / "prompt-history.jsonl"


def _fill(history: PromptHistory, count: int) -> None:
    for index in range(count):
        history.append(
            f"prompt {index}", f"s-{index % 3}", f"/w/{index % 2}", f"2024-01-01T00:00:{index:02}Z"
        )


def test_entries_are_appended_as_one_line_each(path: Path) -> None:
    """G-164: {prompt, sessionId, cwd, timestamp}; earlier lines never change."""
    history = PromptHistory(path)
    history.append("first", "s-1", "/w")
    before = path.read_bytes()
    history.append("second\nwith newline", "s-2", "/v")
    after = path.read_bytes()
    assert after.startswith(before)
    lines = after.decode().splitlines()
    assert len(lines) == 2
    second = json.loads(lines[1])
    assert set(second) == {"prompt", "sessionId", "cwd", "timestamp"}
    assert second["prompt"] == "second\nwith newline"
    assert second["timestamp"].endswith("Z")


def test_the_file_and_folder_are_owner_only(tmp_path: Path) -> None:
    """G-009: 0600 file, 0700 folder, whatever the umask."""
    path = tmp_path / "fresh" / "prompt-history.jsonl"
    previous = os.umask(0)
    try:
        PromptHistory(path).append("p", "s", "/w")
    finally:
        os.umask(previous)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


def test_search_is_newest_first_and_filtered(path: Path) -> None:
    """G-166: across sessions and folders, narrowed by query and cwd, 50 by default."""
    history = PromptHistory(path)
    _fill(history, 60)
    result = history.search()
    assert len(result.entries) == 50
    assert result.entries[0].prompt == "prompt 59"
    assert result.entries[-1].prompt == "prompt 10"
    assert {entry.session_id for entry in result.entries} == {"s-0", "s-1", "s-2"}
    in_w1 = history.search(cwd="/w/1", limit=3).entries
    assert [entry.prompt for entry in in_w1] == ["prompt 59", "prompt 57", "prompt 55"]
    matching = history.search(query="PROMPT 1").entries
    assert [entry.prompt for entry in matching][:2] == ["prompt 19", "prompt 18"]
    assert len(matching) == 11
    assert history.search(query="prompt 5", cwd="/w/0").entries[0] == PromptEntry(
        "prompt 58", "s-1", "/w/0", "2024-01-01T00:00:58Z"
    )


@pytest.mark.parametrize("block", [1, 7, 16, 64, 1 << 16])
def test_lines_spanning_and_exceeding_blocks_come_back_intact(path: Path, block: int) -> None:
    """G-169: whatever the block size, every line is whole and in newest-first order."""
    writer = PromptHistory(path)
    prompts = ["short", "x" * 300, "ünïcödé ✓ " * 20, "", "tail"]
    for index, prompt in enumerate(prompts):
        writer.append(prompt, f"s-{index}", "/w")
    result = PromptHistory(path, block_size=block).search()
    assert [entry.prompt for entry in result.entries] == list(reversed(prompts))
    assert result.unreadable_lines == 0


@settings(max_examples=60, deadline=None)
@given(
    prompts=st.lists(st.text(max_size=40), min_size=1, max_size=12),
    block=st.integers(min_value=1, max_value=80),
)
def test_any_block_size_reads_every_line(
    tmp_path_factory: pytest.TempPathFactory, prompts: list[str], block: int
) -> None:
    """G-169 (property): the backwards reader agrees with a forward read."""
    path = tmp_path_factory.mktemp("ph") / "prompt-history.jsonl"
    writer = PromptHistory(path)
    for prompt in prompts:
        writer.append(prompt, "s", "/w", "2024-01-01T00:00:00Z")
    found = PromptHistory(path, block_size=block).search(limit=len(prompts))
    assert [entry.prompt for entry in found.entries] == list(reversed(prompts))


def test_bad_lines_are_counted_and_the_rest_returned(path: Path) -> None:
    """G-170: unparseable lines are counted in unreadable_lines, never silently dropped."""
    history = PromptHistory(path, block_size=32)
    history.append("one", "s", "/w")
    with path.open("ab") as handle:
        handle.write(b"not json\n")
        handle.write(b'{"prompt": 5, "sessionId": "s", "cwd": "/w", "timestamp": "t"}\n')
        handle.write(b'{"prompt": "x", "sessionId": "s", "cwd": "/w", "timestamp": "t", "k": 1}\n')
        handle.write(b"\xff\xfe\n")
        handle.write(b'{"prompt": "torn')  # a crash mid-append, no newline
    history.append("two", "s", "/w")
    result = history.search()
    assert [entry.prompt for entry in result.entries] == ["two", "one"]
    assert result.unreadable_lines == 5


def test_early_stop_counts_only_the_lines_it_scanned(path: Path) -> None:
    """The documented limit of the flat-cost search: unreadable lines behind the newest
    `limit` matches are not scanned."""
    history = PromptHistory(path)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"old garbage\n")
    _fill(history, 5)
    assert history.search(limit=2).unreadable_lines == 0
    assert history.search(limit=10).unreadable_lines == 1


def test_a_missing_file_is_empty_history(path: Path) -> None:
    """G-171: only a missing file reads as empty."""
    result = PromptHistory(path).search()
    assert result.entries == []
    assert result.unreadable_lines == 0


def test_a_folder_in_the_files_place_is_an_error(path: Path) -> None:
    """G-171: never presented as "no history"."""
    path.mkdir(parents=True)
    with pytest.raises(OSError):  # noqa: PT011 - any read failure, surfaced
        PromptHistory(path).search()


def test_a_fifo_or_symlink_in_the_files_place_is_an_error(path: Path, tmp_path: Path) -> None:
    """G-171: unreadable without blocking or following a link."""
    path.parent.mkdir(parents=True)
    os.mkfifo(path)
    with pytest.raises(OSError):  # noqa: PT011
        PromptHistory(path).search()
    path.unlink()
    real = tmp_path / "real.jsonl"
    PromptHistory(real).append("elsewhere", "s", "/w")
    path.symlink_to(real)
    with pytest.raises(OSError):  # noqa: PT011
        PromptHistory(path).search()
    with pytest.raises(OSError):  # noqa: PT011 - appends never write through a link either
        PromptHistory(path).append("x", "s", "/w")


def test_search_needs_no_session_record(tmp_path: Path) -> None:
    """G-167, G-168: prompts of a corrupt or deleted session are still found, and damaging the
    prompt history changes no stored record."""
    store = FileSessionStore(tmp_path / "state")
    store.save(make_record("kept"))
    store.path_for("kept").write_bytes(b"{corrupt")
    history = PromptHistory(tmp_path / "state" / "prompt-history.jsonl")
    history.append("about the corrupt one", "kept", "/w")
    history.append("about a deleted one", "gone", "/w")
    assert [e.session_id for e in history.search().entries] == ["gone", "kept"]

    store.save(make_record("fine"))
    before = store.path_for("fine").read_bytes()
    history.path.write_bytes(b"\x00garbage")
    assert history.search().unreadable_lines == 1
    history.path.unlink()
    assert store.path_for("fine").read_bytes() == before
    assert isinstance(store.load("fine"), Valid)


def test_the_file_stays_open_between_prompts_and_is_made_again_when_removed(
    path: Path, opened: list[str]
) -> None:
    """G-164, G-009: one open for many prompts (a prompt is on every turn's path); a file
    removed or moved aside meanwhile is not written through its old descriptor: the next
    prompt makes it again under its name, owner-only."""
    history = PromptHistory(path)
    try:
        for number in range(3):
            history.append(f"prompt {number}", "s-1", "/w")
        assert opened.count(os.fspath(path)) == 1
        path.rename(path.with_name("moved.jsonl"))
        history.append("after the move", "s-1", "/w")
        assert [json.loads(line)["prompt"] for line in path.read_text().splitlines()] == [
            "after the move"
        ]
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert len(path.with_name("moved.jsonl").read_text().splitlines()) == 3
    finally:
        history.close()


def test_a_very_long_prompt_is_found_whole_and_returned_shortened(path: Path) -> None:
    """A search answer must fit one frame: a prompt over SHOWN_PROMPT_CHARS comes back cut
    there with a marker of what was left out; the query still matches its whole text."""
    history = PromptHistory(path)
    long = "x" * SHOWN_PROMPT_CHARS + "needle at the end"
    history.append(long, "s", "/w")
    history.append("y" * SHOWN_PROMPT_CHARS, "s", "/w")  # exactly the limit: kept whole
    (entry,) = history.search("needle").entries
    assert entry.prompt == "x" * SHOWN_PROMPT_CHARS + " … [prompt shortened: 17 more characters]"
    assert history.search().entries[0].prompt == "y" * SHOWN_PROMPT_CHARS


def test_a_search_stops_before_its_answer_passes_the_budget(path: Path) -> None:
    """Entries stop, newest first, once their JSON would pass ANSWER_BUDGET bytes: fewer
    than `limit` come back rather than an answer no frame can carry."""
    history = PromptHistory(path)
    prompt_chars = 60_000
    count = ANSWER_BUDGET // prompt_chars + 5
    for index in range(count):
        history.append(f"{index:04} " + "z" * prompt_chars, "s", "/w")
    found = history.search(limit=count)
    assert 0 < len(found.entries) < count
    assert [int(e.prompt[:4]) for e in found.entries] == list(
        range(count - 1, count - 1 - len(found.entries), -1)
    )
    size = sum(
        len(
            json.dumps(
                {"prompt": e.prompt, "sessionId": "s", "cwd": "/w", "timestamp": e.timestamp},
                separators=(",", ":"),
            )
        )
        + 1
        for e in found.entries
    )
    assert size <= ANSWER_BUDGET
    assert size + prompt_chars > ANSWER_BUDGET  # it stopped only when the next would not fit
