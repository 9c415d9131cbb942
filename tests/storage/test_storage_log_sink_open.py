"""The session log's file stays open between lines, and that changes nothing a reader sees:
a log rotated, removed or replaced by a link is written as if opened afresh, another writer's
lines (log recovery) and a torn tail stay whole lines, and no descriptor outlives `close` or
the process-wide bound (`open_logs`)."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from robotad.storage import log_files
from robotad.storage.failure import StorageError
from robotad.storage.fsio import UnsafePath
from robotad.storage.log_files import FileLogSink, log_paths, open_logs

SID = "s-open"


def descriptors_of(path: Path) -> int:
    """How many of this process's descriptors name `path` (or a file once linked there)."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.removesuffix(" (deleted)") == str(path):
            count += 1
    return count


@pytest.fixture
def sink(tmp_path: Path) -> Iterator[FileLogSink]:
    made = FileLogSink.for_session(tmp_path / "logs", SID)
    yield made
    made.close()


def path_of(tmp_path: Path) -> Path:
    return log_paths(tmp_path / "logs", SID)[0]


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


def test_one_open_serves_every_line(
    sink: FileLogSink, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = path_of(tmp_path)
    opened: list[str] = []
    real_open = os.open

    def counting(name: str | os.PathLike[str], *args: object, **kwargs: object) -> int:
        if os.fspath(name) == str(path):
            opened.append(str(name))
        return real_open(name, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(log_files.os, "open", counting)
    for index in range(20):
        sink.append(json.dumps({"n": index}).encode())
    assert len(opened) == 1
    assert sink.is_open
    assert descriptors_of(path) == 1
    assert [json.loads(line)["n"] for line in lines(path)] == list(range(20))


def test_a_rotated_log_is_written_afresh_at_its_path(sink: FileLogSink, tmp_path: Path) -> None:
    path = path_of(tmp_path)
    sink.append(b'{"n":1}')
    path.rename(path.with_name("rotated.jsonl"))
    sink.append(b'{"n":2}')
    assert lines(path.with_name("rotated.jsonl")) == ['{"n":1}']
    assert lines(path) == ['{"n":2}']
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert descriptors_of(path.with_name("rotated.jsonl")) == 0


def test_a_removed_log_and_folder_are_made_again(sink: FileLogSink, tmp_path: Path) -> None:
    path = path_of(tmp_path)
    sink.append(b'{"n":1}')
    path.unlink()
    sink.append(b'{"n":2}')
    assert lines(path) == ['{"n":2}']
    path.unlink()
    path.parent.rmdir()
    sink.append(b'{"n":3}')
    assert lines(path) == ['{"n":3}']
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


def test_a_link_planted_at_an_open_log_is_refused(sink: FileLogSink, tmp_path: Path) -> None:
    path = path_of(tmp_path)
    sink.append(b'{"n":1}')
    elsewhere = tmp_path / "elsewhere.jsonl"
    path.rename(elsewhere)
    path.symlink_to(elsewhere)
    with pytest.raises(StorageError, match="symbolic link"):
        sink.append(b'{"n":2}')
    assert lines(elsewhere) == ['{"n":1}']
    assert not sink.is_open


def test_another_writers_lines_and_a_torn_tail_stay_whole_lines(
    sink: FileLogSink, tmp_path: Path
) -> None:
    path = path_of(tmp_path)
    sink.append(b'{"n":1}')
    recovery = FileLogSink(path)
    recovery.append(b'{"recovered":true}')
    recovery.close()
    sink.append(b'{"n":2}')
    with open(path, "ab") as torn:  # a writer killed mid-line
        torn.write(b'{"cut')
    sink.append(b'{"n":3}')
    assert lines(path) == ['{"n":1}', '{"recovered":true}', '{"n":2}', '{"cut', '{"n":3}']


def test_a_dead_writers_unfinished_line_is_cut_away_by_the_next_sink(tmp_path: Path) -> None:
    """A robotad killed mid-line left a log ending without a newline. The sink of the next
    process cuts that line away before its own first line: kept, it stayed a bad line in the
    middle of the log for good, and ``session/log`` called the log incomplete."""
    path = path_of(tmp_path)
    first = FileLogSink(path)
    first.append(b'{"n":1}')
    first.close()
    with open(path, "ab") as torn:  # the killed process's last, unfinished line
        torn.write(b'{"cut": "' + b"x" * 70_000)
    second = FileLogSink(path)
    second.append(b'{"n":2}')
    second.close()
    assert lines(path) == ['{"n":1}', '{"n":2}']
    whole_torn = path_of(tmp_path / "other")
    whole_torn.parent.mkdir(parents=True, exist_ok=True)
    whole_torn.write_bytes(b'{"only a cut')
    third = FileLogSink(whole_torn)
    third.append(b'{"n":1}')
    third.close()
    assert lines(whole_torn) == ['{"n":1}']


def test_a_mode_changed_under_an_open_log_is_put_back(sink: FileLogSink, tmp_path: Path) -> None:
    path = path_of(tmp_path)
    sink.append(b'{"n":1}')
    path.chmod(0o644)
    sink.append(b'{"n":2}')
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_close_releases_the_descriptor_and_a_later_line_reopens(
    sink: FileLogSink, tmp_path: Path
) -> None:
    path = path_of(tmp_path)
    sink.append(b'{"n":1}')
    sink.close()
    sink.close()
    assert not sink.is_open
    assert descriptors_of(path) == 0
    sink.append(b'{"n":2}')
    assert lines(path) == ['{"n":1}', '{"n":2}']


def test_a_failed_write_releases_the_descriptor(sink: FileLogSink, tmp_path: Path) -> None:
    path = path_of(tmp_path)
    sink.append(b'{"n":1}')
    path.unlink()
    path.parent.rmdir()
    path.parent.write_text("a file where the logs folder was")
    with pytest.raises((StorageError, UnsafePath)):
        sink.append(b'{"n":2}')
    assert not sink.is_open


def test_open_descriptors_are_bounded_process_wide(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(open_logs, "limit", 4)
    sinks = [FileLogSink(tmp_path / f"s-{index}.jsonl") for index in range(10)]
    try:
        for sink in sinks:
            sink.append(b"{}")
        assert open_logs.count() <= 4
        assert sum(sink.is_open for sink in sinks) <= 4
        assert sum(descriptors_of(tmp_path / f"s-{i}.jsonl") for i in range(10)) <= 4
        assert sinks[-1].is_open, "the latest writer keeps its file"
        sinks[0].append(b"{}")  # an evicted sink opens its file again
        assert (tmp_path / "s-0.jsonl").read_text() == "{}\n{}\n"
    finally:
        for sink in sinks:
            sink.close()
    assert open_logs.count() == 0


def test_the_least_recently_written_sink_gives_its_descriptor_up_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write makes its sink the most recent (a sink already the most recent skips the
    bookkeeping): past the bound, the one written to longest ago is closed."""
    monkeypatch.setattr(open_logs, "limit", 2)
    first, second, third = (FileLogSink(tmp_path / f"{name}.jsonl") for name in "abc")
    try:
        first.append(b"{}")
        first.append(b"{}")  # already the most recent
        second.append(b"{}")
        first.append(b"{}")  # the most recent again: `second` is now the oldest
        third.append(b"{}")
        assert first.is_open
        assert third.is_open
        assert not second.is_open
    finally:
        for sink in (first, second, third):
            sink.close()


def test_a_line_the_disk_cut_short_is_taken_back(
    sink: FileLogSink, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full disk mid-write left half a line, and `robotactl log` called the log incomplete
    for good, even after space came back."""
    path = path_of(tmp_path)
    sink.append(b'{"n":1}')
    real_write_all = log_files.fsio.write_all

    def half_then_full(fd: int, data: bytes) -> None:
        os.write(fd, data[: len(data) // 2])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(log_files.fsio, "write_all", half_then_full)
    with pytest.raises(StorageError):
        sink.append(b'{"n":2,"padding":"' + b"x" * 200 + b'"}')
    monkeypatch.setattr(log_files.fsio, "write_all", real_write_all)
    sink.append(b'{"n":3}')
    assert lines(path) == ['{"n":1}', '{"n":3}']


def test_a_durable_logs_first_line_makes_its_folders_durable(
    tmp_path: Path, fsyncs: list[str]
) -> None:
    """A durable sink's first line creates the logs folder: its entry is synced in its parent
    before the line is written (then the line's own fsync), so the durable line cannot vanish
    with its folder. A sink whose folder exists syncs nothing but its lines."""
    logs = tmp_path / "state" / "logs"
    sink = FileLogSink.for_session(logs, SID, durable=True)
    try:
        sink.append(b'{"n":1}')
        parents = [os.path.realpath(folder) for folder in (tmp_path, tmp_path / "state")]
        assert fsyncs == [*parents, os.path.realpath(log_paths(logs, SID)[0])]
    finally:
        sink.close()
    fsyncs.clear()
    other = FileLogSink.for_session(logs, "s-other", durable=True)
    try:
        other.append(b'{"n":2}')
        assert fsyncs == [os.path.realpath(log_paths(logs, "s-other")[0])]
    finally:
        other.close()


def test_a_session_logs_first_line_syncs_no_folder(tmp_path: Path, fsyncs: list[str]) -> None:
    """A session log is not durable and opens on the event loop: making its folder syncs
    nothing (a durable sink's does, above)."""
    sink = FileLogSink.for_session(tmp_path / "state" / "logs", SID)
    try:
        sink.append(b'{"n":1}')
    finally:
        sink.close()
    assert fsyncs == []
    assert log_paths(tmp_path / "state" / "logs", SID)[0].read_bytes() == b'{"n":1}\n'
