"""The method and event Structs (PROTOCOL.md §5–§7): every one round-trips through JSON, wire
names and defaults are the documented ones, and the constraints are enforced with paths."""

from __future__ import annotations

import gc
from datetime import UTC, datetime
from typing import Any

import msgspec
import pytest

from protocol import events, methods, validate
from protocol.events import EVENT_TYPES, SessionEvent
from protocol.methods import METHODS
from protocol.shapes import (
    ApprovalRequest,
    ContextState,
    Message,
    Pending,
    SessionInfo,
    ToolCall,
    TurnCompleted,
    TurnRunning,
    TurnWaiting,
    Usage,
)

CONTEXT = ContextState.of(1200, 200_000)
REQUEST = ApprovalRequest("r1", "e1", "Bash", {"command": "ls"}, "execute needs approval")
PENDING = Pending("e1", [REQUEST])
INFO = SessionInfo(
    "s1", "/w", "scripted", "m", "default", "2024-01-01T00:00:00Z", "2024-01-01T00:00:01Z",
    2, 1, False, PENDING, CONTEXT,
)  # fmt: skip
MESSAGE = Message("m1", "user", "hi", "complete", datetime(2024, 1, 1, tzinfo=UTC))

SAMPLES: list[Any] = [
    methods.Empty(),
    methods.OkResult(),
    methods.InitializeParams(methods.ClientInfo("robotactl", "0.1.0")),
    methods.InitializeParams(),
    methods.InitializeResult(
        1, methods.ServerInfo("0.1.0"), methods.DaemonCapabilities(["ndjson", "content-length"])
    ),
    methods.DaemonStatus(
        "0.1.0",
        1,
        42,
        "2024-01-01T00:00:00Z",
        "/run/robota/robotad.sock",
        "/state",
        methods.DaemonSessionCounts(3, 1, 1),
    ),
    methods.ShutdownParams(2.5),
    methods.SessionRef("s1"),
    methods.CreateParams(
        "/w",
        session_id="s.1_x-2",
        provider="scripted",
        model="m",
        system_message="be brief",
        permission_mode="acceptEdits",
        permissions=methods.Permissions(["Read(*)"], [], ["Bash(rm:*)"]),
        auto_compact_threshold=0.5,
        context_window=32768,
        idle_timeout_ms=1000,
        script=[
            methods.Step(
                text="hello",
                tool_calls=[methods.ScriptedToolCall("Read", {"file_path": "/w/a"})],
                chunks=3,
                delay_ms=5,
                usage=Usage(10, 2),
            ),
            methods.Step(error="provider down"),
            methods.Step(summary="the gist", delay_ms=1),
        ],
    ),
    methods.CreateParams("/w", auto_compact_threshold=False),
    methods.CreateParams(
        "/w",
        mcp_servers=[
            methods.McpServer("docs", command="node", args=["srv.js"], env={"K": "v"}),
            methods.McpServer("web", url="http://127.0.0.1:3001/mcp", headers={"A": "b"}),
        ],
    ),
    methods.SessionList(
        [
            methods.SessionSummary(
                "s1", "/w", "t0", "t1", 4, True, False, True, "ok", title="a", forked_from="s0"
            ),
            methods.SessionSummary("bad", None, None, None, None, False, False, False, "corrupt"),
        ]
    ),
    methods.CloseResult(),
    methods.ForkParams("s1", at_message_id="m3", new_session_id="s2"),
    methods.DeleteResult(),
    methods.RunParams(
        "s1", "do it", turn_id="t-1", tool_choice=methods.NamedToolChoice("Read"), wait=False
    ),
    methods.RunParams("s1", "go", tool_choice="required", system_context="ctx"),
    methods.AbortResult(True),
    methods.PendingResult(PENDING),
    methods.PendingResult(None),
    methods.ResumeParams("s1", "e1", [methods.ApprovalResponse("r1", "resp-1", True)]),
    methods.AbandonParams("s1", "e1"),
    methods.AbandonResult(),
    methods.CompactParams("s1", "keep the plan"),
    methods.CompactResult(True, CONTEXT, ContextState.of(10, 200_000)),
    methods.HistoryParams("s1", 5, 10),
    methods.HistoryResult(7, [MESSAGE]),
    methods.SetPermissionModeParams("s1", "plan"),
    methods.SetPermissionModeResult("plan"),
    methods.AddRuleParams("s1", "Bash(git:*)", "allow", "project"),
    methods.PermissionRules(["Bash(git:*)"], [], []),
    methods.SubscribeParams("s1", 17),
    methods.SubscribeResult(30),
    methods.ExportParams("s1", True),
    methods.ExportResult(
        methods.Artifact(1, "robota.session", "2024-01-01T00:00:00Z", {"id": "s1", "x": [1]})
    ),
    methods.ImportParams({"schemaVersion": 1, "kind": "robota.session"}, "s9"),
    methods.LogResult(12, False, [methods.LogProblem("bad json", line=3, event="tool")]),
    methods.SearchParams("grep", "/w", 5),
    methods.SearchResult([methods.HistoryEntry("hi", "s1", "/w", "2024-01-01T00:00:00Z")], 1),
    methods.McpListParams("s1"),
    methods.McpListResult(
        [
            methods.McpServerEntry("every", "daemon", "ready", ["mcp__every__echo"]),
            methods.McpServerEntry("web", "session", "failed", [], error="refused"),
        ]
    ),
    INFO,
    TurnCompleted("t1", "done"),
    TurnWaiting("t1", "e1", [REQUEST]),
    TurnRunning("t1"),
    CONTEXT,
]

EVENTS: list[Any] = [
    events.TurnStarted("s1", 1, "t1", "hello"),
    events.TextDelta("s1", 2, "t1", "he"),
    events.ToolStarted("s1", 3, "t1", "c1", "Read", {"file_path": "/w/a"}),
    events.PermissionDecided("s1", 4, "t1", "c1", "Read", "allow", "rule Read(*)"),
    events.PermissionDecided("s1", 5, "t1", "c1", "Read", "ask"),
    events.ToolFinished("s1", 6, "t1", "c1", "Read", True, "line one"),
    events.ApprovalRequested("s1", 7, "t1", "e1", [REQUEST]),
    events.ApprovalResolved("s1", 8, "t1", "e1", "r1", False),
    events.ContextUpdated.of("s1", 9, "t1", "estimated", CONTEXT),
    events.Compaction("s1", 10, None, "manual", "started"),
    events.TurnFinished(
        "s1",
        11,
        "t1",
        "failed",
        error=events.ErrorObject(-32007, "provider failed", {"reason": "timeout"}),
        hook_failures=[events.HookFailure("Stop", "exit 1")],
    ),
    events.TurnFinished("s1", 12, "t2", "completed", response="ok"),
    events.TurnFinished(
        "s1",
        12,
        "t3",
        "completed",
        response="ok",
        log_failure=events.LogFailure("logs/s1.jsonl", "no space left on device", 3),
    ),
    events.SessionClosed("s1", 13, None),
    events.Overflow("s1", 13),
]


def _type_of(value: Any) -> Any:
    if isinstance(value, TurnCompleted | TurnWaiting | TurnRunning):
        return methods.RunResult
    return type(value)


@pytest.mark.parametrize("value", SAMPLES, ids=lambda v: type(v).__name__)
def test_method_structs_round_trip(value: Any) -> None:
    wire = msgspec.json.encode(value)
    assert msgspec.json.decode(wire, type=_type_of(value)) == value
    assert validate.decode_json(wire, _type_of(value)) == value


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: type(e).__name__)
def test_events_round_trip_through_the_union(event: Any) -> None:
    wire = msgspec.json.encode(event)
    assert msgspec.json.decode(wire, type=SessionEvent) == event


def test_every_struct_has_a_sample() -> None:
    covered = {type(value) for value in SAMPLES + EVENTS}
    nested = {
        methods.ClientInfo, methods.ServerInfo, methods.DaemonCapabilities,
        methods.DaemonSessionCounts, methods.Permissions, methods.ScriptedToolCall, methods.Step,
        methods.SessionSummary, methods.NamedToolChoice, methods.ApprovalResponse,
        methods.Artifact, methods.LogProblem, methods.HistoryEntry, events.ErrorObject,
        events.HookFailure, events.LogFailure, methods.McpServer, methods.McpServerEntry,
    }  # fmt: skip
    for module in (methods, events):
        for name in module.__all__:
            obj = getattr(module, name)
            if isinstance(obj, type) and issubclass(obj, msgspec.Struct):
                assert obj in covered | nested, name
    for params, result in METHODS.values():
        assert params in covered
        assert result is methods.RunResult or result in covered


def test_method_table_names_every_method_of_the_protocol() -> None:
    assert set(METHODS) == {
        "initialize", "daemon/status", "daemon/shutdown",
        "session/create", "session/open", "session/get", "session/list", "session/close",
        "session/fork", "session/delete", "session/run", "session/abort", "session/pending",
        "session/resume", "session/abandon", "session/compact", "session/history",
        "session/context", "session/setPermissionMode", "session/addRule",
        "session/subscribe", "session/unsubscribe", "session/export", "session/import",
        "session/log", "history/search", "mcp/list",
    }  # fmt: skip


def test_event_types_are_exactly_the_protocol_ones() -> None:
    assert set(EVENT_TYPES) == {
        "turn_started", "text_delta", "tool_started", "permission_decided", "tool_finished",
        "approval_requested", "approval_resolved", "context_updated", "compaction",
        "turn_finished", "session_closed", "overflow",
    }  # fmt: skip


def test_event_wire_members() -> None:
    assert msgspec.json.decode(msgspec.json.encode(EVENTS[8])) == {
        "type": "context_updated",
        "sessionId": "s1",
        "seq": 9,
        "turnId": "t1",
        "phase": "estimated",
        "usedTokens": 1200,
        "maxTokens": 200_000,
        "usedPercentage": 0.6,
        "remainingPercentage": 99.4,
    }
    assert EVENTS[8].context == CONTEXT
    assert msgspec.json.decode(msgspec.json.encode(events.SessionClosed("s", 1, None))) == {
        "type": "session_closed",
        "sessionId": "s",
        "seq": 1,
        "turnId": None,
    }
    assert msgspec.json.decode(msgspec.json.encode(events.Overflow("s", 5))) == {
        "type": "overflow",
        "sessionId": "s",
        "latestSeq": 5,
    }


def test_events_refuse_unknown_members_and_types() -> None:
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(
            b'{"type":"text_delta","sessionId":"s","seq":1,"turnId":null,"text":"a","x":1}',
            type=SessionEvent,
        )
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(
            b'{"type":"nope","sessionId":"s","seq":1,"turnId":null}', type=SessionEvent
        )


def test_documented_defaults() -> None:
    create = msgspec.json.decode(b'{"cwd":"/w"}', type=methods.CreateParams)
    assert create.permission_mode == "default"
    assert create.auto_compact_threshold is msgspec.UNSET
    run = msgspec.json.decode(b'{"sessionId":"s","prompt":"p"}', type=methods.RunParams)
    assert run.wait is True
    history = msgspec.json.decode(b'{"sessionId":"s"}', type=methods.HistoryParams)
    assert (history.offset, history.limit) == (0, msgspec.UNSET)
    assert msgspec.json.decode(b"{}", type=methods.SearchParams).limit == 50
    assert msgspec.json.decode(b"{}", type=methods.ShutdownParams).grace_seconds == 10
    assert msgspec.json.decode(b'{"sessionId":"s"}', type=methods.ExportParams).redact is False
    step = msgspec.json.decode(b"{}", type=methods.Step)
    assert (step.chunks, step.delay_ms, step.is_summary) == (1, 0, False)


def test_params_encode_only_what_was_set() -> None:
    assert msgspec.json.encode(methods.RunParams("s", "p")) == b'{"sessionId":"s","prompt":"p"}'
    assert msgspec.json.encode(methods.Empty()) == b"{}"


def issues_of(data: bytes, type_: Any) -> list[dict[str, str]]:
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(data, type=type_)
    with pytest.raises(validate.ValidationFailed) as info:
        validate.decode_json(data, type_)
    return info.value.issues


@pytest.mark.parametrize(
    "session_id", [".", "..", "", "-a", ".hidden", "a/b", "a b", "é", "x" * 129, "../etc"]
)
def test_unsafe_session_ids_are_refused_with_their_path(session_id: str) -> None:
    """G-156: an id that is not one safe path segment is refused as invalid params."""
    data = msgspec.json.encode({"sessionId": session_id})
    assert [i["path"] for i in issues_of(data, methods.SessionRef)] == ["$.sessionId"]


@pytest.mark.parametrize("session_id", ["a", "A.b_c-d", "0" * 128, "s..1"])
def test_safe_session_ids_are_accepted(session_id: str) -> None:
    data = msgspec.json.encode({"sessionId": session_id})
    assert msgspec.json.decode(data, type=methods.SessionRef).session_id == session_id


@pytest.mark.parametrize("threshold", [b"0", b"-0.5", b"1.01", b"true", b'"0.5"', b"null"])
def test_auto_compact_threshold_refusals(threshold: bytes) -> None:
    """G-052: 0, negatives, values above 1 and other types are refused."""
    data = b'{"cwd":"/w","autoCompactThreshold":' + threshold + b"}"
    assert [i["path"] for i in issues_of(data, methods.CreateParams)] == ["$.autoCompactThreshold"]


@pytest.mark.parametrize(
    ("threshold", "value"), [(b"1", 1.0), (b"0.835", 0.835), (b"false", False)]
)
def test_auto_compact_threshold_accepted(threshold: bytes, value: Any) -> None:
    data = b'{"cwd":"/w","autoCompactThreshold":' + threshold + b"}"
    assert msgspec.json.decode(data, type=methods.CreateParams).auto_compact_threshold == value


def test_create_params_list_every_issue() -> None:
    """G-215: every invalid member is listed with its own path."""
    data = (
        b'{"cwd":"relative","sessionId":"..","permissionMode":"yolo",'
        b'"permissions":{"allow":["Read(*)",1,"Write"]},"contextWindow":0,"bogus":1}'
    )
    paths = sorted(i["path"] for i in issues_of(data, methods.CreateParams))
    assert paths == [
        "$.bogus",
        "$.contextWindow",
        "$.cwd",
        "$.permissionMode",
        "$.permissions.allow[1]",
        "$.sessionId",
    ]


def test_summary_step_takes_no_reply_members() -> None:
    data = b'{"cwd":"/w","script":[{"text":"a"},{"summary":"s","text":"t"}]}'
    assert [i["path"] for i in issues_of(data, methods.CreateParams)] == ["$.script[1]"]


def test_resume_responses_are_checked_one_by_one() -> None:
    data = (
        b'{"sessionId":"s","executionId":"e","responses":'
        b'[{"requestId":"r","responseId":"x","approved":true},{"requestId":"r2","approved":1}]}'
    )
    paths = sorted(i["path"] for i in issues_of(data, methods.ResumeParams))
    assert paths == ["$.responses[1].approved", "$.responses[1].responseId"]


def test_tool_choice_shapes() -> None:
    for choice in (b'"auto"', b'"none"', b'"required"', b'{"name":"Read"}'):
        data = b'{"sessionId":"s","prompt":"p","toolChoice":' + choice + b"}"
        msgspec.json.decode(data, type=methods.RunParams)
    bad = b'{"sessionId":"s","prompt":"p","toolChoice":"always"}'
    assert [i["path"] for i in issues_of(bad, methods.RunParams)] == ["$.toolChoice"]


def test_history_costs_the_collector_nothing_per_message() -> None:
    """Messages (their tool calls and usage with them) are built, decoded and copied untracked
    by the garbage collector: a daemon holding many long histories walked every one of them on
    each full collection. They hold JSON data only, so no cycle can run through them."""
    built = Message.assistant("hi", [ToolCall("c1", "Read", {"path": "/x"})], usage=Usage(1, 2))
    decoded = msgspec.json.decode(msgspec.json.encode(built), type=Message)
    copied = msgspec.structs.replace(decoded, content="changed")
    assert isinstance(decoded.tool_calls, list)
    for value in (built, decoded, copied, decoded.tool_calls[0], Usage(1, 2)):
        assert not gc.is_tracked(value), value
