"""What a session busy with one client's turn answers another client's resume and abandon, in
process: the code PROTOCOL §3 fixes for the situation, not SessionBusy for every request that
meets a held session."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
import trio.testing

from protocol.errors import SessionBusy, StaleResponse, TurnAborted
from protocol.methods import (
    ApprovalResponse,
    CreateParams,
    ResumeParams,
    RunParams,
    ScriptedToolCall,
    Step,
)
from protocol.shapes import TurnCompleted, TurnRunning, TurnWaiting
from robotad.daemon.manager import SessionManager
from robotad.daemon.operations import SessionOperations

TIMEOUT = 20.0
WRITE = ScriptedToolCall(name="Write", arguments={"file_path": "out.txt", "content": "x"})
#: A reply that takes a minute: the session stays busy until it is aborted.
SLOW = Step(text="slow reply", chunks=2, delay_ms=60_000)


async def _approved_then_busy(
    manager: SessionManager, ops: SessionOperations, cwd: Path
) -> tuple[str, ResumeParams, TurnCompleted, TurnRunning]:
    """A session whose approved execution has finished (its resume answered), now busy with
    another client's slow turn: (session id, that resume, its answer, the slow turn)."""
    script = [Step(tool_calls=[WRITE]), Step(text="wrote it"), SLOW]
    sid = (await manager.create(CreateParams(cwd=str(cwd), script=script))).session_id
    waiting = await ops.run(RunParams(session_id=sid, prompt="write"), None)
    assert isinstance(waiting, TurnWaiting)
    answer = ApprovalResponse(waiting.requests[0].request_id, "resp-1", True)
    resume = ResumeParams(session_id=sid, execution_id=waiting.execution_id, responses=[answer])
    done = await ops.resume(resume, None)
    assert isinstance(done, TurnCompleted)
    slow = await ops.run(RunParams(session_id=sid, prompt="slow", wait=False), None)
    assert isinstance(slow, TurnRunning)
    await trio.testing.wait_all_tasks_blocked()
    return sid, resume, done, slow


async def _stop(ops: SessionOperations, sid: str, slow: TurnRunning) -> None:
    assert await ops.abort(sid) is True
    with pytest.raises(TurnAborted):
        await ops.run(RunParams(session_id=sid, prompt="slow", turn_id=slow.turn_id), None)


async def test_a_redelivered_answer_gets_its_result_while_another_turn_runs(
    manager: SessionManager, tmp_path: Path
) -> None:
    """G-084: a client whose ``session/resume`` reply was lost redelivers the same answer;
    meanwhile another client started a turn. The redelivery was refused SessionBusy
    (-32001) — a refusal of work nobody asked to run — instead of the execution's latest
    TurnResult, which needs nothing of the busy session. It now gets that result."""
    ops = SessionOperations(manager)
    with trio.fail_after(TIMEOUT):
        sid, resume, done, slow = await _approved_then_busy(manager, ops, tmp_path)
        assert await ops.resume(resume, None) == done
        await _stop(ops, sid, slow)


async def test_a_stale_resume_or_abandon_is_stale_while_another_turn_runs(
    manager: SessionManager, tmp_path: Path
) -> None:
    """G-086, PROTOCOL §3 (-32011): resuming or abandoning an execution that is unknown or
    finished answered StaleResponse on an idle session but SessionBusy (-32001) while
    another client's turn ran — a client then waited for the session to be free to be told
    its answer was stale. Both are StaleResponse whatever holds the session."""
    ops = SessionOperations(manager)
    with trio.fail_after(TIMEOUT):
        sid, resume, _, slow = await _approved_then_busy(manager, ops, tmp_path)
        unknown = ResumeParams(session_id=sid, execution_id="x-unknown", responses=[])
        with pytest.raises(StaleResponse):
            await ops.resume(unknown, None)
        other = ApprovalResponse(resume.responses[0].request_id, "resp-2", False)
        contradicting = ResumeParams(
            session_id=sid, execution_id=resume.execution_id, responses=[other]
        )
        with pytest.raises(StaleResponse):
            await ops.resume(contradicting, None)
        for execution_id in ("x-unknown", resume.execution_id):
            with pytest.raises(StaleResponse):
                await ops.abandon(sid, execution_id)
        await _stop(ops, sid, slow)


async def test_answering_the_execution_that_runs_is_still_busy(
    manager: SessionManager, tmp_path: Path
) -> None:
    """PROTOCOL §3 (-32001): while one client's resume continues an execution, another
    client's different answer to it, or an abandon of it, is SessionBusy naming the turn —
    the execution is neither waiting nor settled, so neither stale nor answerable yet."""
    ops = SessionOperations(manager)
    with trio.fail_after(TIMEOUT):
        script = [Step(tool_calls=[WRITE]), SLOW]
        sid = (await manager.create(CreateParams(cwd=str(tmp_path), script=script))).session_id
        waiting = await ops.run(RunParams(session_id=sid, prompt="write"), None)
        assert isinstance(waiting, TurnWaiting)
        first = waiting.requests[0].request_id
        resume = ResumeParams(
            session_id=sid,
            execution_id=waiting.execution_id,
            responses=[ApprovalResponse(first, "resp-1", True)],
        )

        async def resume_until_aborted() -> None:
            with pytest.raises(TurnAborted):
                await ops.resume(resume, None)

        async with trio.open_nursery() as clients:
            clients.start_soon(resume_until_aborted)
            await trio.testing.wait_all_tasks_blocked()  # it runs: the slow reply streams
            answer = ApprovalResponse(first, "resp-3", True)
            other = ResumeParams(
                session_id=sid, execution_id=waiting.execution_id, responses=[answer]
            )
            with pytest.raises(SessionBusy) as busy:
                await ops.resume(other, None)
            assert busy.value.data == {"sessionId": sid, "turnId": waiting.turn_id}
            with pytest.raises(SessionBusy):
                await ops.abandon(sid, waiting.execution_id)
            assert await ops.abort(sid) is True
