"""Hostile or hand-edited artifacts and records through a real robotad (one daemon for the
module): each is refused where it is wrong — -32602 for an import, RecordCorrupt for a stored
record — never -32603, with nothing written and other sessions undisturbed."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.errors import InvalidParams, RecordCorrupt, SessionNotFound
from protocol.session_ids import session_id_problem
from protocol.shapes import Message, ToolCall
from robotad.agent.loop import open_calls
from robotad.daemon.fork import fork_history
from robotad.daemon.import_rules import history_issues
from robotad.mcp.config import spec_of_wire
from robotad.session.conversation import NEVER_ANSWERED
from robotad.storage.record import check_record
from tests.daemon_helpers import IO_TIMEOUT, Client, RunningDaemon, connect, module_daemon
from tests.storage.storage_factories import make_record, record_builtins

daemon = module_daemon()

#: A valid ISO-8601 instant whose UTC date is in year 10000.
BEYOND_UTC = "9999-12-31T23:59:59-05:00"
GLOB = {"name": "Glob", "arguments": {"pattern": "*"}}


def state_files(daemon: RunningDaemon) -> set[str]:
    state = daemon.home.state_dir
    return {str(p.relative_to(state)) for p in state.rglob("*") if p.is_file()}


async def exported(client: Client, cwd: Path, *steps: dict[str, Any]) -> dict[str, Any]:
    """The artifact of a new session that ran one turn with `steps` scripted."""
    script = list(steps) or [{"text": "hi"}]
    info = await client.call("session/create", {"cwd": str(cwd), "script": script})
    await client.call("session/run", {"sessionId": info["sessionId"], "prompt": "go"})
    reply = await client.call("session/export", {"sessionId": info["sessionId"]})
    artifact: dict[str, Any] = reply["artifact"]
    return artifact


@dataclass
class StoredCorrupt:
    """A record written by hand and refused on open: the RecordCorrupt error, how
    ``session/list`` shows it, and the file's content and path (to check it is left byte for
    byte)."""

    error: RecordCorrupt
    listed: dict[str, Any]
    content: str
    path: Path

    def issues(self) -> list[Any]:
        assert self.error.data is not None
        issues: list[Any] = self.error.data["issues"]
        return issues


async def stored_corrupt(
    client: Client, daemon: RunningDaemon, record: dict[str, Any], session_id: str
) -> StoredCorrupt:
    """Store `record` as `session_id` by hand, open it (RecordCorrupt) and list it."""
    path = daemon.home.record_path(session_id)
    content = json.dumps({"schemaVersion": 1, "record": {**record, "id": session_id}})
    path.write_text(content)
    with pytest.raises(RecordCorrupt) as corrupt:
        await client.call("session/open", {"sessionId": session_id})
    listed = {s["sessionId"]: s for s in (await client.call("session/list"))["sessions"]}
    return StoredCorrupt(corrupt.value, listed[session_id], content, path)


async def test_a_timestamp_with_no_utc_date_is_refused_where_it_stands(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    """G-002, G-004, G-030, G-032: a message or history timestamp whose UTC date is past
    year 9999 made import answer -32603 (and a stored record holding one fail to load the
    same way). An import is -32602 at that message, writing nothing; a stored record is
    RecordCorrupt there, listed as corrupt and left byte for byte."""
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            artifact = await exported(client, tmp_path)
            before = state_files(daemon)
            bad = copy.deepcopy(artifact)
            bad["record"]["messages"][1]["timestamp"] = BEYOND_UTC
            bad["record"]["history"] = [{"id": "h", "type": "t", "timestamp": BEYOND_UTC}]
            with pytest.raises(InvalidParams) as refused:
                await client.call("session/import", {"artifact": bad, "sessionId": "far-1"})
            with pytest.raises(SessionNotFound):
                await client.call("session/get", {"sessionId": "far-1"})
            after_refusal = state_files(daemon)
            stored = await stored_corrupt(client, daemon, bad["record"], "far-2")
    message = "timestamp is out of range: in UTC it falls outside years 1-9999"
    assert refused.value.issues == [
        {"path": "$.artifact.record.messages[1]", "message": message},
        {"path": "$.artifact.record.history[0]", "message": message},
    ]
    assert after_refusal == before
    assert stored.issues() == [
        {"path": "$.record.messages[1]", "message": message},
        {"path": "$.record.history[0]", "message": message},
    ]
    assert stored.listed["status"] == "corrupt"
    assert stored.path.read_text() == stored.content


_SERVER_VALUES = st.one_of(
    st.none(), st.integers(), st.text(max_size=4), st.lists(st.text(max_size=3), max_size=2)
)
_SERVERS = st.lists(
    st.dictionaries(
        st.sampled_from(["name", "command", "args", "env", "url", "headers", "cwd"]),
        _SERVER_VALUES | st.dictionaries(st.text(max_size=3), _SERVER_VALUES, max_size=2),
        max_size=4,
    ),
    max_size=3,
)


@settings(max_examples=80, deadline=None)
@given(_SERVERS)
def test_every_mcp_server_a_record_lets_through_can_be_built(servers: list[Any]) -> None:
    """G-002, G-030: a record's ``settings.mcpServers`` is kept as given, and a session is
    built from it: ``[{"bogus": 1}]`` in an import answered -32603 (KeyError), and in a
    stored record failed its load the same way. Whatever the entries, the decoder either
    refuses them at their paths or each one becomes a server spec."""
    record = record_builtins(make_record(messages=1))
    record["settings"]["mcpServers"] = servers
    checked = check_record(record, "$.artifact.record")
    if isinstance(checked, list):
        assert checked, servers
        assert all(i["path"].startswith("$.artifact.record.settings.mcpServers[") for i in checked)
        return
    assert checked.settings.mcp_servers == servers
    for server in servers:
        spec_of_wire(server, "/tmp")


async def test_mcp_servers_that_build_no_session_are_refused_where_they_stand(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    """G-002, G-004, G-030, G-032: an import whose MCP servers are no ``McpServer`` is
    -32602 at each defect, writing nothing (it answered -32603); a stored record holding one
    is RecordCorrupt, listed corrupt and untouched; the other sessions go on."""
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            artifact = await exported(client, tmp_path)
            source = artifact["record"]["id"]
            before = state_files(daemon)
            bad = copy.deepcopy(artifact)
            bad["record"]["settings"]["mcpServers"] = [{"bogus": 1}, {"name": "ok", "url": 5}]
            with pytest.raises(InvalidParams) as refused:
                await client.call("session/import", {"artifact": bad, "sessionId": "mcp-1"})
            with pytest.raises(SessionNotFound):
                await client.call("session/get", {"sessionId": "mcp-1"})
            after_refusal = state_files(daemon)
            stored = await stored_corrupt(client, daemon, bad["record"], "mcp-2")
            still = await client.call("session/run", {"sessionId": source, "prompt": "again"})
    root = "$.artifact.record.settings.mcpServers"
    assert [i["path"] for i in refused.value.issues] == [
        f"{root}[0].name",
        f"{root}[0].bogus",
        f"{root}[1].url",
    ]
    assert after_refusal == before
    assert [i["path"] for i in stored.issues()] == [
        "$.record.settings.mcpServers[0].name",
        "$.record.settings.mcpServers[0].bogus",
        "$.record.settings.mcpServers[1].url",
    ]
    assert stored.listed["status"] == "corrupt"
    assert stored.path.read_text() == stored.content
    assert still["status"] == "completed"


async def test_an_import_is_held_to_the_mcp_rules_of_a_create(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    """G-030, G-032: well-shaped MCP servers an import holds keep the rules a create keeps
    (a name fit for ``mcp__NAME__TOOL``, one transport), each refused at its path."""
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            artifact = await exported(client, tmp_path)
            before = state_files(daemon)
            bad = copy.deepcopy(artifact)
            bad["record"]["settings"]["mcpServers"] = [
                {"name": "a__b", "command": "x"},
                {"name": "both", "command": "x", "url": "http://127.0.0.1:1/mcp"},
            ]
            with pytest.raises(InvalidParams) as refused:
                await client.call("session/import", {"artifact": bad, "sessionId": "mcp-3"})
    root = "$.artifact.record.settings.mcpServers"
    assert [i["path"] for i in refused.value.issues] == [f"{root}[0].name", f"{root}[1]"]
    assert state_files(daemon) == before


_CALL_IDS = st.sampled_from(["c1", "c2", "c3"])
_STEPS = st.lists(
    st.one_of(
        st.builds(lambda: ("user", None)),
        st.builds(lambda ids: ("assistant", ids), st.lists(_CALL_IDS, max_size=3)),
        st.builds(lambda call_id: ("tool", call_id), _CALL_IDS),
    ),
    max_size=8,
)


def _history(steps: list[tuple[str, Any]]) -> list[Message]:
    history: list[Message] = []
    for index, (role, detail) in enumerate(steps):
        if role == "user":
            message = Message.user(f"u{index}")
        elif role == "assistant":
            message = Message.assistant(None, [ToolCall(i, "Glob", {}) for i in detail] or None)
        else:
            message = Message.tool(detail, "Glob", "r", ok=True)
        history.append(message)
    return history


@settings(max_examples=150, deadline=None)
@given(_STEPS)
def test_what_an_import_accepts_its_next_prompt_keeps_importable(
    steps: list[tuple[str, Any]],
) -> None:
    """G-030: a history an import accepts stays one it accepts after the next prompt closes
    its open round (`close_unheld_round`) and after a fork: two open calls under one id
    were accepted, and closing both gave that id two results, which import refuses, so the
    session could not be exported and imported again."""
    history = _history(steps)
    refused = history_issues(history, "$.artifact.record")
    assert all(i["path"].startswith("$.artifact.record.messages[") for i in refused)
    if refused:
        return
    closed = history + [
        Message.tool(call.id, call.name, NEVER_ANSWERED, ok=False) for call in open_calls(history)
    ]
    assert history_issues([*closed, Message.user("next")], "$.artifact.record") == []
    forked = fork_history("s", history, None, 0).messages
    assert history_issues(forked, "$.artifact.record") == []


async def test_two_open_calls_under_one_id_are_refused_at_import(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    """G-030, G-032: an assistant message whose two calls share an id (a provider never gets
    to make one: the daemon renames a repeated id, architecture decision 25) is -32602 at
    the repeat, writing nothing. It was imported, and its next prompt closed both calls,
    giving the id two results: its export then failed to import."""
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            artifact = await exported(client, tmp_path, {"toolCalls": [GLOB]}, {"text": "done"})
            before = state_files(daemon)
            bad = copy.deepcopy(artifact)
            messages = bad["record"]["messages"]
            calls = messages[1]["toolCalls"]
            calls.append(dict(calls[0]))
            del messages[2:]  # the round stays open, as a parked one's would
            with pytest.raises(InvalidParams) as refused:
                await client.call("session/import", {"artifact": bad, "sessionId": "dup-1"})
    assert refused.value.issues == [
        {
            "path": "$.artifact.record.messages[1].toolCalls[1].id",
            "message": f"repeats the id {calls[0]['id']!r} of a call that has no result yet, "
            "so no result could tell the two apart",
        }
    ]
    assert state_files(daemon) == before


#: Session ids no path may be built from; the last passes the decoder's own pattern (a regex
#: ``$`` matches before a final newline).
UNSAFE_IDS = ["../x", "a/b", "", "x" * 129, "a\x1b[2Jb", "..", "abc\n"]


async def test_an_imported_forked_from_names_a_safe_session_id(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    """G-156, G-030, G-032: ``forkedFrom.sessionId`` names a session, as any id does
    (``session/list`` shows it, clients open it), yet an import took ``"../x"``, ``"a/b"``,
    an empty, over-long or escape-holding one as it came. Each is now -32602 at that path,
    in the words every unsafe id gets, writing nothing; a fork's own export still imports."""
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            artifact = await exported(client, tmp_path)
            source = artifact["record"]["id"]
            before = state_files(daemon)
            refusals = []
            for bad in UNSAFE_IDS:
                forged = copy.deepcopy(artifact)
                forged["record"]["forkedFrom"] = {"sessionId": bad, "messageId": "m-1"}
                with pytest.raises(InvalidParams) as refused:
                    await client.call("session/import", {"artifact": forged, "sessionId": "ff-1"})
                refusals.append(refused.value.issues)
            with pytest.raises(SessionNotFound):
                await client.call("session/get", {"sessionId": "ff-1"})
            after_refusals = state_files(daemon)
            fork = await client.call("session/fork", {"sessionId": source})
            forked = await client.call("session/export", {"sessionId": fork["sessionId"]})
            imported = await client.call(
                "session/import", {"artifact": forked["artifact"], "sessionId": "ff-2"}
            )
            listed = {s["sessionId"]: s for s in (await client.call("session/list"))["sessions"]}
    assert refusals == [
        [{"path": "$.artifact.record.forkedFrom.sessionId", "message": session_id_problem(bad)}]
        for bad in UNSAFE_IDS
    ]
    assert after_refusals == before
    assert imported["sessionId"] == "ff-2"
    assert listed["ff-2"]["forkedFrom"] == source


async def test_an_unsafe_artifact_id_is_refused_where_it_stands(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    """G-156, G-030: an import without ``sessionId`` takes the artifact's own id; one the
    decoder's pattern lets through (``"abc\\n"``) was refused at ``$.sessionId``, a
    parameter the caller never gave. It is refused at ``$.artifact.record.id``; a
    ``sessionId`` given in its place imports it under that id."""
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            artifact = await exported(client, tmp_path)
            before = state_files(daemon)
            forged = copy.deepcopy(artifact)
            forged["record"]["id"] = "abc\n"
            with pytest.raises(InvalidParams) as refused:
                await client.call("session/import", {"artifact": forged})
            after_refusal = state_files(daemon)
            renamed = await client.call("session/import", {"artifact": forged, "sessionId": "id-1"})
    assert refused.value.issues == [
        {"path": "$.artifact.record.id", "message": session_id_problem("abc\n")}
    ]
    assert after_refusal == before
    assert renamed["sessionId"] == "id-1"


async def test_only_an_assistant_message_makes_calls_and_only_a_tool_message_answers(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    """G-030, G-032: an import took ``toolCalls`` on a user or tool message — calls no model
    made and nothing ran, which no provider is sent yet ``robotactl show`` and a
    compaction's summary request present as made — and a ``toolCallId`` on a message that
    answers nothing. Each is now -32602 at that member, writing nothing; a result that
    answers a user message's "call" is refused as answering no call, as before."""
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            artifact = await exported(client, tmp_path, {"toolCalls": [GLOB]}, {"text": "done"})
            before = state_files(daemon)
            bad = copy.deepcopy(artifact)
            user, call, result, reply = bad["record"]["messages"]
            made = {"id": "u-1", "name": "Glob", "arguments": {"pattern": "*"}}
            user["toolCalls"] = [made]
            result["toolCalls"] = [{**made, "id": "t-1"}]
            reply["toolCallId"] = call["toolCalls"][0]["id"]
            answer = {**result, "id": "answer", "toolCallId": "u-1"}
            del answer["toolCalls"]
            bad["record"]["messages"].append(answer)
            with pytest.raises(InvalidParams) as refused:
                await client.call("session/import", {"artifact": bad, "sessionId": "role-1"})
            with pytest.raises(SessionNotFound):
                await client.call("session/get", {"sessionId": "role-1"})
    root = "$.artifact.record.messages"
    assert refused.value.issues == [
        {
            "path": f"{root}[0].toolCalls",
            "message": "only an assistant message makes tool calls (this one's role is 'user')",
        },
        {
            "path": f"{root}[2].toolCalls",
            "message": "only an assistant message makes tool calls (this one's role is 'tool')",
        },
        {
            "path": f"{root}[3].toolCallId",
            "message": "only a tool message answers a call (this one's role is 'assistant')",
        },
        {
            "path": f"{root}[4].toolCallId",
            "message": "answers no call of an earlier assistant message (no call 'u-1')",
        },
    ]
    assert state_files(daemon) == before


async def test_a_call_without_a_name_is_refused_at_import(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    """G-030, G-032, decision 51: a call whose name is empty or only whitespace is one no
    provider takes back, so each later turn of the session would fail; a live session never
    commits one, and an import took it. Each is now -32602 at its ``name``, writing nothing;
    the same artifact with the names put back imports."""
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            artifact = await exported(
                client, tmp_path, {"toolCalls": [GLOB, GLOB]}, {"text": "done"}
            )
            before = state_files(daemon)
            bad = copy.deepcopy(artifact)
            calls = bad["record"]["messages"][1]["toolCalls"]
            calls[0]["name"], calls[1]["name"] = "", " \t"
            with pytest.raises(InvalidParams) as refused:
                await client.call("session/import", {"artifact": bad, "sessionId": "name-1"})
            with pytest.raises(SessionNotFound):
                await client.call("session/get", {"sessionId": "name-1"})
            after_refusal = state_files(daemon)
            named = await client.call(
                "session/import", {"artifact": artifact, "sessionId": "name-2"}
            )
    where = "$.artifact.record.messages[1].toolCalls"
    said = ": a call names the tool it calls, and no provider takes one without a name back, "
    said += "so every later turn would fail"
    assert refused.value.issues == [
        {"path": f"{where}[0].name", "message": "is empty" + said},
        {"path": f"{where}[1].name", "message": "is only whitespace" + said},
    ]
    assert after_refusal == before
    assert named["sessionId"] == "name-2"


async def test_tool_results_out_of_place_are_refused_at_import(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    """G-030, G-032: the results of a reply's calls come right after it, and only the last
    reply's calls may still wait for theirs (the next prompt closes them). An import took a
    result after a later user message, and a call whose reply another message followed
    without its result: no provider takes either history (OpenAI wants a call's results
    right after it, Anthropic a tool_use's result in the very next turn), so every later
    turn of the session would have failed. Each is now -32602 at the call and at the
    result, writing nothing; a history whose last round is open still imports."""
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            artifact = await exported(
                client, tmp_path, {"toolCalls": [GLOB]}, {"toolCalls": [GLOB]}, {"text": "done"}
            )
            before = state_files(daemon)
            bad = copy.deepcopy(artifact)
            user, first, first_result, second, _second_result, reply = bad["record"]["messages"]
            later = {**user, "id": "later", "content": "and then?"}
            bad["record"]["messages"] = [user, first, later, first_result, second, reply]
            with pytest.raises(InvalidParams) as refused:
                await client.call("session/import", {"artifact": bad, "sessionId": "place-1"})
            with pytest.raises(SessionNotFound):
                await client.call("session/get", {"sessionId": "place-1"})
            after_refusal = state_files(daemon)
            waiting = copy.deepcopy(artifact)
            del waiting["record"]["messages"][4:]  # the second round still open, as parked
            imported = await client.call(
                "session/import", {"artifact": waiting, "sessionId": "place-2"}
            )
    root = "$.artifact.record.messages"
    cause = "a call's results come right after the assistant message that made it"
    assert refused.value.issues == [
        {
            "path": f"{root}[1].toolCalls[0].id",
            "message": f"has no result before {root}[2]: {cause}, and only the last one's "
            "calls may still wait for theirs",
        },
        {
            "path": f"{root}[3].toolCallId",
            "message": f"answers the call {first['toolCalls'][0]['id']!r} of {root}[1] out of "
            f"place: {cause}, with only other results between",
        },
        {
            "path": f"{root}[4].toolCalls[0].id",
            "message": f"has no result before {root}[5]: {cause}, and only the last one's "
            "calls may still wait for theirs",
        },
    ]
    assert after_refusal == before
    assert imported["messageCount"] == 4


#: A number no JSON reader holds exactly, and one too large for a float.
PAST_SAFE = 2**53
PAST_FLOAT = 10**400
TOO_LARGE = "expected <= 9007199254740991"


async def test_numbers_past_what_json_holds_are_refused_where_they_enter(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    """G-030, G-032, G-002, G-004: a count, window or timeout had no upper bound. An import
    with a ``contextWindow``, ``idleTimeoutMs`` or message usage of 10**400 was written, then
    answered -32603 (the context figures or the timeout overflow a float), leaving a session
    every later call answered -32603; ``session/create`` answered -32603 for them too; a
    ``turnCount`` of 2**53 was kept, to be read back changed by a JSON client. Each is now
    -32602 at its path (past 2**53 - 1), nothing written; a stored record holding one is
    RecordCorrupt there, listed corrupt and left byte for byte."""
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            usage = {"inputTokens": 10, "outputTokens": 2}
            artifact = await exported(client, tmp_path, {"text": "hi", "usage": usage})
            before = state_files(daemon)
            settings = copy.deepcopy(artifact)
            record = settings["record"]
            record["turnCount"] = PAST_SAFE
            record["settings"].update(
                contextWindow=PAST_FLOAT, idleTimeoutMs=PAST_FLOAT, maxRounds=PAST_SAFE
            )
            used = copy.deepcopy(artifact)
            used["record"]["messages"][1]["metadata"]["usage"]["inputTokens"] = PAST_FLOAT
            slow = copy.deepcopy(artifact)
            slow["record"]["settings"]["script"] = [{"text": "x", "delayMs": PAST_FLOAT}]
            refusals = []
            for bad in (settings, used, slow):
                with pytest.raises(InvalidParams) as refused:
                    await client.call("session/import", {"artifact": bad, "sessionId": "big-1"})
                refusals.append([(i["path"], i["message"]) for i in refused.value.issues])
            with pytest.raises(SessionNotFound):
                await client.call("session/get", {"sessionId": "big-1"})
            after_refusals = state_files(daemon)
            with pytest.raises(InvalidParams) as created:
                await client.call(
                    "session/create",
                    {"cwd": str(tmp_path), "contextWindow": PAST_FLOAT, "idleTimeoutMs": PAST_SAFE},
                )
            stored = await stored_corrupt(client, daemon, record, "big-2")
    root = "$.artifact.record"
    assert refusals == [
        [
            (f"{root}.settings.contextWindow", TOO_LARGE),
            (f"{root}.settings.idleTimeoutMs", TOO_LARGE),
            (f"{root}.settings.maxRounds", TOO_LARGE),
            (f"{root}.turnCount", TOO_LARGE),
        ],
        [(f"{root}.messages[1].metadata.usage.inputTokens", TOO_LARGE)],
        [(f"{root}.settings.script[0].delayMs", TOO_LARGE)],
    ]
    assert after_refusals == before
    assert [(i["path"], i["message"]) for i in created.value.issues] == [
        ("$.contextWindow", TOO_LARGE),
        ("$.idleTimeoutMs", TOO_LARGE),
    ]
    assert [i["path"] for i in stored.issues()] == [
        "$.record.settings.contextWindow",
        "$.record.settings.idleTimeoutMs",
        "$.record.settings.maxRounds",
        "$.record.turnCount",
    ]
    assert stored.listed["status"] == "corrupt"
    assert stored.path.read_text() == stored.content


async def test_a_record_instant_with_no_utc_date_is_refused_where_it_stands(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    """G-002, G-004, G-006, G-030, G-032: an ``updatedAt`` of ``0001-01-01T00:00:00+01:00``
    (in UTC, year 0) was imported and listed as it was, and ``robotactl ls`` then stopped with
    an OverflowError traceback however many sessions it had to list. An import is -32602 at
    that member, writing nothing; a stored record holding one is RecordCorrupt there, listed
    corrupt without the instant, and left byte for byte."""
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            artifact = await exported(client, tmp_path)
            before = state_files(daemon)
            bad = copy.deepcopy(artifact)
            bad["record"]["updatedAt"] = "0001-01-01T00:00:00+01:00"
            with pytest.raises(InvalidParams) as refused:
                await client.call("session/import", {"artifact": bad, "sessionId": "year-0"})
            after_refusal = state_files(daemon)
            stored = await stored_corrupt(client, daemon, bad["record"], "year-1")
    message = "updatedAt is out of range: in UTC it falls outside years 1-9999"
    assert refused.value.issues == [{"path": "$.artifact.record.updatedAt", "message": message}]
    assert after_refusal == before
    assert stored.issues() == [{"path": "$.record.updatedAt", "message": message}]
    assert stored.listed["status"] == "corrupt"
    assert stored.listed.get("updatedAt") is None
    assert stored.path.read_text() == stored.content
