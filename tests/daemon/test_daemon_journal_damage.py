"""A session whose approval journal is damaged on disk: the load is refused with a located
error naming the file, never an internal error, and the session goes on once the file is
moved aside."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from protocol.errors import RecordCorrupt
from protocol.methods import CreateParams, RunParams, ScriptedToolCall, Step
from protocol.shapes import TurnCompleted, TurnWaiting
from robotad.daemon.manager import SessionManager
from robotad.daemon.operations import SessionOperations

TIMEOUT = 20.0


async def parked_with_a_damaged_journal(
    manager: SessionManager, params: CreateParams
) -> tuple[str, TurnWaiting, Path]:
    """A session created with `params` (whose script's first step calls a tool that asks),
    its turn parked for approval, then closed and its journal's second line replaced by one
    of a newer robotad's kinds: its id, the parked turn, the damaged journal's path."""
    info = await manager.create(params)
    session_id = info.session_id
    waiting = await SessionOperations(manager).run(
        RunParams(session_id=session_id, prompt="go"), None
    )
    assert isinstance(waiting, TurnWaiting)
    await manager.close(session_id)
    journal = manager.state_dir / "journal" / session_id / f"{waiting.execution_id}.jsonl"
    lines = journal.read_bytes().split(b"\n")
    lines[1] = b'{"kind": "from-a-newer-robotad"}'
    journal.write_bytes(b"\n".join(lines))
    return session_id, waiting, journal


async def test_a_damaged_journal_is_a_located_refusal_and_the_session_goes_on(
    manager: SessionManager, tmp_path: Path
) -> None:
    """G-002, G-004: a journal line that does not decode (a record kind of a newer robotad, a
    damaged block) made every method on the parked session -32603, an internal error naming
    nothing, with no way to go on. It is now RecordCorrupt (-32003) naming the journal file
    and its bad line, the file stays byte for byte as it was, and once it is moved aside the
    session loads and takes a new prompt."""
    ops = SessionOperations(manager)
    bash = ScriptedToolCall(name="Bash", arguments={"command": "true"})
    script = [Step(tool_calls=[bash]), Step(text="done")]
    with trio.fail_after(TIMEOUT):
        params = CreateParams(cwd=str(tmp_path), script=script)
        session_id, waiting, journal = await parked_with_a_damaged_journal(manager, params)
        damaged = journal.read_bytes()

        with pytest.raises(RecordCorrupt) as refused:
            await manager.session(session_id)
        data = refused.value.data
        assert data["path"] == f"journal/{session_id}/{waiting.execution_id}.jsonl"
        assert data["issues"][0]["path"] == "line 2"
        assert journal.read_bytes() == damaged

        journal.rename(tmp_path / "set-aside.jsonl")
        live = await manager.session(session_id)
        assert live.pending() is None
        done = await ops.run(RunParams(session_id=session_id, prompt="again"), None)
    assert isinstance(done, TurnCompleted)
    assert done.response == "done"
