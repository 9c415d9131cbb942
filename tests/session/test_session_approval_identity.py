"""An approval answers the one action its request showed: a call id the model repeats is not
that action, nor is the same call once its re-check asks for another reason; and an answer on
record whose call never started goes on when the same answer is delivered again."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from protocol.errors import InternalError, StorageFailed
from protocol.shapes import Message, ToolCall, TurnCompleted, TurnWaiting
from robotad.agent.gate import Admit, Park
from robotad.agent.loop import open_calls
from robotad.agent.provider import ModelReply, ModelRequest, StreamObserver
from robotad.session.recovery.execution_state import Execution, ParkingApprover
from robotad.session.session import Session
from robotad.storage.journal import RequestRecord, ResponseRecord
from robotad.tools import builtin_tools
from tests.agent.loop_fakes import paired
from tests.journal_fakes import FaultyJournal, MemoryJournal, of_kind, once
from tests.session.session_harness import (
    LIMIT,
    MemoryStore,
    answer,
    hooks_for,
    kinds,
    new_session,
    scripted,
    write_call,
)


class RepeatingIds:
    """A provider replying with prepared tool calls, ids and all (as a server chooses them),
    then plain ``done``; keeps every request it was given."""

    name = "repeating"
    kind = "test"
    model = "test"
    context_window: int | None = None

    def __init__(self, *rounds: list[ToolCall]) -> None:
        self._rounds = list(rounds)
        self.requests: list[ModelRequest] = []

    async def complete(self, request: ModelRequest, observer: StreamObserver) -> ModelReply:
        await trio.lowlevel.checkpoint()
        self.requests.append(request)
        if self._rounds:
            return ModelReply("", self._rounds.pop(0))
        observer.on_text("done")
        return ModelReply("done", [])

    async def aclose(self) -> None:
        pass


def write(call_id: str, path: str, content: str = "x") -> ToolCall:
    return ToolCall(call_id, "Write", {"file_path": path, "content": content})


def session_of(workspace: Path, provider: Any) -> tuple[Session, MemoryStore]:
    store = MemoryStore()
    session = new_session(
        workspace, provider, tools=builtin_tools(), store=store, session_id="s-ids"
    )
    return session, store


def call_ids(history: list[Message]) -> list[str]:
    return [call.id for message in history for call in message.calls]


@pytest.mark.parametrize(
    "rounds",
    [
        pytest.param(
            [[write("call_0", "a.txt")], [write("call_0", "b.txt", "unasked")]],
            id="the-next-round",
        ),
        pytest.param(
            [
                [ToolCall("call_0", "Read", {"file_path": "notes.txt"}), write("call_1", "a.txt")],
                [ToolCall("call_1", "Bash", {"command": "echo ran >> b.txt"})],
            ],
            id="a-bash-call-of-the-next-round",
        ),
        pytest.param(
            [[write("call_0", "a.txt"), write("call_0", "b.txt", "unasked")]], id="one-reply"
        ),
    ],
)
async def test_a_repeated_call_id_is_a_new_call_that_asks_for_itself(
    workspace: Path, rounds: list[list[ToolCall]]
) -> None:
    """A provider that reuses a tool-call id (in the same reply or a later round of the same
    turn) gets a call with a fresh id of its own: approving the first call runs nothing the
    person was not shown, the second asks with its own request, and history stays paired
    under the new id — in what the provider is sent back too."""
    provider = RepeatingIds(*rounds)
    session, store = session_of(workspace, provider)
    journal = MemoryJournal()
    with trio.fail_after(LIMIT):
        first = await session.run_recoverable("go", journal)
        assert isinstance(first, TurnWaiting)
        (asked,) = first.requests
        assert asked.arguments["file_path"] == str(workspace / "a.txt")
        second = await session.resume_recoverable(
            first.execution_id, journal, [answer(asked.request_id, True)]
        )
    assert (workspace / "a.txt").read_text() == "x"
    assert not (workspace / "b.txt").exists()
    assert isinstance(second, TurnWaiting)
    (again,) = second.requests
    assert again.tool == rounds[-1][-1].name
    assert again.arguments != asked.arguments
    ids = call_ids(session.get_history())
    assert len(ids) == len(set(ids))
    with trio.fail_after(LIMIT):
        done = await session.resume_recoverable(
            first.execution_id, journal, [answer(again.request_id, False)]
        )
    assert isinstance(done, TurnCompleted)
    assert not (workspace / "b.txt").exists()
    history = session.get_history()
    assert paired(history)
    assert not open_calls(store.last.messages)
    assert session.get_pending_execution() is None
    sent_back = provider.requests[-1].messages
    assert call_ids(sent_back) == ids
    assert [m.tool_call_id for m in sent_back if m.role == "tool"] == ids
    assert kinds(await journal.read(first.execution_id)).count("request") == 2


async def test_an_approval_admits_only_the_action_its_request_showed() -> None:
    """The approver of a recoverable run admits a call on its approved request only when the
    tool, the (effective) arguments and the reason are the ones the request showed; for any
    other it journals a new request and parks the call, and that request then waits."""
    journal = MemoryJournal()
    execution = Execution("x-1", "t-1", journal)
    shown = {"file_path": "/w/a.txt", "content": "harmless"}
    request = RequestRecord(
        id=execution.record_id("request", "call_0"),
        execution_id="x-1",
        request_id="req-1",
        call_id="call_0",
        tool="Write",
        arguments=shown,
        reason="default mode asks before modify tools",
    )
    execution.requests["req-1"] = request
    execution.responses["req-1"] = ResponseRecord(
        id=execution.record_id("response", "req-1"),
        execution_id="x-1",
        request_id="req-1",
        response_id="r-1",
        approved=True,
    )
    approver = ParkingApprover(execution)
    same = write("call_0", "/w/a.txt", "harmless")
    assert await approver.approve(same, dict(shown), request.reason) == Admit(shown)
    other_target = {"file_path": "/w/.bashrc", "content": "harmless"}
    parked = await approver.approve(same, other_target, request.reason)
    assert isinstance(parked, Park)
    (waits,) = execution.waits([Message.assistant(None, [same])])
    assert waits.arguments == other_target
    other_reason = "/w/.git/config matches **/.git/config: writing a persistence path"
    assert isinstance(await approver.approve(same, dict(shown), other_reason), Park)
    (waits,) = execution.waits([Message.assistant(None, [same])])
    assert (waits.arguments, waits.reason) == (shown, other_reason)
    bash = ToolCall("call_0", "Bash", {"command": "true"})
    assert isinstance(await approver.approve(bash, dict(shown), request.reason), Park)
    assert kinds(await journal.read("x-1")) == ["request", "request", "request"]


async def test_an_approval_does_not_cover_a_target_its_request_did_not_show(
    workspace: Path,
) -> None:
    """A parked Write of a project file, approved after the file became a link to a
    persistence path: the re-check asks for a reason the person was not shown, so the
    approval does not cover it — a new request shows the link's target and the file is
    written only if that one is approved."""
    git = workspace / ".git"
    git.mkdir()
    (git / "config").write_text("[core]\n")
    session = new_session(
        workspace,
        scripted([{"toolCalls": [write_call("notes.txt", "PWNED\n")]}, {"text": "ok"}]),
        tools=builtin_tools(),
        session_id="s-link",
    )
    journal = MemoryJournal()
    with trio.fail_after(LIMIT):
        first = await session.run_recoverable("go", journal)
    assert isinstance(first, TurnWaiting)
    (shown,) = first.requests
    assert "persistence" not in shown.reason
    (workspace / "notes.txt").unlink()
    (workspace / "notes.txt").symlink_to(git / "config")
    with trio.fail_after(LIMIT):
        second = await session.resume_recoverable(
            first.execution_id, journal, [answer(shown.request_id, True)]
        )
    assert (git / "config").read_text() == "[core]\n"
    assert isinstance(second, TurnWaiting)
    (asked,) = second.requests
    assert asked.request_id != shown.request_id
    assert (asked.tool, asked.arguments) == (shown.tool, shown.arguments)
    assert ".git/config" in asked.reason
    assert "persistence path" in asked.reason
    with trio.fail_after(LIMIT):
        done = await session.resume_recoverable(
            first.execution_id, journal, [answer(asked.request_id, False)]
        )
    assert isinstance(done, TurnCompleted)
    assert (git / "config").read_text() == "[core]\n"
    (result,) = [m for m in session.get_history() if m.role == "tool"]
    assert not result.ok


async def test_a_hooks_words_that_change_on_every_check_do_not_ask_again(
    workspace: Path, tmp_path: Path
) -> None:
    """A PreToolUse hook asks with a reason that holds a counter (a time, a diff stat): the
    re-check at the answer gets other words for the same action. The approval covers it —
    only the rules' own reasons are compared — so the call runs once, on the first answer."""
    counter = tmp_path / "count"
    script = tmp_path / "ask.py"
    script.write_text(
        "import json, pathlib, sys\n"
        f"p = pathlib.Path({str(counter)!r})\n"
        "n = int(p.read_text()) + 1 if p.exists() else 1\n"
        "p.write_text(str(n))\n"
        "print(json.dumps({'hookSpecificOutput': {'hookEventName': 'PreToolUse',"
        " 'permissionDecision': 'ask', 'permissionDecisionReason': f'policy check {n}'}}))\n"
    )
    hooks = hooks_for(
        workspace,
        {"PreToolUse": [{"hooks": [{"type": "command", "command": f"{sys.executable} {script}"}]}]},
    )
    session = new_session(
        workspace,
        scripted([{"toolCalls": [write_call()]}, {"text": "written"}]),
        tools=builtin_tools(),
        hooks=hooks,
        permission_mode="acceptEdits",  # the mode allows the Write: only the hook asks
        session_id="s-hook-words",
    )
    journal = MemoryJournal()
    with trio.fail_after(LIMIT):
        first = await session.run_recoverable("write it", journal)
    assert isinstance(first, TurnWaiting)
    (shown,) = first.requests
    assert shown.reason == "policy check 1"
    with trio.fail_after(LIMIT):
        done = await session.resume_recoverable(
            first.execution_id, journal, [answer(shown.request_id, True)]
        )
    assert isinstance(done, TurnCompleted)
    assert counter.read_text() == "2"  # the hook checked again, with other words
    assert (workspace / "out.txt").read_text() == "hello"


async def test_a_redelivered_answer_goes_on_with_an_approved_call_that_never_started(
    workspace: Path,
) -> None:
    """robotad stopped after an answer was on record and before its call started (here the
    ``effect_started`` write fails; then the session is loaded again from its record): the
    execution waits with no request left to answer, and delivering the same answer again
    goes on with it — the call runs once and the turn completes."""
    session = new_session(
        workspace,
        scripted([{"toolCalls": [write_call()]}, {"text": "unused"}]),
        tools=builtin_tools(),
        store=(store := MemoryStore()),
        session_id="s-redo",
    )
    journal = FaultyJournal(MemoryJournal(), fail_on=once(of_kind("effect_started")))
    with trio.fail_after(LIMIT):
        waiting = await session.run_recoverable("write it", journal)
    assert isinstance(waiting, TurnWaiting)
    response = answer(waiting.requests[0].request_id, True, "resp-1")
    with trio.fail_after(LIMIT), pytest.raises((InternalError, StorageFailed)):
        await session.resume_recoverable(waiting.execution_id, journal, [response])
    assert not (workspace / "out.txt").exists()
    again = new_session(
        workspace,
        scripted([{"text": "written"}]),
        tools=builtin_tools(),
        session_id="s-redo",
        history=store.last.messages,
        source="resume",
    )
    await again.recover(journal)
    pending = again.get_pending_execution()
    assert pending is not None
    assert pending.requests == []
    with trio.fail_after(LIMIT):
        done = await again.resume_recoverable(waiting.execution_id, journal, [response])
    assert done == TurnCompleted(turn_id=waiting.turn_id, response="written")
    assert (workspace / "out.txt").read_text() == "hello"
    assert again.get_pending_execution() is None
    with trio.fail_after(LIMIT):
        assert await again.resume_recoverable(waiting.execution_id, journal, [response]) == done
