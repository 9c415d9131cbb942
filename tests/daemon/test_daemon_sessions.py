"""Sessions as users meet them, end to end through a real robotad: create, open, get, list,
close, delete and every refusal of PROTOCOL §3 on the way (one daemon for the module)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import trio

from protocol.errors import (
    InvalidParams,
    NotAllowed,
    RecordCorrupt,
    RecordUnsupported,
    RpcError,
    SessionExists,
    SessionNotFound,
    TransitionRefused,
)
from tests.daemon_helpers import IO_TIMEOUT, Client, RunningDaemon, connect, module_daemon

daemon = module_daemon()

INFO_KEYS = {
    "sessionId",
    "cwd",
    "provider",
    "model",
    "permissionMode",
    "createdAt",
    "updatedAt",
    "messageCount",
    "turnCount",
    "running",
    "pending",
    "context",
    "idleTimeoutMs",  # v1.1 (PROTOCOL §10.2)
    "maxRounds",  # v1.1 (PROTOCOL §10.2)
    "sandbox",
}


def records(daemon: RunningDaemon) -> Path:
    return daemon.home.state_dir / "sessions"


def snapshot_files(daemon: RunningDaemon) -> dict[str, bytes]:
    folder = records(daemon)
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())} if folder.exists() else {}


async def listed(client: Client) -> dict[str, dict[str, Any]]:
    result = await client.call("session/list")
    return {row["sessionId"]: row for row in result["sessions"]}


async def test_create_without_id_generates_a_fresh_safe_id(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    """G-037: session/create without a sessionId generates a fresh, safe id."""
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            first = await client.call("session/create", {"cwd": str(tmp_path)})
            second = await client.call("session/create", {"cwd": str(tmp_path)})
    assert set(first) == INFO_KEYS
    assert first["sessionId"] != second["sessionId"]
    for info in (first, second):
        assert (records(daemon) / f"{info['sessionId']}.json").is_file()
        assert info["cwd"] == str(tmp_path)
        assert info["provider"] == "scripted"
        assert info["permissionMode"] == "default"
        assert (info["messageCount"], info["turnCount"], info["running"]) == (0, 0, False)
        assert info["pending"] is None
        assert info["createdAt"].endswith("Z")


async def test_create_with_id_uses_exactly_that_id(daemon: RunningDaemon, tmp_path: Path) -> None:
    """G-038: session/create with a sessionId uses exactly that id for the session and its
    record, so opening that id later continues the same record."""
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            info = await client.call(
                "session/create",
                {"cwd": str(tmp_path), "sessionId": "chosen-id.1", "script": [{"text": "ok"}]},
            )
            assert info["sessionId"] == "chosen-id.1"
            await client.call("session/run", {"sessionId": "chosen-id.1", "prompt": "hello"})
            await client.call("session/close", {"sessionId": "chosen-id.1"})
            reopened = await client.call("session/open", {"sessionId": "chosen-id.1"})
    assert reopened["messageCount"] == 2
    assert reopened["turnCount"] == 1
    assert reopened["createdAt"] == info["createdAt"]
    stored = json.loads((records(daemon) / "chosen-id.1.json").read_bytes())
    assert stored["record"]["id"] == "chosen-id.1"


@pytest.mark.parametrize(
    "content",
    [
        b"{not json",
        b'{"schemaVersion": 99, "record": {}}',
    ],
    ids=["corrupt", "unsupported"],
)
async def test_create_over_any_existing_record_is_refused_and_leaves_it(
    daemon: RunningDaemon, tmp_path: Path, content: bytes
) -> None:
    """G-005: create under an id whose record exists — valid, corrupt or unsupported — is
    SessionExists (-32010) and never replaces the file."""
    session_id = f"taken-{len(content)}"
    path = records(daemon) / f"{session_id}.json"
    path.parent.mkdir(mode=0o700, exist_ok=True)
    path.write_bytes(content)
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            with pytest.raises(SessionExists) as refused:
                await client.call("session/create", {"cwd": str(tmp_path), "sessionId": session_id})
            valid = await client.call("session/create", {"cwd": str(tmp_path)})
            before = (records(daemon) / f"{valid['sessionId']}.json").read_bytes()
            with pytest.raises(SessionExists):
                await client.call(
                    "session/create", {"cwd": str(tmp_path), "sessionId": valid["sessionId"]}
                )
    assert refused.value.data == {"sessionId": session_id}
    assert path.read_bytes() == content
    assert (records(daemon) / f"{valid['sessionId']}.json").read_bytes() == before


@pytest.mark.parametrize("bad_id", ["../escape", ".hidden", "a/b", "", "x" * 129, ".."])
async def test_unsafe_session_ids_are_refused_before_any_path(
    daemon: RunningDaemon, tmp_path: Path, bad_id: str
) -> None:
    """G-156: an id that is not one safe path segment is -32602 before any path is built, and
    nothing is created."""
    before = snapshot_files(daemon)
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            for method, params in (
                ("session/create", {"cwd": str(tmp_path), "sessionId": bad_id}),
                ("session/open", {"sessionId": bad_id}),
                ("session/delete", {"sessionId": bad_id}),
                ("session/fork", {"sessionId": "whatever", "newSessionId": bad_id}),
            ):
                with pytest.raises(InvalidParams) as refused:
                    await client.call(method, params)
                paths = [issue["path"] for issue in refused.value.issues]
                assert paths in (["$.sessionId"], ["$.newSessionId"]), (method, paths)
    assert snapshot_files(daemon) == before
    assert not (tmp_path.parent / "escape.json").exists()


async def test_cwd_must_be_an_absolute_existing_directory(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    """G-102: a missing, relative or non-directory cwd is refused with -32602 at $.cwd."""
    a_file = tmp_path / "file"
    a_file.write_text("x")
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            for cwd in ("relative/dir", str(tmp_path / "missing"), str(a_file)):
                with pytest.raises(InvalidParams) as refused:
                    await client.call("session/create", {"cwd": cwd})
                assert [i["path"] for i in refused.value.issues] == ["$.cwd"], cwd
            with pytest.raises(InvalidParams) as missing:
                await client.call("session/create", {})
    assert [i["path"] for i in missing.value.issues] == ["$.cwd"]


@pytest.mark.parametrize("cwd", ["missing", 5, None])
async def test_every_malformed_pattern_is_listed_in_one_refusal(
    daemon: RunningDaemon, tmp_path: Path, cwd: str | int | None
) -> None:
    """G-108, G-215: one -32602 lists every malformed pattern (and every other bad param)
    with its own path — a member of the wrong shape besides (``maxRounds: 0``, ``model: 7``,
    even the required ``cwd: 5``, or no cwd at all) does not hide the others — and no session
    is created."""
    before = snapshot_files(daemon)
    params: dict[str, object] = {
        "cwd": str(tmp_path / "missing") if cwd == "missing" else cwd,
        "sessionId": "never-made",
        "maxRounds": 0,
        "model": 7,
        "permissions": {
            "allow": ["Read(*)", "Read(", "Bad Name"],
            "ask": ["Bash(:*)"],
            "deny": ["WebFetch(domain:)", "Read()"],
        },
    }
    if cwd is None:
        del params["cwd"]
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            with pytest.raises(InvalidParams) as refused:
                await client.call("session/create", params)
            sessions = await listed(client)
    paths = sorted(issue["path"] for issue in refused.value.issues)
    assert paths == sorted(
        [
            "$.cwd",
            "$.maxRounds",
            "$.model",
            "$.permissions.allow[1]",
            "$.permissions.allow[2]",
            "$.permissions.ask[0]",
            "$.permissions.deny[0]",
            "$.permissions.deny[1]",
        ]
    )
    assert "never-made" not in sessions
    assert snapshot_files(daemon) == before


async def test_auto_mode_without_classifier_and_unknown_provider_are_refused(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    """PROTOCOL §8: session/create {permissionMode: "auto"} without a classifier is -32013;
    an unknown provider or a script for a non-scripted one is -32602; nothing is created."""
    before = snapshot_files(daemon)
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            with pytest.raises(TransitionRefused) as auto:
                await client.call(
                    "session/create",
                    {"cwd": str(tmp_path), "sessionId": "auto-1", "permissionMode": "auto"},
                )
            with pytest.raises(InvalidParams) as provider:
                await client.call("session/create", {"cwd": str(tmp_path), "provider": "nope"})
            with pytest.raises(InvalidParams) as script:
                await client.call(
                    "session/create",
                    {"cwd": str(tmp_path), "provider": "openai", "script": [{"text": "x"}]},
                )
    assert auto.value.data is not None
    assert auto.value.data["sessionId"] == "auto-1"
    assert auto.value.data["mode"] == "auto"
    assert auto.value.data["reason"]
    assert [i["path"] for i in provider.value.issues] == ["$.provider"]
    assert [i["path"] for i in script.value.issues] == ["$.script"]
    assert snapshot_files(daemon) == before


SESSION_METHODS: list[tuple[str, dict[str, Any]]] = [
    ("session/open", {}),
    ("session/get", {}),
    ("session/close", {}),
    ("session/delete", {}),
    ("session/fork", {}),
    ("session/run", {"prompt": "x"}),
    ("session/abort", {}),
    ("session/pending", {}),
    ("session/resume", {"executionId": "e1", "responses": []}),
    ("session/abandon", {"executionId": "e1"}),
    ("session/compact", {}),
    ("session/history", {}),
    ("session/context", {}),
    ("session/setPermissionMode", {"mode": "plan"}),
    ("session/addRule", {"rule": "Read", "kind": "allow", "scope": "session"}),
    ("session/subscribe", {}),
    ("session/unsubscribe", {}),
    ("session/export", {}),
    ("session/log", {}),
]


async def test_every_session_method_on_an_unknown_id_is_session_not_found(
    daemon: RunningDaemon,
) -> None:
    """G-001: any session method naming an id with no live session and no stored record
    fails with SessionNotFound (-32002, data.sessionId)."""
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            for method, extra in SESSION_METHODS:
                with pytest.raises(SessionNotFound) as missing:
                    await client.call(method, {"sessionId": "no-such-session", **extra})
                assert missing.value.data == {"sessionId": "no-such-session"}, method


async def test_corrupt_record_is_reported_listed_and_never_touched(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    """G-002, G-004, G-006: a record failing decoding is RecordCorrupt (-32003) with every
    issue located, listed with status "corrupt", and stays byte-for-byte unchanged through
    every method that tries to load it."""
    path = records(daemon) / "damaged.json"
    path.parent.mkdir(mode=0o700, exist_ok=True)
    content = b'{"schemaVersion": 1, "record": {"id": "damaged", "cwd": 5, "messages": "x"}}'
    path.write_bytes(content)
    refusals: dict[str, RpcError] = {}
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            for method, extra in SESSION_METHODS:
                if method == "session/delete":
                    continue
                try:
                    await client.call(method, {"sessionId": "damaged", **extra})
                except RpcError as exc:
                    refusals[method] = exc
            sessions = await listed(client)
            with pytest.raises(SessionExists):
                await client.call("session/create", {"cwd": str(tmp_path), "sessionId": "damaged"})
    assert path.read_bytes() == content
    assert set(refusals) == {m for m, _ in SESSION_METHODS} - {"session/delete"}
    for method, refusal in refusals.items():
        assert isinstance(refusal, RecordCorrupt), (method, refusal)
    data = refusals["session/open"].data
    assert data is not None
    assert data["sessionId"] == "damaged"
    # Issue 14: the damaged file is named, relative to the state folder, in message and data.
    for refusal in refusals.values():
        assert refusal.data["path"] == "sessions/damaged.json", refusal
        assert "(sessions/damaged.json)" in refusal.message
    issue_paths = {issue["path"] for issue in data["issues"]}
    assert {"$.record.cwd", "$.record.messages"} <= issue_paths
    row = sessions["damaged"]
    assert row["status"] == "corrupt"
    assert (row["loaded"], row["running"], row["waiting"]) == (False, False, False)


async def test_unsupported_record_is_reported_with_its_version_and_listed(
    daemon: RunningDaemon,
) -> None:
    """G-003, G-004, G-006: an unimplemented schemaVersion is RecordUnsupported (-32004)
    carrying it; the record is listed as "unsupported" and left unchanged."""
    path = records(daemon) / "future.json"
    path.parent.mkdir(mode=0o700, exist_ok=True)
    content = b'{"schemaVersion": 7, "record": {"id": "future", "cwd": "/x"}}'
    path.write_bytes(content)
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            with pytest.raises(RecordUnsupported) as refused:
                await client.call("session/open", {"sessionId": "future"})
            with pytest.raises(RecordUnsupported):
                await client.call("session/run", {"sessionId": "future", "prompt": "x"})
            sessions = await listed(client)
    assert refused.value.data == {
        "sessionId": "future",
        "schemaVersion": 7,
        "path": "sessions/future.json",
    }
    assert sessions["future"]["status"] == "unsupported"
    assert sessions["future"]["cwd"] == "/x"
    assert path.read_bytes() == content


async def test_list_is_newest_first_with_live_state(daemon: RunningDaemon, tmp_path: Path) -> None:
    """PROTOCOL §5: session/list shows every record newest updatedAt first, with loaded,
    running and waiting."""
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            older = await client.call("session/create", {"cwd": str(tmp_path)})
            newer = await client.call("session/create", {"cwd": str(tmp_path)})
            await client.call("session/run", {"sessionId": older["sessionId"], "prompt": "bump"})
            await client.call("session/close", {"sessionId": newer["sessionId"]})
            rows = (await client.call("session/list"))["sessions"]
    ids = [row["sessionId"] for row in rows]
    assert ids.index(older["sessionId"]) < ids.index(newer["sessionId"])
    stamps = [row["updatedAt"] for row in rows if row["status"] == "ok"]
    assert stamps == sorted(stamps, reverse=True)
    by_id = {row["sessionId"]: row for row in rows}
    assert by_id[older["sessionId"]]["loaded"] is True
    assert by_id[older["sessionId"]]["messageCount"] == 2
    assert by_id[newer["sessionId"]]["loaded"] is False


async def test_close_then_any_use_reloads_transparently(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    """PROTOCOL §5: session/close drains, ends the event stream with session_closed, persists
    and unloads; the next use of the id loads it again (G-010)."""
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            info = await client.call("session/create", {"cwd": str(tmp_path)})
            session_id = info["sessionId"]
            await client.call("session/subscribe", {"sessionId": session_id})
            await client.call("session/run", {"sessionId": session_id, "prompt": "one"})
            assert await client.call("session/close", {"sessionId": session_id}) == {"closed": True}
            await client.wait_for_event(session_id, "session_closed")
            assert (await listed(client))[session_id]["loaded"] is False
            stored = json.loads((records(daemon) / f"{session_id}.json").read_bytes())
            assert [m["content"] for m in stored["record"]["messages"]] == ["one", "echo: one"]
            again = await client.call("session/get", {"sessionId": session_id})
            assert (await listed(client))[session_id]["loaded"] is True
            assert await client.call("session/close", {"sessionId": session_id}) == {"closed": True}
            assert await client.call("session/close", {"sessionId": session_id}) == {"closed": True}
    assert again["messageCount"] == 2


async def test_delete_is_refused_while_loaded_and_removes_everything_after(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    """PROTOCOL §5: session/delete is NotAllowed (-32014, data.reason) while loaded; after a
    close it removes the record and the log, and the id is unknown."""
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            info = await client.call("session/create", {"cwd": str(tmp_path)})
            session_id = info["sessionId"]
            await client.call("session/run", {"sessionId": session_id, "prompt": "x"})
            with pytest.raises(NotAllowed) as refused:
                await client.call("session/delete", {"sessionId": session_id})
            await client.call("session/close", {"sessionId": session_id})
            log = daemon.home.state_dir / "logs" / f"{session_id}.jsonl"
            assert log.exists()
            assert await client.call("session/delete", {"sessionId": session_id}) == {
                "deleted": True
            }
            with pytest.raises(SessionNotFound):
                await client.call("session/get", {"sessionId": session_id})
            with pytest.raises(SessionNotFound):
                await client.call("session/delete", {"sessionId": session_id})
            sessions = await listed(client)
    data = refused.value.data
    assert data is not None
    assert data["reason"]
    assert session_id not in sessions
    assert not (records(daemon) / f"{session_id}.json").exists()
    assert not log.exists()


async def test_damaged_record_can_be_deleted(daemon: RunningDaemon) -> None:
    """A corrupt record is never loaded, so delete removes it (the way out of G-004)."""
    path = records(daemon) / "to-remove.json"
    path.parent.mkdir(mode=0o700, exist_ok=True)
    path.write_bytes(b"garbage")
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            assert await client.call("session/delete", {"sessionId": "to-remove"}) == {
                "deleted": True
            }
    assert not path.exists()


async def test_status_counts_sessions(daemon: RunningDaemon, tmp_path: Path) -> None:
    """daemon/status reports loaded sessions; records, logs and their folders are owner-only
    (G-009)."""
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            info = await client.call("session/create", {"cwd": str(tmp_path)})
            await client.call("session/run", {"sessionId": info["sessionId"], "prompt": "x"})
            status = await client.call("daemon/status")
    assert status["sessions"]["loaded"] >= 1
    assert status["stateDir"] == str(daemon.home.state_dir)
    logs = daemon.home.state_dir / "logs"
    for folder in (records(daemon), logs):
        assert os.stat(folder).st_mode & 0o777 == 0o700
    for file in (
        records(daemon) / f"{info['sessionId']}.json",
        logs / f"{info['sessionId']}.jsonl",
    ):
        assert os.stat(file).st_mode & 0o777 == 0o600


async def test_reloading_keeps_foreign_fields_and_never_applies_metadata(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    """G-011, G-012: a reloaded session re-saves only what it owns — a title and metadata
    another writer stored survive a turn — and metadata holding mode-, rule- or command-like
    values is never applied as settings."""
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            info = await client.call("session/create", {"cwd": str(tmp_path)})
            session_id = info["sessionId"]
            await client.call("session/close", {"sessionId": session_id})
            path = records(daemon) / f"{session_id}.json"
            stored = json.loads(path.read_bytes())
            planted = {
                "permissionMode": "bypassPermissions",
                "permissions": {"allow": ["Bash"]},
                "hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": "x"}]}]},
            }
            stored["record"]["title"] = "my title"
            stored["record"]["metadata"] = planted
            path.write_bytes(json.dumps(stored).encode())
            reopened = await client.call("session/open", {"sessionId": session_id})
            rules = await client.call(
                "session/addRule",
                {"sessionId": session_id, "rule": "Glob", "kind": "allow", "scope": "session"},
            )
            await client.call("session/run", {"sessionId": session_id, "prompt": "x"})
            sessions = await listed(client)
    assert reopened["permissionMode"] == "default"
    assert rules == {"allow": ["Glob"], "ask": [], "deny": []}
    after = json.loads(path.read_bytes())["record"]
    assert after["title"] == "my title"
    assert after["metadata"] == planted
    assert after["settings"]["permissionMode"] == "default"
    assert len(after["messages"]) == 2
    assert sessions[session_id]["title"] == "my title"


async def test_a_session_whose_folder_vanished_is_refused_not_lost(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    """A stored session whose working directory no longer exists cannot load (NotAllowed,
    -32014, saying why); its record stays as it was and is still listed."""
    work = tmp_path / "work"
    work.mkdir()
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            info = await client.call("session/create", {"cwd": str(work)})
            session_id = info["sessionId"]
            await client.call("session/close", {"sessionId": session_id})
            before = (records(daemon) / f"{session_id}.json").read_bytes()
            work.rmdir()
            with pytest.raises(NotAllowed) as refused:
                await client.call("session/open", {"sessionId": session_id})
            sessions = await listed(client)
    data = refused.value.data
    assert data is not None
    assert f"working directory {work} is not an existing directory" in data["reason"]
    assert "create it again" in data["reason"]
    assert sessions[session_id]["status"] == "ok"
    assert (records(daemon) / f"{session_id}.json").read_bytes() == before
