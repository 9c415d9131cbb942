"""The turn claim: one turn, compaction or direct call at a time; abort signals, never releases."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from protocol.errors import NotAllowed, SessionBusy, TurnAborted
from protocol.shapes import ApprovalRequest
from robotad.session.turn.claim import TurnClaim
from tests.session.session_harness import (
    MemoryStore,
    ShoutTool,
    WaitTool,
    new_session,
    scripted,
)


def test_claim_release_only_by_holder() -> None:
    """G-062, G-063: the claim is freed by its own holder only; an older token released late
    never frees a newer holder's claim."""
    claim = TurnClaim("s1")
    first = claim.claim("turn", "t1")
    with pytest.raises(SessionBusy) as busy:
        claim.claim("turn", "t2")
    assert busy.value.data == {"sessionId": "s1", "turnId": "t1"}
    assert busy.value.message == "session s1 is busy with turn t1"
    assert claim.release(first)
    compaction = claim.claim("compaction")
    with pytest.raises(SessionBusy) as busy:
        claim.claim("turn", "t2")
    assert busy.value.data == {"sessionId": "s1", "turnId": None}
    assert busy.value.message == "session s1 is busy with a compaction"
    assert claim.release(compaction)
    second = claim.claim("turn", "t2")
    assert not claim.release(first)  # the late finisher
    assert claim.running
    assert claim.holder is second
    assert claim.release(second)
    assert not claim.running


def test_abort_signals_without_releasing() -> None:
    """G-064, G-193: abort signals the holder and keeps the claim; an idle abort is false."""
    claim = TurnClaim("s1")
    assert claim.abort() is False
    token = claim.claim("turn", "t1")
    assert claim.abort() is True
    assert token.abort.aborted
    assert claim.running
    assert claim.holder is token


async def test_two_runs_in_one_tick(tmp_path: Path) -> None:
    """G-058, G-059, G-060: of two runs started in the same scheduler tick exactly one
    proceeds; the other is refused at once with SessionBusy naming the holder's turn, and its
    prompt never runs later."""
    provider = scripted([{"text": "first answer", "delayMs": 5}])
    session = new_session(tmp_path, provider)
    results: dict[str, Any] = {}

    async def attempt(turn_id: str, prompt: str) -> None:
        try:
            results[turn_id] = await session.run(prompt, turn_id=turn_id)
        except SessionBusy as exc:
            results[turn_id] = exc

    async with trio.open_nursery() as nursery:
        nursery.start_soon(attempt, "t-a", "prompt a")
        nursery.start_soon(attempt, "t-b", "prompt b")
    outcomes = sorted(results.items())
    winners = [tid for tid, value in outcomes if isinstance(value, str)]
    losers = [value for _, value in outcomes if isinstance(value, SessionBusy)]
    assert len(winners) == 1
    assert len(losers) == 1
    assert losers[0].data == {"sessionId": session.session_id, "turnId": winners[0]}
    assert results[winners[0]] == "first answer"
    users = [m.content for m in session.get_history() if m.role == "user"]
    assert len(users) == 1
    assert len(provider.turn_requests) == 1
    assert not session.is_running()


async def test_compaction_and_direct_share_the_claim(tmp_path: Path) -> None:
    """G-061, G-067: while a turn holds the session, compaction and direct invocation are
    refused; while a direct invocation holds it, runs and compactions are."""
    provider = scripted()
    provider.gate = trio.Event()
    wait = WaitTool()
    session = new_session(tmp_path, provider, tools=[wait])
    async with trio.open_nursery() as nursery:
        nursery.start_soon(functools.partial(session.run, "hello", turn_id="t-1"))
        await provider.entered.wait()
        assert session.is_running()
        assert session.current_turn_id == "t-1"
        with pytest.raises(SessionBusy):
            await session.compact()
        with pytest.raises(SessionBusy):
            await session.invoke_tool("Wait", {})
        provider.gate.set()
    assert not session.is_running()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(session.invoke_tool, "Wait", {"label": "x"})
        await wait.started.wait()
        with pytest.raises(SessionBusy) as busy:
            await session.run("again")
        assert busy.value.data == {"sessionId": session.session_id, "turnId": None}
        # The work outside any turn is named by its kind, never as "turn None".
        assert busy.value.message.endswith("is busy with a tool called directly")
        with pytest.raises(SessionBusy):
            await session.compact()
        with pytest.raises(SessionBusy):
            await session.invoke_tool("Wait", {})
        wait.release.set()
    assert await session.run("now") == "echo: now"


async def test_abort_keeps_claim_until_unwound(tmp_path: Path) -> None:
    """G-064, G-065, G-192: after abort the session stays running while the turn unwinds (a
    tool settling), a run in that window is refused, and abort → await → run is accepted."""
    wait = WaitTool()
    wait.settle = trio.Event()  # the body holds on after cancellation until we let it settle
    provider = scripted([{"toolCalls": [{"name": "Wait", "arguments": {"label": "a"}}]}])
    session = new_session(tmp_path, provider, tools=[wait])
    outcome: list[BaseException] = []

    async def turn() -> None:
        try:
            await session.run("go", turn_id="t-1")
        except TurnAborted as exc:
            outcome.append(exc)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(turn)
        await wait.started.wait()
        assert session.abort() is True
        await trio.testing.wait_all_tasks_blocked()
        assert session.is_running()  # still unwinding: the body has not settled
        with pytest.raises(SessionBusy) as busy:
            await session.run("too early")
        assert (busy.value.data or {})["turnId"] == "t-1"
        assert not outcome
        wait.settle.set()
    assert isinstance(outcome[0], TurnAborted)
    assert outcome[0].data == {"sessionId": session.session_id, "turnId": "t-1"}
    assert not session.is_running()
    assert session.abort() is False
    assert await session.run("restart") == "echo: restart"
    assert "too early" not in [m.content for m in session.get_history()]


async def test_abort_resolves_waiting_approval_as_deny(tmp_path: Path) -> None:
    """G-066: an abort while a live approval waits resolves it as a denial; the tool never
    runs even when the approver answers "approve" afterwards."""
    shout = ShoutTool()
    answered = trio.Event()
    asked = trio.Event()
    requests: list[ApprovalRequest] = []

    async def approver(request: ApprovalRequest) -> bool:
        requests.append(request)
        asked.set()
        with trio.CancelScope(shield=True):  # a stubborn approver that ignores cancellation
            await answered.wait()
        return True

    provider = scripted([{"toolCalls": [{"name": "Shout", "arguments": {"text": "hi"}}]}])
    session = new_session(tmp_path, provider, tools=[shout], permission_handler=approver)
    aborted: list[TurnAborted] = []

    async def turn() -> None:
        try:
            await session.run("shout")
        except TurnAborted as exc:
            aborted.append(exc)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(turn)
        await asked.wait()
        assert session.abort()
        answered.set()
    assert len(aborted) == 1
    assert shout.runs == []
    assert requests[0].tool == "Shout"
    assert requests[0].arguments == {"text": "hi"}
    tool_messages = [m for m in session.get_history() if m.role == "tool"]
    assert len(tool_messages) == 1
    assert not tool_messages[0].ok
    assert session.recent_denials()[0].tool == "Shout"


async def test_abort_cancels_waiting_approval(tmp_path: Path) -> None:
    """G-066: an approver waiting normally is cancelled by the abort; a later approval (here:
    the event set afterwards) has nothing left to approve."""
    shout = ShoutTool()
    asked = trio.Event()
    cancelled: list[bool] = []

    async def approver(request: ApprovalRequest) -> bool:
        asked.set()
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            cancelled.append(True)
            raise

    provider = scripted([{"toolCalls": [{"name": "Shout", "arguments": {"text": "hi"}}]}])
    session = new_session(tmp_path, provider, tools=[shout], permission_handler=approver)
    async with trio.open_nursery() as nursery:

        async def turn() -> None:
            with pytest.raises(TurnAborted):
                await session.run("shout")

        nursery.start_soon(turn)
        await asked.wait()
        session.abort()
    assert cancelled == [True]
    assert shout.runs == []


async def test_cancelled_direct_invocation_keeps_claim_until_settled(tmp_path: Path) -> None:
    """G-068: cancelling a direct invocation keeps the claim until the body has settled."""
    wait = WaitTool()
    wait.settle = trio.Event()
    session = new_session(tmp_path, tools=[wait])
    caller = trio.CancelScope()

    async def invoke() -> None:
        with caller:
            await session.invoke_tool("Wait", {"label": "d"})

    async with trio.open_nursery() as nursery:
        nursery.start_soon(invoke)
        await wait.started.wait()
        caller.cancel()
        await trio.testing.wait_all_tasks_blocked()
        assert session.is_running()
        assert wait.settled == []
        wait.settle.set()
    assert caller.cancelled_caught
    assert wait.settled == ["d"]
    assert not session.is_running()


async def test_shutdown_waits_for_direct_invocation(tmp_path: Path) -> None:
    """G-069, G-130: shutdown lets a running direct invocation settle before it saves, fires
    SessionEnd and closes the provider."""
    wait = WaitTool()
    provider = scripted()
    store = MemoryStore()
    session = new_session(tmp_path, provider, tools=[wait], store=store)
    results: list[Any] = []

    async def invoke() -> None:
        results.append(await session.invoke_tool("Wait", {"label": "s"}))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(invoke)
        await wait.started.wait()
        nursery.start_soon(session.shutdown)
        await trio.testing.wait_all_tasks_blocked()
        assert provider.closed == 0
        assert store.saved == []
        wait.release.set()
    assert results[0].ok
    assert results[0].content == "waited s"
    assert provider.closed == 1
    assert len(store.saved) == 1
    with pytest.raises(NotAllowed):
        await session.run("after shutdown")


async def test_direct_invocation_never_prompts(tmp_path: Path) -> None:
    """G-070: a direct call that would need a person is denied at once; the handler is never
    asked and the body never runs."""
    shout = ShoutTool()
    asked: list[ApprovalRequest] = []

    async def approver(request: ApprovalRequest) -> bool:
        asked.append(request)
        return True

    session = new_session(tmp_path, tools=[shout], permission_handler=approver)
    result = await session.invoke_tool("Shout", {"text": "x"})
    assert not result.ok
    assert "needs approval" in result.content
    assert asked == []
    assert shout.runs == []
    session.add_rule("Shout(x)", "allow")
    allowed = await session.invoke_tool("Shout", {"text": "x"})
    assert allowed.ok
    assert allowed.content == "X"
    unknown = await session.invoke_tool("Nope", {})
    assert not unknown.ok
    assert "unknown tool" in unknown.content
