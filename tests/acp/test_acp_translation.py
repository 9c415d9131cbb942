"""The sans-I/O parts of ``robotactl acp``: tool presentation, prompt text, event and history
translation, permission answers. Fast, no processes."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from protocol.errors import InvalidParams
from protocol.events import (
    ApprovalRequested,
    ContextUpdated,
    PermissionDecided,
    TextDelta,
    ToolFinished,
    ToolStarted,
    TurnFinished,
    TurnStarted,
)
from protocol.shapes import ApprovalRequest, Message, ToolCall
from robotactl.acp.permissions import Answer, always_rule, answer_of, request_params
from robotactl.acp.prompt_text import prompt_text
from robotactl.acp.schema import RequestPermissionResult, SessionNotification
from robotactl.acp.tool_view import TITLE_CHARS, describe_call
from robotactl.acp.translate import EventTranslator, replay_history

SID = "s1"


def wire(update: Any) -> dict[str, Any]:
    """An update as the editor receives it."""
    value: dict[str, Any] = msgspec.to_builtins(SessionNotification(SID, update))["update"]
    return value


def test_kinds_come_from_the_tool_name_then_its_risk() -> None:
    assert describe_call("Read", {"file_path": "/a"}).kind == "read"
    assert describe_call("Edit", {"file_path": "/a"}).kind == "edit"
    assert describe_call("Bash", {"command": "ls"}).kind == "execute"
    assert describe_call("Grep", {"pattern": "x"}).kind == "search"
    assert describe_call("WebFetch", {"url": "https://x.org"}).kind == "fetch"
    assert describe_call("mcp__db__query", {}, risk="inspect").kind == "read"
    assert describe_call("mcp__db__query", {}).kind == "other"


def test_titles_locations_and_diffs() -> None:
    read = describe_call("Read", {"file_path": "/src/a.py", "offset": 10})
    assert read.title == "Read /src/a.py"
    assert [msgspec.to_builtins(x) for x in read.locations] == [{"path": "/src/a.py", "line": 10}]
    grep = describe_call("Grep", {"pattern": "TODO", "path": "/src"})
    assert grep.title == "Grep TODO in /src"
    assert [loc.path for loc in grep.locations] == ["/src"]
    long = describe_call("Bash", {"command": "echo " + "x" * 500 + "\nrm -rf /"})
    assert len(long.title) == TITLE_CHARS
    assert "\n" not in long.title
    edit = describe_call("Edit", {"file_path": "/a", "old_string": "1", "new_string": "2"})
    assert [msgspec.to_builtins(d) for d in edit.diff] == [
        {"type": "diff", "path": "/a", "newText": "2", "oldText": "1"}
    ]
    write = describe_call(
        "Write", {"file_path": "/a", "content": "new"}, read_current=lambda p: None
    )
    assert msgspec.to_builtins(write.diff[0]) == {
        "type": "diff",
        "path": "/a",
        "newText": "new",
        "oldText": None,
    }


def test_prompt_text_joins_text_and_names_resources() -> None:
    blocks = [
        {"type": "text", "text": "look at "},
        {"type": "resource_link", "uri": "file:///src/a.py", "name": "a.py"},
        {"type": "resource", "resource": {"uri": "file:///b.txt", "text": "B"}},
    ]
    assert (
        prompt_text(blocks) == 'look at @/src/a.py\n<context uri="file:///b.txt">\nB\n</context>\n'
    )


def test_a_mention_is_set_apart_and_its_file_uri_decoded() -> None:
    """Zed sends file URIs percent-encoded and mentions between text blocks without spaces:
    the model got ``@/w/a.txtexplain this`` and a path with ``%20`` in it. A path with a
    space is quoted, so it reads as one (decision 74)."""
    blocks = [
        {"type": "text", "text": "read"},
        {"type": "resource_link", "uri": "file:///w/my%20file.txt", "name": "my file.txt"},
        {"type": "text", "text": "and"},
        {"type": "resource_link", "uri": "file://localhost/w/b.txt", "name": "b.txt"},
        {"type": "text", "text": " then stop"},
        {"type": "resource_link", "uri": "https://example.invalid/x", "name": "x"},
    ]
    assert (
        prompt_text(blocks)
        == 'read @"/w/my file.txt" and @/w/b.txt then stop @https://example.invalid/x'
    )


def test_prompt_text_refuses_images_with_their_path() -> None:
    with pytest.raises(InvalidParams) as refused:
        prompt_text([{"type": "text", "text": "x"}, {"type": "image", "data": ""}])
    assert refused.value.issues[0]["path"] == "$.prompt[1]"
    with pytest.raises(InvalidParams):
        prompt_text([])


def event(cls: Any, seq: int, turn: str = "t1", **members: Any) -> Any:
    return cls(session_id=SID, seq=seq, turn_id=turn, **members)


def test_an_asked_call_is_shown_at_its_request_and_then_updated() -> None:
    translator = EventTranslator(read_current=lambda path: "old")
    args = {"file_path": "/w/a", "content": "new"}
    request = ApprovalRequest("r1", "x1", "Write", args, "asks")
    assert (
        translator.updates_for(
            event(PermissionDecided, 1, call_id="c1", tool="Write", decision="ask")
        )
        == []
    )
    [shown] = translator.updates_for(
        event(ApprovalRequested, 2, execution_id="x1", requests=[request])
    )
    assert wire(shown)["sessionUpdate"] == "tool_call"
    assert wire(shown)["toolCallId"] == "c1"
    assert wire(shown)["status"] == "pending"
    assert translator.call_id_for(request) == "c1"
    [started] = translator.updates_for(
        event(ToolStarted, 3, call_id="c1", tool="Write", arguments=args)
    )
    assert wire(started) == {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "c1",
        "status": "in_progress",
    }
    [done] = translator.updates_for(
        event(ToolFinished, 4, call_id="c1", tool="Write", ok=True, preview="Wrote")
    )
    assert wire(done)["status"] == "completed"
    assert [c["type"] for c in wire(done)["content"]] == ["diff", "content"]


def test_a_denied_call_never_shown_becomes_a_failed_tool_call() -> None:
    translator = EventTranslator()
    [denied] = translator.updates_for(
        event(PermissionDecided, 1, call_id="c9", tool="Bash", decision="deny", reason="no")
    )
    assert wire(denied)["sessionUpdate"] == "tool_call"
    assert wire(denied)["status"] == "failed"
    assert wire(denied)["title"] == "Bash"
    assert wire(denied)["content"] == [
        {"type": "content", "content": {"type": "text", "text": "no"}}
    ]


def test_a_replayed_waiting_call_is_the_one_its_question_names_and_updates() -> None:
    """After ``session/load`` the parked approval is asked about the call the replay showed
    (not robotad's request id, which the editor never saw), its start and end update that
    call rather than showing it again, and giving it up closes it."""
    call = ToolCall("call_9", "Write", {"file_path": "/w/a", "content": "x"})
    history = [Message.user("write"), Message.assistant(None, [call])]
    translator = EventTranslator()
    shown = translator.replay(history)[-1]  # after the prompt's chunk
    assert (wire(shown)["toolCallId"], wire(shown)["status"]) == ("call_9", "pending")
    request = ApprovalRequest("req-1", "x1", "Write", dict(call.arguments), "asks")
    assert translator.call_id_for(request) == "call_9"
    [started] = translator.updates_for(
        event(ToolStarted, 1, call_id="call_9", tool="Write", arguments=call.arguments)
    )
    assert wire(started)["sessionUpdate"] == "tool_call_update"
    [done] = translator.updates_for(
        event(ToolFinished, 2, call_id="call_9", tool="Write", ok=True, preview="Wrote")
    )
    assert (wire(done)["sessionUpdate"], wire(done)["status"]) == ("tool_call_update", "completed")
    again = EventTranslator()
    again.replay(history)
    [closed] = again.close_open("the approval was given up")
    assert (wire(closed)["toolCallId"], wire(closed)["status"]) == ("call_9", "failed")
    assert again.close_open("twice") == []


def test_an_abandoned_call_is_closed_with_what_history_says_of_it() -> None:
    """An abandon closes each call with the result robotad wrote (``outcome unknown: …``
    for one robotad stopped under, never "given up"); a call the editor was never shown (a
    resume replays nothing) is shown now, failed; any other open call gets the reason."""
    first = ToolCall("call_1", "Bash", {"command": "make"})
    other = ToolCall("call_2", "Write", {"file_path": "/w/a", "content": "x"})
    translator = EventTranslator()
    translator.replay([Message.user("go"), Message.assistant(None, [first, other])])
    unknown = Message.tool("call_1", "Bash", "outcome unknown: Bash was running", ok=False)
    closed = translator.close_abandoned([unknown], "given up")
    assert [(wire(u)["toolCallId"], wire(u)["status"]) for u in closed] == [
        ("call_1", "failed"),
        ("call_2", "failed"),
    ]
    texts = [wire(u)["content"][0]["content"]["text"] for u in closed]
    assert texts == ["outcome unknown: Bash was running", "interrupted: given up"]
    resumed = EventTranslator()
    [shown] = resumed.close_abandoned([unknown], "given up")
    assert wire(shown)["sessionUpdate"] == "tool_call"
    assert (wire(shown)["title"], wire(shown)["status"]) == ("Bash", "failed")
    assert wire(shown)["content"][0]["content"]["text"] == "outcome unknown: Bash was running"


def test_a_call_that_could_not_run_becomes_a_failed_tool_call() -> None:
    """An unknown tool or arguments the tool refuses: robotad says only ``tool_finished``
    (the call never started); the editor is shown the call, failed, with the reason."""
    translator = EventTranslator()
    [failed] = translator.updates_for(
        event(ToolFinished, 1, call_id="c7", tool="Teleport", ok=False, preview="unknown tool")
    )
    assert wire(failed)["sessionUpdate"] == "tool_call"
    assert (wire(failed)["toolCallId"], wire(failed)["status"]) == ("c7", "failed")
    assert wire(failed)["content"] == [
        {"type": "content", "content": {"type": "text", "text": "unknown tool"}}
    ]


def test_a_call_cut_off_by_an_abort_is_closed_as_failed() -> None:
    """Cancelled while a command ran, the call stayed "in progress" in the editor (history
    had it failed, so a reload disagreed with the live view)."""
    translator = EventTranslator()
    args = {"command": "sleep 30"}
    translator.updates_for(event(ToolStarted, 1, call_id="c1", tool="Bash", arguments=args))
    translator.updates_for(event(ToolStarted, 2, call_id="c2", tool="Bash", arguments=args))
    translator.updates_for(event(ToolFinished, 3, call_id="c2", tool="Bash", ok=True, preview=""))
    assert translator.updates_for(event(TurnFinished, 4, status="waiting")) == []
    [closed] = translator.updates_for(event(TurnFinished, 5, status="aborted"))
    assert wire(closed) == {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "c1",
        "status": "failed",
        "content": [
            {
                "type": "content",
                "content": {"type": "text", "text": "interrupted: the turn was aborted"},
            }
        ],
    }
    assert translator.updates_for(event(TurnFinished, 6, status="aborted")) == []


def test_own_prompts_are_not_echoed_and_usage_is_sent_when_it_changes() -> None:
    translator = EventTranslator()
    translator.own_turns.add("mine")
    assert translator.updates_for(event(TurnStarted, 1, turn="mine", prompt="hi")) == []
    [echo] = translator.updates_for(event(TurnStarted, 2, turn="theirs", prompt="yo"))
    assert wire(echo) == {
        "sessionUpdate": "user_message_chunk",
        "content": {"type": "text", "text": "yo"},
    }
    usage = {
        "phase": "exact",
        "used_tokens": 5,
        "max_tokens": 100,
        "used_percentage": 5.0,
        "remaining_percentage": 95.0,
    }
    [first] = translator.updates_for(event(ContextUpdated, 3, **usage))
    assert wire(first) == {"sessionUpdate": "usage_update", "used": 5, "size": 100}
    assert translator.updates_for(event(ContextUpdated, 4, **usage)) == []
    assert translator.updates_for(event(TextDelta, 5, text="")) == []


def test_replay_folds_each_result_into_its_call() -> None:
    call = ToolCall("c1", "Bash", {"command": "false"})
    history = [
        Message.system("sys"),
        Message.user("run it"),
        Message.assistant("running", [call]),
        Message.tool("c1", "Bash", "exit 1", ok=False),
        Message.assistant(None, [ToolCall("c2", "Read", {"file_path": "/a"})]),
    ]
    updates = [wire(u) for u in replay_history(history)]
    assert [u["sessionUpdate"] for u in updates] == [
        "user_message_chunk",
        "agent_message_chunk",
        "tool_call",
        "tool_call",
    ]
    assert updates[2]["status"] == "failed"
    assert updates[2]["content"][-1]["content"]["text"] == "exit 1"
    assert updates[3]["status"] == "pending"  # no result yet: a parked approval


def test_answers_of_the_editor() -> None:
    def result(outcome: dict[str, Any]) -> RequestPermissionResult:
        return msgspec.convert({"outcome": outcome}, RequestPermissionResult)

    selected = {"outcome": "selected"}
    assert answer_of(result({**selected, "optionId": "allow_once"}), "R") == Answer(True)
    assert answer_of(result({**selected, "optionId": "allow_always"}), "R") == Answer(True, "R")
    assert answer_of(result({**selected, "optionId": "allow_always"}), None) == Answer(False)
    assert answer_of(result({**selected, "optionId": "reject_once"}), "R") == Answer(False)
    assert answer_of(result({**selected, "optionId": "made-up"}), "R") == Answer(False)
    assert answer_of(result({"outcome": "cancelled"}), "R") is None


def test_always_is_offered_only_with_a_rule() -> None:
    request = ApprovalRequest("r1", "x1", "Teleport", {}, "asks")
    view = describe_call("Teleport", {})
    params = msgspec.to_builtins(request_params(SID, "c1", view, request, None))
    assert [o["kind"] for o in params["options"]] == ["allow_once", "reject_once"]
    assert params["toolCall"]["status"] == "pending"
    mcp = ApprovalRequest("r2", "x1", "mcp__a__b", {}, "asks")
    rule = always_rule(mcp, "/w")
    offered = msgspec.to_builtins(request_params(SID, "c2", view, mcp, rule))
    always = [o for o in offered["options"] if o["kind"] == "allow_always"]
    assert [o["name"] for o in always] == ["Always allow mcp__a__b"]


def test_a_bash_approval_shows_the_command_whole_and_exactly() -> None:
    """The title was the model's own description of the command ("Bash: list the files" for
    anything), and a command cut at the title's 120th character hid its next line; a bidi
    override or a zero-width space stood raw in it. The title is now the command, shown
    exactly, and the request carries the whole command in a code block when the title cannot
    show it so; a short plain one needs none."""
    command = "echo " + "x" * 200 + "\nrm -rf ~ \u202eevil exa\u200bmple.com ```"
    arguments = {"command": command, "description": "list the files"}
    view = describe_call("Bash", arguments)
    assert view.title.startswith("Bash: echo xxx")
    assert "list the files" not in view.title
    request = ApprovalRequest("r1", "x1", "Bash", arguments, "asks")
    params = msgspec.to_builtins(request_params(SID, "c1", view, request, None))
    shown = "echo " + "x" * 200 + "\nrm -rf ~ <U+202E>evil exa<U+200B>mple.com ```"
    assert params["toolCall"]["content"][0] == {
        "type": "content",
        "content": {"type": "text", "text": f"command:\n````\n{shown}\n````"},
    }
    assert params["toolCall"]["rawInput"] == arguments  # the exact value, for a program
    hidden = describe_call("Bash", {"command": "ls \u202etxt.exe a\u00a0b"})
    assert hidden.title == "Bash: ls <U+202E>txt.exe a<U+00A0>b"
    plain = ApprovalRequest("r2", "x1", "Bash", {"command": "make test"}, "asks")
    plain_view = describe_call("Bash", plain.arguments)
    assert plain_view.title == "Bash: make test"
    assert (
        msgspec.to_builtins(request_params(SID, "c2", plain_view, plain, None))["toolCall"][
            "content"
        ]
        == []
    )
    spaced = ApprovalRequest("r3", "x1", "Bash", {"command": "rm a  b"}, "asks")
    spaced_params = request_params(SID, "c3", describe_call("Bash", spaced.arguments), spaced, None)
    assert (
        "rm a  b" in msgspec.to_builtins(spaced_params)["toolCall"]["content"][0]["content"]["text"]
    )


def test_a_turn_stopped_at_max_rounds_is_max_turn_requests() -> None:
    """§10.2's ``stopReason: "maxRounds"`` on a completed turn; ``end`` or none is end_turn."""
    from types import SimpleNamespace

    from robotactl.acp.prompt import _completed_reason

    assert _completed_reason(SimpleNamespace(stop_reason="maxRounds")) == "max_turn_requests"  # type: ignore[arg-type]
    assert _completed_reason(SimpleNamespace(stop_reason="end")) == "end_turn"  # type: ignore[arg-type]
    assert _completed_reason(SimpleNamespace()) == "end_turn"  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("tool", "arguments", "rule"),
    [
        ("Write", {"file_path": "/w/a (1).txt", "content": "x"}, "Write(/w/a \\(1\\).txt)"),
        ("Bash", {"command": "ls *.py"}, "Bash(ls \\*.py)"),
        ("Glob", {"pattern": "*.py"}, "Glob(/w)"),
        ("WebFetch", {"url": "https://Docs.Example.org./x"}, "WebFetch(domain:docs.example.org)"),
        ("WebFetch", {"url": "not a url"}, None),
        # An MCP tool's rules name tools, never arguments: "always" is that one tool.
        ("mcp__db__query", {"sql": "select 1"}, "mcp__db__query"),
        ("mcp__db", {}, None),  # not a tool's name
        ("Teleport", {}, None),
        ("Bash", {"command": "  "}, None),
    ],
)
def test_always_covers_exactly_the_call(
    tool: str, arguments: dict[str, Any], rule: str | None
) -> None:
    """G-113: the rule is projected from the permission argument, never the bare tool."""
    request = ApprovalRequest("r1", "x1", tool, arguments, "asks")
    assert always_rule(request, "/w") == rule


def test_the_always_rules_parse_as_robotads_patterns() -> None:
    """Each rule written is one robotad's own pattern parser accepts (PROTOCOL.md §4)."""
    from robotad.session.permissions.patterns import parse_rules
    from robotad.tools import builtin_tools

    profiles = {tool.name: tool.profile for tool in builtin_tools()}
    calls = [
        ("Write", {"file_path": "/w/a (1)*.txt"}),
        ("Bash", {"command": "git commit -m 'x (y)' && echo \\\\done"}),
        ("Read", {"file_path": "domain:odd"}),
        ("WebFetch", {"url": "http://[::1]:8080/x"}),
        ("mcp__every__get-env", {}),
    ]
    rules = [always_rule(ApprovalRequest("r", "x", tool, args, ""), "/w") for tool, args in calls]
    assert all(rules)
    parse_rules([rule for rule in rules if rule], "$.rules", profiles)


async def test_a_prompt_robotad_would_not_take_is_refused_before_it_is_sent() -> None:
    """Just under the editor's 16 MiB frame limit, the prompt re-wrapped for robotad went over
    robotad's: robotad closed the agent's connection and the prompt was never answered."""
    from robotactl.acp.agent import AcpAgent
    from robotactl.acp.defaults import SessionDefaults
    from robotactl.acp.schema import PromptParams

    agent = AcpAgent(SessionDefaults())
    huge = [{"type": "text", "text": "x" * (15 * 2**20 + 1)}]
    # 12 MiB of text, 19 MiB once JSON-escaped: robotad counts the escaped request
    escaped = [{"type": "text", "text": '{"k": "v"}\n' * (12 * 2**20 // 11)}]
    for prompt in (huge, escaped):
        with pytest.raises(InvalidParams) as refused:
            await agent.prompt(PromptParams("s1", prompt), None)  # type: ignore[arg-type]
        assert refused.value.issues[0]["path"] == "$.prompt[0]"
        assert "more than robotad takes" in refused.value.issues[0]["message"]
