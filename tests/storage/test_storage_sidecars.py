"""Sidecars: content-addressed, exclusive on write, contained and verified on read
(G-153, G-154, G-157…G-160)."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import pytest

from robotad.storage import fsio, log_files, sidecars
from robotad.storage.log_files import FileLogSink, FileLogSource, log_paths
from robotad.storage.session_log import LogDecodeError, SessionLogger, decode_log
from robotad.storage.sidecars import SidecarError, digest, resolve

SID = "s-side"
T0 = datetime(2024, 5, 1, tzinfo=UTC)


@pytest.fixture
def logs(tmp_path: Path) -> Path:
    return tmp_path / "logs"


def _log_big(logs: Path, value: Any, *, limit: int = 100) -> None:
    logger = SessionLogger(
        SID, FileLogSink.for_session(logs, SID), clock=lambda: T0, spill_limit=limit
    )
    logger.log("tool_call", {"callId": "c", "tool": "T", "arguments": {"blob": value}})


def _ref(
    content: bytes, *, path: str | None = None, sha: str | None = None, size: int | None = None
) -> dict[str, Any]:
    sha = sha or digest(content)
    return {
        "$sidecar": {
            "sha256": sha,
            "bytes": len(content) if size is None else size,
            "path": sha if path is None else path,
        }
    }


def _write_line_with(logs: Path, arguments: Any) -> None:
    """A hand-made log line whose tool-call arguments hold `arguments` verbatim."""
    path, payloads = log_paths(logs, SID)
    payloads.mkdir(parents=True, exist_ok=True)
    _write_line_with_existing_folder(path, arguments)


def _put(logs: Path, content: bytes, name: str | None = None) -> Path:
    payloads = log_paths(logs, SID)[1]
    payloads.mkdir(parents=True, exist_ok=True)
    target = payloads / (name or digest(content))
    target.write_bytes(content)
    return target


def _refusal(logs: Path) -> str:
    with pytest.raises(LogDecodeError) as caught:
        decode_log(FileLogSource.for_session(logs, SID))
    (problem,) = caught.value.problems
    return problem["message"]


def test_an_oversized_field_goes_to_a_hash_named_sidecar(logs: Path) -> None:
    """G-153: the line holds a reference; the file under logs/<id>.payloads/ is named by the
    SHA-256 of its content and decodes back to the value."""
    value = "v" * 500
    _log_big(logs, value, limit=400)
    path, payloads = log_paths(logs, SID)
    line = json.loads(path.read_text())
    ref = line["data"]["arguments"]["blob"]["$sidecar"]
    assert set(ref) == {"sha256", "bytes", "path"}
    sidecar = payloads / ref["path"]
    content = sidecar.read_bytes()
    assert ref["sha256"] == digest(content) == ref["path"]
    assert ref["bytes"] == len(content)
    assert msgspec.json.decode(content) == value
    (entry,) = decode_log(FileLogSource.for_session(logs, SID))
    assert entry.data["arguments"] == {"blob": value}


def test_nested_spills_resolve_back_to_the_original(logs: Path) -> None:
    """Bottom-up spilling: containers still too large after their leaves are spilled too."""
    value = {f"k{i}": "w" * 60 for i in range(20)}
    _log_big(logs, value, limit=100)
    (entry,) = decode_log(FileLogSource.for_session(logs, SID))
    assert entry.data["arguments"] == {"blob": value}


def test_sidecars_are_created_exclusively_and_existing_ones_kept(logs: Path) -> None:
    """G-154: an existing file of that name is accepted as identical and left unchanged, so
    two writers of the same payload both succeed."""
    content = msgspec.json.encode({"blob": "x" * 500})
    existing = _put(logs, content)
    inode = existing.stat().st_ino
    _log_big(logs, "x" * 500)
    second = FileLogSink.for_session(logs, SID)
    assert second.put_payload(content, digest(content)) == digest(content)
    assert existing.stat().st_ino == inode
    assert existing.read_bytes() == content
    assert not [p for p in existing.parent.iterdir() if p.name.endswith(".tmp")]


def test_a_sidecar_stored_already_is_not_written_again(
    logs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reloaded session's first request names the tools' sidecar its log holds already:
    a file of that name and size is taken as it (G-154) without a temp file and its fsyncs.
    A symlink of that name is not taken for it: the exclusive create meets it and keeps it."""
    content = msgspec.json.encode({"blob": "y" * 500})
    existing = _put(logs, content)
    created: list[Path] = []
    real = fsio.create_exclusive

    def counting(path: Path, data: bytes) -> bool:
        created.append(path)
        return real(path, data)

    monkeypatch.setattr(log_files.fsio, "create_exclusive", counting)
    sink = FileLogSink.for_session(logs, SID)
    assert sink.put_payload(content, digest(content)) == digest(content)
    assert created == []
    other = msgspec.json.encode({"blob": "z" * 500})
    # A link whose own size (its target's length) is the content's: only its kind tells.
    target = ("d" * 200 + "/") * 2
    target += "f" * (len(other) - len(target))
    existing.with_name(digest(other)).symlink_to(target)
    assert os.lstat(existing.with_name(digest(other))).st_size == len(other)
    assert sink.put_payload(other, digest(other)) == digest(other)
    assert created == [existing.with_name(digest(other))]
    assert existing.with_name(digest(other)).is_symlink()


def test_a_payload_folder_made_for_a_sidecar_is_durable_in_its_parent(
    tmp_path: Path, fsyncs: list[str]
) -> None:
    """A session's first sidecar makes ``<id>.payloads`` (and here the logs folder): the
    folder holding each new folder is fsynced before the sidecar is stored, so a line naming
    the sidecar never outlives its folder's entry. The sidecar's own file and folder are
    fsynced after. The next sidecar, its folder there, syncs only its file and folder."""
    logs = tmp_path / "state" / "logs"
    payloads = log_paths(logs, SID)[1]
    sink = FileLogSink.for_session(logs, SID)
    first = msgspec.json.encode("a" * 100)
    sink.put_payload(first, digest(first))
    real = [os.path.realpath(folder) for folder in (tmp_path, tmp_path / "state", logs)]
    assert fsyncs[:3] == real  # each new folder's entry, before anything is in it
    temp, folder = fsyncs[3:]
    assert temp.startswith(os.path.realpath(payloads) + "/.")  # the sidecar, as a temp file
    assert folder == os.path.realpath(payloads)
    fsyncs.clear()
    second = msgspec.json.encode("b" * 100)
    sink.put_payload(second, digest(second))
    assert len(fsyncs) == 2
    assert fsyncs[1] == os.path.realpath(payloads)
    assert (payloads / digest(second)).read_bytes() == second


def test_a_sink_refuses_a_name_that_is_not_the_contents_hash(logs: Path) -> None:
    sink = FileLogSink.for_session(logs, SID)
    with pytest.raises(ValueError, match="SHA-256"):
        sink.put_payload(b'"x"', "0" * 64)
    with pytest.raises(ValueError, match="SHA-256"):
        sink.put_payload(b'"x"', "../../escape")


@pytest.mark.parametrize(
    ("path", "code"),
    [
        ("/etc/passwd", "absolute"),
        ("../../outside", "traversal"),
        ("..", "traversal"),
        ("sub/file", "not_a_name"),
        ("", "not_a_name"),
    ],
)
def test_paths_that_leave_the_payload_folder_are_refused(logs: Path, path: str, code: str) -> None:
    """G-157: absolute paths and traversal are refused before anything is opened."""
    content = b'"payload"'
    (logs.parent / "outside").mkdir(parents=True)
    (logs.parent / "outside" / "f").write_bytes(content)
    _write_line_with(logs, _ref(content, path=path))
    message = _refusal(logs)
    assert message.startswith(f"sidecar refused ({code})")


def test_a_symlink_escape_is_refused(logs: Path, tmp_path: Path) -> None:
    """G-157: a sidecar that is a symlink (even to matching content) is never followed."""
    content = b'"secret elsewhere"'
    outside = tmp_path / "elsewhere"
    outside.write_bytes(content)
    payloads = log_paths(logs, SID)[1]
    payloads.mkdir(parents=True)
    (payloads / digest(content)).symlink_to(outside)
    _write_line_with(logs, _ref(content))
    assert "symbolic link" in _refusal(logs)


def test_a_symlinked_payload_folder_is_refused(logs: Path, tmp_path: Path) -> None:
    content = b'"x"'
    real = tmp_path / "real"
    real.mkdir()
    (real / digest(content)).write_bytes(content)
    logs.mkdir(parents=True)
    log_paths(logs, SID)[1].symlink_to(real)
    path = log_paths(logs, SID)[0]
    _write_line_with_existing_folder(path, _ref(content))
    assert "symbolic link" in _refusal(logs)


def _write_line_with_existing_folder(path: Path, arguments: Any) -> None:
    """`_write_line_with` for a log file at `path`, leaving the payload folder as it is."""
    line = {
        "schemaVersion": 1,
        "timestamp": "2024-05-01T00:00:00Z",
        "sessionId": SID,
        "event": "tool_call",
        "data": {"callId": "c", "tool": "T", "arguments": arguments},
    }
    path.write_bytes(json.dumps(line).encode() + b"\n")


def test_wrong_length_is_refused_before_reading(logs: Path) -> None:
    """G-158: a size that differs from the reference is refused."""
    content = b'"abc"'
    _put(logs, content)
    _write_line_with(logs, _ref(content, size=len(content) + 1))
    assert "length" in _refusal(logs)


def test_wrong_hash_is_refused_before_use(logs: Path) -> None:
    """G-158: same length, different bytes: the SHA-256 check refuses it."""
    content = b'"abc"'
    _put(logs, b'"abd"', name=digest(content))
    _write_line_with(logs, _ref(content))
    assert "SHA-256" in _refusal(logs)


def test_a_missing_sidecar_fails_closed(logs: Path) -> None:
    _write_line_with(logs, _ref(b'"gone"'))
    assert "does not exist" in _refusal(logs)


def test_nesting_beyond_the_depth_limit_is_refused(logs: Path) -> None:
    """G-159: a chain of real, correctly hashed sidecars deeper than the limit."""
    value: Any = {"v": "leaf"}
    for _ in range(sidecars.DEFAULT_DEPTH_LIMIT + 1):
        content = msgspec.json.encode(value)
        _put(logs, content)
        value = _ref(content)
    _write_line_with(logs, value)
    assert "deeper than" in _refusal(logs)

    shallow: Any = {"v": "leaf"}
    for _ in range(3):
        content = msgspec.json.encode(shallow)
        _put(logs, content)
        shallow = _ref(content)
    _write_line_with(logs, shallow)
    (entry,) = decode_log(FileLogSource.for_session(logs, SID))
    assert entry.data["arguments"] == {"v": "leaf"}


def test_reference_cycles_are_refused(logs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """G-159: a sidecar referring to itself. Honest SHA-256 names make this unconstructible,
    so the hash is stubbed to show the cycle guard holds on its own."""
    name = "a" * 64
    monkeypatch.setattr(sidecars, "digest", lambda content: name)
    body = b""
    for _ in range(5):  # reach the fixed point of "content that states its own length"
        body = msgspec.json.encode(_ref(b"x" * len(body), path=name, sha=name))
    _put(logs, body, name=name)
    _write_line_with(logs, _ref(body, path=name, sha=name))
    assert "cycle" in _refusal(logs)


class _CountingSource:
    """A payload source that records every read (to prove budgets are checked first)."""

    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = files
        self.reads: list[str] = []

    def read_payload(self, name: str, expected_bytes: int) -> bytes:
        self.reads.append(name)
        return self.files[name]


def test_the_byte_budget_is_checked_before_allocation() -> None:
    """G-160: a reference declaring more than the remaining budget is refused unread, and the
    budget is aggregate across every reference of one resolution."""
    small = b'"' + b"s" * 98 + b'"'
    source = _CountingSource({digest(small): small})
    huge = {"$sidecar": {"sha256": "f" * 64, "bytes": 10**12, "path": "f" * 64}}
    with pytest.raises(SidecarError) as caught:
        resolve({"a": huge}, source, byte_budget=1000)
    assert caught.value.code == "budget"
    assert source.reads == []

    many = [_ref(small) for _ in range(11)]
    with pytest.raises(SidecarError) as caught:
        resolve({"a": many}, source, byte_budget=1000)
    assert caught.value.code == "budget"
    assert len(source.reads) == 10
    assert resolve({"a": many[:10]}, _CountingSource({digest(small): small}), byte_budget=1000)


def test_over_budget_logs_fail_to_decode(logs: Path) -> None:
    """G-160 end to end: decode_log with a small budget refuses a large sidecar."""
    _log_big(logs, "z" * 5000)
    with pytest.raises(LogDecodeError) as caught:
        decode_log(FileLogSource.for_session(logs, SID), byte_budget=1000)
    assert "budget" in caught.value.problems[0]["message"]


def test_malformed_references_fail_closed(logs: Path) -> None:
    bad: dict[str, Any]
    for bad in (
        {"$sidecar": "abc"},
        {"$sidecar": {"sha256": "xyz", "bytes": 1, "path": "xyz"}},
        {"$sidecar": {"sha256": "0" * 64, "bytes": -1, "path": "0" * 64}},
        {"$sidecar": _ref(b"1")["$sidecar"], "other": 1},
        {"$literal": []},
    ):
        _write_line_with(logs, bad)
        assert "sidecar refused" in _refusal(logs)
    assert os.listdir(log_paths(logs, SID)[1]) == []


def _walked(value: Any, stored: dict[str, bytes], limit: int) -> Any:
    """What the walk makes of `value`, by the rules of the module doc, one value at a time:
    the reference implementation `externalize`'s shortcut must agree with."""
    if isinstance(value, dict):
        value = {key: _walked(item, stored, limit) for key, item in value.items()}
    elif isinstance(value, list):
        value = [_walked(item, stored, limit) for item in value]
    content = msgspec.json.encode(value)
    if len(content) <= limit:
        return value
    sha = digest(content)
    stored[sha] = content
    return {sidecars.SIDECAR_KEY: {"sha256": sha, "bytes": len(content), "path": sha}}


def test_a_long_list_of_small_members_is_not_walked_value_by_value(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A whole history logged as one line (a session loaded, G-145) holds thousands of small
    messages: each is encoded whole, never walked a value at a time (a 20,000-message history
    took ~170,000 calls), and what is spilled is what the walk spills."""
    messages: list[Any] = [
        {"id": f"m-{i}", "role": "user", "content": f"text {i}", "metadata": {"ok": True}}
        for i in range(3_000)
    ]
    messages[1_500]["content"] = "x" * 5_000  # one member too large: walked, its text spilled
    payload = {"op": "replace", "messages": messages}
    calls = 0
    spill = sidecars._spill

    def counted(*args: Any, **options: Any) -> tuple[Any, int]:
        nonlocal calls
        calls += 1
        return spill(*args, **options)

    monkeypatch.setattr(sidecars, "_spill", counted)
    stored: dict[str, bytes] = {}

    def put(content: bytes, sha: str) -> str:
        stored[sha] = content
        return sha

    spilled = sidecars.externalize(payload, put, limit=4_096)
    assert calls < 50
    expected: dict[str, bytes] = {}
    assert spilled == {key: _walked(value, expected, 4_096) for key, value in payload.items()}
    assert stored == expected
