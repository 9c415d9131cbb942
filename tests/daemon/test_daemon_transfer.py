"""Export, import, the session log and the prompt history end to end through a real robotad
(one daemon for the module)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

from protocol.errors import InvalidParams, SessionExists, SessionNotFound
from tests.daemon_helpers import IO_TIMEOUT, Client, RunningDaemon, connect, module_daemon

daemon = module_daemon()

SECRET = "sk-test-0123456789abcdef"


def session_files(daemon: RunningDaemon) -> dict[str, bytes]:
    folder = daemon.home.state_dir / "sessions"
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


async def session_with_turns(client: Client, cwd: Path, *steps: dict[str, Any]) -> str:
    info = await client.call(
        "session/create", {"cwd": str(cwd), "script": list(steps) or [{"text": "hi"}]}
    )
    session_id: str = info["sessionId"]
    await client.call("session/run", {"sessionId": session_id, "prompt": "first"})
    await client.call("session/run", {"sessionId": session_id, "prompt": "second"})
    return session_id


async def test_export_then_import_round_trips(daemon: RunningDaemon, tmp_path: Path) -> None:
    """PROTOCOL §5: session/export → {artifact} with exactly {schemaVersion, kind, exportedAt,
    record}; session/import under a new id gives the same history; under a taken id it is
    SessionExists and writes nothing."""
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            source = await session_with_turns(client, tmp_path)
            artifact = (await client.call("session/export", {"sessionId": source}))["artifact"]
            imported = await client.call(
                "session/import", {"artifact": artifact, "sessionId": "imported-1"}
            )
            source_history = await client.call("session/history", {"sessionId": source})
            imported_history = await client.call("session/history", {"sessionId": "imported-1"})
            before = session_files(daemon)
            with pytest.raises(SessionExists) as taken:
                await client.call("session/import", {"artifact": artifact})
            with pytest.raises(SessionExists):
                await client.call(
                    "session/import", {"artifact": artifact, "sessionId": "imported-1"}
                )
            again = (await client.call("session/export", {"sessionId": "imported-1"}))["artifact"]
    assert set(artifact) == {"schemaVersion", "kind", "exportedAt", "record"}
    assert artifact["kind"] == "robota.session"
    assert artifact["record"]["id"] == source
    assert imported["sessionId"] == "imported-1"
    assert (imported["messageCount"], imported["turnCount"]) == (4, 2)
    assert imported_history == source_history
    assert taken.value.data == {"sessionId": source}
    assert session_files(daemon) == before
    assert {k: v for k, v in again["record"].items() if k != "id"} == {
        k: v for k, v in artifact["record"].items() if k != "id"
    }


async def test_a_refused_import_is_located_and_writes_nothing(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    """G-032, G-215: the artifact goes through the store's total decoder; every defect is
    refused with its path under $.artifact in one -32602, and no session or file appears."""
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            source = await session_with_turns(client, tmp_path)
            artifact = (await client.call("session/export", {"sessionId": source}))["artifact"]
            before = session_files(daemon)
            broken = {
                **artifact,
                "exportedAt": "yesterday",
                "record": {**artifact["record"], "cwd": 5, "turnCount": -1},
            }
            with pytest.raises(InvalidParams) as refused:
                await client.call("session/import", {"artifact": broken, "sessionId": "never"})
            future = {**artifact, "schemaVersion": 9}
            with pytest.raises(InvalidParams) as unsupported:
                await client.call("session/import", {"artifact": future, "sessionId": "never"})
            bad_rules = json.loads(json.dumps(artifact))
            bad_rules["record"]["settings"]["permissions"]["allow"] = ["Read("]
            with pytest.raises(InvalidParams) as rules:
                await client.call("session/import", {"artifact": bad_rules, "sessionId": "never"})
            elsewhere = json.loads(json.dumps(artifact))
            elsewhere["record"]["cwd"] = str(tmp_path / "not-on-this-machine")
            with pytest.raises(InvalidParams) as cwd:
                await client.call("session/import", {"artifact": elsewhere, "sessionId": "never"})
            with pytest.raises(SessionNotFound):
                await client.call("session/get", {"sessionId": "never"})
    assert {i["path"] for i in refused.value.issues} == {
        "$.artifact.exportedAt",
        "$.artifact.record.cwd",
        "$.artifact.record.turnCount",
    }
    assert [i["path"] for i in unsupported.value.issues] == ["$.artifact.schemaVersion"]
    assert [i["path"] for i in rules.value.issues] == [
        "$.artifact.record.settings.permissions.allow[0]"
    ]
    assert [i["path"] for i in cwd.value.issues] == ["$.artifact.record.cwd"]
    assert session_files(daemon) == before


async def test_an_import_whose_message_ids_name_no_fork_point_is_refused(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    """G-030, G-032: a history that repeats a message id or holds an empty one cannot be
    forked, so it is refused at import (-32602 at each offending id, by the rule session/fork
    applies) instead of becoming a session that fork calls corrupt; nothing is written."""
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            source = await session_with_turns(client, tmp_path)
            artifact = (await client.call("session/export", {"sessionId": source}))["artifact"]
            before = session_files(daemon)
            broken = json.loads(json.dumps(artifact))
            messages = broken["record"]["messages"]
            messages.append(dict(messages[1]))  # the first reply's id once more
            messages[2]["id"] = ""
            with pytest.raises(InvalidParams) as refused:
                await client.call("session/import", {"artifact": broken, "sessionId": "never"})
            with pytest.raises(SessionNotFound):
                await client.call("session/get", {"sessionId": "never"})
    assert [(i["path"], i["message"]) for i in refused.value.issues] == [
        ("$.artifact.record.messages[2].id", "is empty, so it names no fork point"),
        (
            "$.artifact.record.messages[4].id",
            f"repeats the id {messages[1]['id']!r} of $.artifact.record.messages[1], so it "
            "names no single fork point",
        ),
    ]
    assert session_files(daemon) == before


async def test_an_import_whose_tool_results_answer_no_open_call_is_refused(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    """G-032: a tool result that answers no call of an earlier assistant message (before
    its call, a call never made, a call answered already) makes a history every provider
    refuses, so each later turn would fail: -32602 at each such ``toolCallId``, nothing
    written. Imported as it came before."""
    glob = {"name": "Glob", "arguments": {"pattern": "*"}}
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            info = await client.call(
                "session/create",
                {"cwd": str(tmp_path), "script": [{"toolCalls": [glob]}, {"text": "done"}]},
            )
            await client.call("session/run", {"sessionId": info["sessionId"], "prompt": "go"})
            artifact = (await client.call("session/export", {"sessionId": info["sessionId"]}))[
                "artifact"
            ]
            before = session_files(daemon)
            broken = json.loads(json.dumps(artifact))
            user, call, result, reply = broken["record"]["messages"]
            assert [m["role"] for m in (user, call, result, reply)] == [
                "user",
                "assistant",
                "tool",
                "assistant",
            ]
            early = {**result, "id": "early"}
            again = {**result, "id": "again"}
            stray = {**result, "id": "stray", "toolCallId": "call_nope"}
            broken["record"]["messages"] = [user, early, call, result, again, stray, reply]
            with pytest.raises(InvalidParams) as refused:
                await client.call("session/import", {"artifact": broken, "sessionId": "never"})
            with pytest.raises(SessionNotFound):
                await client.call("session/get", {"sessionId": "never"})
    call_id = result["toolCallId"]
    assert [(i["path"], i["message"]) for i in refused.value.issues] == [
        (
            "$.artifact.record.messages[1].toolCallId",
            f"answers no call of an earlier assistant message (no call {call_id!r})",
        ),
        (
            "$.artifact.record.messages[4].toolCallId",
            f"answers the call {call_id!r} a second time",
        ),
        (
            "$.artifact.record.messages[5].toolCallId",
            "answers no call of an earlier assistant message (no call 'call_nope')",
        ),
    ]
    assert session_files(daemon) == before


async def test_negative_token_counts_are_refused_where_they_enter(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    """A token count is never negative: a scripted step's usage and an imported message's
    ``metadata.usage`` with one are -32602 at their paths (they used to give ``usedTokens``
    of -500 and -999999), and nothing is created."""
    negative = {"inputTokens": -500, "outputTokens": 1}
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            with pytest.raises(InvalidParams) as scripted:
                await client.call(
                    "session/create",
                    {"cwd": str(tmp_path), "script": [{"text": "x", "usage": negative}]},
                )
            source = await session_with_turns(client, tmp_path)
            artifact = (await client.call("session/export", {"sessionId": source}))["artifact"]
            before = session_files(daemon)
            artifact["record"]["messages"][1]["metadata"] = {
                "usage": {"inputTokens": 10, "outputTokens": 1, "totalTokens": -999_999}
            }
            with pytest.raises(InvalidParams) as imported:
                await client.call("session/import", {"artifact": artifact, "sessionId": "never"})
    assert [i["path"] for i in scripted.value.issues] == ["$.script[0].usage.inputTokens"]
    assert [i["path"] for i in imported.value.issues] == [
        "$.artifact.record.messages[1].metadata.usage.totalTokens"
    ]
    assert session_files(daemon) == before


async def test_export_redacts_sensitive_values_only_when_asked(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    """PROTOCOL §5/§8: export is lossless unless redact; redact replaces every value of a
    sensitive key; the session log holds no such value."""
    call = {"name": "Glob", "arguments": {"pattern": "*.txt", "api_key": SECRET}}
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            source = await session_with_turns(client, tmp_path, {"toolCalls": [call]})
            full = await client.call("session/export", {"sessionId": source})
            shared = await client.call("session/export", {"sessionId": source, "redact": True})
    assert SECRET in json.dumps(full)
    assert SECRET not in json.dumps(shared)
    assert "[REDACTED]" in json.dumps(shared)
    log = (daemon.home.state_dir / "logs" / f"{source}.jsonl").read_text()
    assert SECRET not in log


async def test_session_log_reports_entries_and_problems(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    """PROTOCOL §5: session/log {entries, complete, problems}; a damaged line makes it
    incomplete with the problem located by line."""
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            session_id = await session_with_turns(client, tmp_path)
            report = await client.call("session/log", {"sessionId": session_id})
            await client.call("session/close", {"sessionId": session_id})
            log = daemon.home.state_dir / "logs" / f"{session_id}.jsonl"
            lines = log.read_bytes().count(b"\n")
            with log.open("ab") as damaged:
                damaged.write(b"{this is not a log line}\n")
            broken = await client.call("session/log", {"sessionId": session_id})
    assert report["complete"] is True
    assert report["problems"] == []
    assert report["entries"] > 4
    assert broken["complete"] is False
    assert broken["entries"] == lines
    assert [p["line"] for p in broken["problems"]] == [lines + 1]


async def test_a_session_waiting_for_approval_has_a_complete_log(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    """G-163: the call a waiting execution parked is open in the log because it waits for a
    person, not because anything was lost: session/log calls the log complete, before and
    after a restart of nothing but the session (closed and loaded again)."""
    bash = {"name": "Bash", "arguments": {"command": "echo hi"}}
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            info = await client.call(
                "session/create",
                {"cwd": str(tmp_path), "script": [{"toolCalls": [bash]}, {"text": "done"}]},
            )
            session_id = info["sessionId"]
            result = await client.call("session/run", {"sessionId": session_id, "prompt": "go"})
            waiting = await client.call("session/log", {"sessionId": session_id})
            await client.call("session/close", {"sessionId": session_id})
            reloaded = await client.call("session/log", {"sessionId": session_id})
    assert result["status"] == "waiting"
    assert waiting == {"entries": waiting["entries"], "complete": True, "problems": []}
    assert reloaded["complete"] is True, reloaded["problems"]


@pytest.mark.parametrize("how", ["removed", "emptied"])
async def test_a_log_gone_from_a_session_with_history_is_not_complete(
    daemon: RunningDaemon, tmp_path: Path, how: str
) -> None:
    """G-145: a missing log replays as empty (G-161), so it is no complete log of a session
    that holds messages: session/log says so; a new session with no message is complete."""
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            session_id = await session_with_turns(client, tmp_path)
            await client.call("session/close", {"sessionId": session_id})
            log = daemon.home.state_dir / "logs" / f"{session_id}.jsonl"
            if how == "removed":
                log.unlink()
            else:
                log.write_bytes(b"")
            gone = await client.call("session/log", {"sessionId": session_id})
            await client.call("session/open", {"sessionId": session_id})
            loaded = await client.call("session/log", {"sessionId": session_id})
            fresh = (await client.call("session/create", {"cwd": str(tmp_path)}))["sessionId"]
            empty = await client.call("session/log", {"sessionId": fresh})
    assert gone["complete"] is False
    (problem,) = gone["problems"]
    assert problem["message"] == (
        "the session holds 4 messages; the log rebuilds none of them: its file was "
        "removed, emptied or replaced"
    )
    assert gone["entries"] == 0
    # Opening the session starts its log afresh with the whole history: complete again.
    assert loaded["complete"] is True
    assert empty["complete"] is True


async def test_prompt_history_outlives_records_and_never_rules_them(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    """G-167, G-168: history/search reads no record — a deleted session's prompts are still
    found — and damaging the prompt history changes no session's history."""
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            gone = (await client.call("session/create", {"cwd": str(tmp_path)}))["sessionId"]
            await client.call("session/run", {"sessionId": gone, "prompt": "walrus gone"})
            kept = (await client.call("session/create", {"cwd": str(tmp_path)}))["sessionId"]
            await client.call("session/run", {"sessionId": kept, "prompt": "walrus kept"})
            await client.call("session/close", {"sessionId": gone})
            await client.call("session/delete", {"sessionId": gone})
            found = await client.call("history/search", {"query": "walrus"})
            prompts = daemon.home.state_dir / "prompt-history.jsonl"
            with prompts.open("ab") as damaged:
                damaged.write(b"not json\n")
            damaged_search = await client.call("history/search", {"query": "walrus"})
            await client.call("session/close", {"sessionId": kept})
            history = await client.call("session/history", {"sessionId": kept})
    assert [e["sessionId"] for e in found["entries"]] == [kept, gone]
    assert damaged_search["unreadableLines"] == 1
    assert [e["prompt"] for e in damaged_search["entries"]] == ["walrus kept", "walrus gone"]
    assert [m["content"] for m in history["messages"]] == ["walrus kept", "echo: walrus kept"]
    assert prompts.stat().st_mode & 0o777 == 0o600


async def test_a_loaded_sessions_export_keeps_its_mcp_servers(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    """G-027: an export is lossless whether the session is loaded or not: a loaded session's
    artifact carries the MCP servers it was created with, as the stored record does, so an
    import of it gets them too."""
    servers = [{"name": "m1", "command": "/bin/true", "env": {"K": "v"}}]
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            created = await client.call(
                "session/create", {"cwd": str(tmp_path), "mcpServers": servers}
            )
            session_id = created["sessionId"]
            await client.call("session/run", {"sessionId": session_id, "prompt": "hello"})
            loaded = (await client.call("session/export", {"sessionId": session_id}))["artifact"]
            await client.call("session/close", {"sessionId": session_id})
            closed = (await client.call("session/export", {"sessionId": session_id}))["artifact"]
            await client.call(
                "session/import", {"artifact": loaded, "sessionId": f"{session_id}-copy"}
            )
            await client.call("session/close", {"sessionId": f"{session_id}-copy"})
            copy = await client.call("session/export", {"sessionId": f"{session_id}-copy"})
    assert loaded["record"]["settings"]["mcpServers"] == servers
    assert loaded["record"] == closed["record"]
    assert copy["artifact"]["record"]["settings"]["mcpServers"] == servers


@pytest.mark.parametrize(("depth", "leaf"), [(330, 1), (680, 1), (680, "x" * 70_000)])
async def test_deeply_nested_tool_arguments_leave_a_readable_log(
    daemon: RunningDaemon, tmp_path: Path, depth: int, leaf: object
) -> None:
    """A model may send arguments nested hundreds deep (the wire takes ~700 levels):
    `session/log` once answered -32603 from 326 levels on (its sidecar walk recursed). The log
    decodes complete (a payload too large for its line goes to a sidecar however deep it
    nests), and history holds the arguments as sent."""
    nested: Any = leaf
    for _ in range(depth):
        nested = {"a": nested}
    step = {"toolCalls": [{"name": "Glob", "arguments": {"pattern": "*", "deep": nested}}]}
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            info = await client.call(
                "session/create", {"cwd": str(tmp_path), "script": [step, {"text": "done"}]}
            )
            session_id = info["sessionId"]
            await client.call("session/run", {"sessionId": session_id, "prompt": "go"})
            report = await client.call("session/log", {"sessionId": session_id})
            history = (await client.call("session/history", {"sessionId": session_id}))["messages"]
    assert (report["complete"], report["problems"]) == (True, [])
    assert history[1]["toolCalls"][0]["arguments"]["deep"] == nested


async def test_what_the_wire_takes_nested_a_handler_can_hold(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    """PROTOCOL §10.2: a script nested 969 levels passed the wire's decoder and made
    `session/create` answer -32603 (saving it ran out of stack). Whatever depth a message
    has, it is either refused at the wire (-32700, id null, the connection goes on) or
    created; never an internal error."""
    codes: dict[int, object] = {}
    with trio.fail_after(IO_TIMEOUT):
        stream = await trio.open_unix_socket(str(daemon.socket_path))
        async with stream:
            lines = _lines(stream)
            for request_id, depth in enumerate((600, 700, 800, 900, 969, 1_000)):
                nested = b'{"a":' * depth + b"1" + b"}" * depth  # too deep for json.dumps
                call = b'{"name":"Glob","arguments":{"deep":' + nested + b"}}"
                params = b'{"cwd":%s,"script":[{"toolCalls":[%s]}]}' % (
                    json.dumps(str(tmp_path)).encode(),
                    call,
                )
                envelope = b'{"jsonrpc":"2.0","id":%d,"method":"session/create","params":' % (
                    request_id
                )
                await stream.send_all(envelope + params + b"}\n")
                reply = json.loads(await lines.__anext__())
                codes[depth] = reply["error"]["code"] if "error" in reply else "created"
            status = {"jsonrpc": "2.0", "id": 99, "method": "daemon/status"}
            await stream.send_all(json.dumps(status).encode() + b"\n")
            assert json.loads(await lines.__anext__())["id"] == 99  # the connection goes on
    assert codes[600] == "created"
    assert codes[1_000] == -32700
    assert set(codes.values()) <= {"created", -32700}, codes


async def _lines(stream: trio.SocketStream) -> Any:
    buffer = b""
    while True:
        while b"\n" not in buffer:
            chunk = await stream.receive_some(65536)
            assert chunk, "the daemon closed the connection"
            buffer += chunk
        line, buffer = buffer.split(b"\n", 1)
        yield line
