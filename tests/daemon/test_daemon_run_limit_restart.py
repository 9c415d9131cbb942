"""A turn's own round limit across a restart of robotad (PROTOCOL §10.2, decision 60).

``session/run {maxRounds}`` overrides the session's limit for that turn, its continuations
included. A turn parked for approval used to lose that limit when robotad stopped: the new
daemon continued (or settled) it with the session's limit, so a turn asked to stop after two
model calls made more, one allowed more than the session's stopped early, and the stop reason
followed. Each test runs its own daemon over a private state folder, parks such a turn on a
Bash call, stops the daemon (SIGKILL, or a clean restart) and answers the approval from a new
daemon on the same folder.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.daemon_helpers import IO_TIMEOUT, Client, DaemonHome, Event, connect, running_daemon

from .test_daemon_recoverable_e2e import (
    answer,
    bash,
    connected,
    history,
    lines,
    redelivered,
    resume_params,
    sigkill,
)


def read_step(path: Path, text: str) -> dict[str, Any]:
    """A scripted reply saying `text` and calling Read (allowed in default mode) on `path`."""
    return {"text": text, "toolCalls": [{"name": "Read", "arguments": {"file_path": str(path)}}]}


async def park_limited(
    client: Client, cwd: Path, steps: list[dict[str, Any]], *, session: int, run: int
) -> tuple[str, dict[str, Any]]:
    """A session limited to `session` rounds whose first turn, run with ``maxRounds: run``,
    parks on its first reply's call: its id and the waiting result."""
    created = await client.call(
        "session/create", {"cwd": str(cwd), "script": steps, "maxRounds": session}
    )
    session_id: str = created["sessionId"]
    waiting = await client.call(
        "session/run", {"sessionId": session_id, "prompt": "go", "maxRounds": run}
    )
    assert waiting["status"] == "waiting", waiting
    return session_id, waiting


async def approved_after_restart(
    client: Client, session_id: str, waiting: dict[str, Any]
) -> tuple[Event, dict[str, Any], Event, list[dict[str, Any]], Event]:
    """Approve the parked request from a new daemon's client: session/get before, the
    resume's result, its ``turn_finished``, the history, and session/get after."""
    before: Event = await client.call("session/get", {"sessionId": session_id})
    (request,) = waiting["requests"]
    params = resume_params(session_id, waiting["executionId"], answer(request, "r1", approved=True))
    resumed: dict[str, Any] = await client.call("session/resume", params)
    finished = await client.wait_for_event(session_id, "turn_finished")
    messages = await history(client, session_id)
    after: Event = await client.call("session/get", {"sessionId": session_id})
    return before, resumed, finished, messages, after


@pytest.fixture
def note(tmp_path: Path) -> Path:
    path = tmp_path / "note.txt"
    path.write_text("a note\n")
    return path


async def test_a_run_limit_below_the_sessions_stops_the_turn_after_sigkill(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path, note: Path
) -> None:
    """A session limited to 5 rounds runs a turn with ``maxRounds: 2``, which parks on its
    first reply's Bash call; robotad is killed. Approved on the new daemon, the Bash runs,
    the model is asked once more (round 2, counted with the round before the kill), its Read
    runs, and the turn completes at its own limit with ``stopReason: "maxRounds"``: the third
    reply is never asked for. SessionInfo still reports the session's limit."""
    effects = tmp_path / "effects.txt"
    steps = [
        {"text": "first", "toolCalls": [bash(f"echo x >> {effects}")]},
        read_step(note, "second"),
        {"text": "third: past the run's limit"},
    ]
    home = DaemonHome(tmp_path_factory.mktemp("run-limit-below"))
    with running_daemon(home) as first:
        with trio.fail_after(IO_TIMEOUT):
            async with connect(first) as client:
                session_id, waiting = await park_limited(client, tmp_path, steps, session=5, run=2)
        sigkill(first)
    async with connected(home) as client:
        before, resumed, finished, messages, after = await approved_after_restart(
            client, session_id, waiting
        )
    assert (before["maxRounds"], after["maxRounds"]) == (5, 5)
    assert resumed == {
        "turnId": waiting["turnId"],
        "status": "completed",
        "response": "second",
        "stopReason": "maxRounds",
    }
    assert (finished["status"], finished["stopReason"]) == ("completed", "maxRounds")
    assert [m["role"] for m in messages] == ["user"] + ["assistant", "tool"] * 2
    assert all(m["metadata"]["ok"] for m in messages if m["role"] == "tool")
    assert lines(effects) == 1
    assert (after["pending"], after["turnCount"]) == (None, 1)


async def test_a_run_limit_above_the_sessions_is_honoured_after_a_restart(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path, note: Path
) -> None:
    """The symmetric case, across a clean restart: a session limited to 1 round runs a turn
    with ``maxRounds: 3``, parked on its first Bash call. Approved on the new daemon, the turn
    goes on to its third model call — not stopping at the session's one — and stops there with
    ``stopReason: "maxRounds"``."""
    effects = tmp_path / "effects.txt"
    steps = [
        {"text": "first", "toolCalls": [bash(f"echo x >> {effects}")]},
        read_step(note, "second"),
        read_step(note, "third"),
        {"text": "fourth: past the run's limit"},
    ]
    home = DaemonHome(tmp_path_factory.mktemp("run-limit-above"))
    async with connected(home) as client:
        session_id, waiting = await park_limited(client, tmp_path, steps, session=1, run=3)
    async with connected(home) as client:
        before, resumed, finished, messages, after = await approved_after_restart(
            client, session_id, waiting
        )
    assert (before["maxRounds"], after["maxRounds"]) == (1, 1)
    assert (resumed["status"], resumed["response"], resumed["stopReason"]) == (
        "completed",
        "third",
        "maxRounds",
    )
    assert (finished["status"], finished["stopReason"]) == ("completed", "maxRounds")
    assert [m["role"] for m in messages] == ["user"] + ["assistant", "tool"] * 3
    assert lines(effects) == 1
    assert (after["pending"], after["turnCount"]) == (None, 1)


async def test_an_answer_cut_off_before_the_end_mark_gets_the_run_limits_result(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    """G-084 with a run's own limit (decision 57's settling): a turn run with ``maxRounds: 1``
    in a session limited to 5 completes at its limit once its Bash call is approved; SIGKILL
    came while the execution's end mark was being written. The identical answer, sent again
    to the new daemon, gets the completed turn's result with ``stopReason: "maxRounds"`` — read
    with the session's limit the turn looked cut off on its way to its next reply, and the
    redelivery was StaleResponse; nothing runs twice."""
    effects = tmp_path / "effects.txt"
    steps: list[dict[str, Any]] = [
        {"text": "first", "toolCalls": [bash(f"echo x >> {effects}")]},
        {"text": "second: past the run's limit"},
    ]
    home = DaemonHome(tmp_path_factory.mktemp("run-limit-mark"))
    with running_daemon(home) as first:
        with trio.fail_after(IO_TIMEOUT):
            async with connect(first) as client:
                session_id, waiting = await park_limited(client, tmp_path, steps, session=5, run=1)
                (request,) = waiting["requests"]
                params = resume_params(
                    session_id, waiting["executionId"], answer(request, "r1", approved=True)
                )
                result = await client.call("session/resume", params)
        sigkill(first)
    journal = home.state_dir / "journal" / session_id / f"{waiting['executionId']}.jsonl"
    kept = journal.read_text().splitlines(keepends=True)
    assert json.loads(kept[0])["maxRounds"] == 1  # the turn's own limit, on record
    assert json.loads(kept[-1])["kind"] == "finished"
    journal.write_text("".join(kept[:-1]))  # what a kill during the mark's fsync can leave
    async with connected(home) as client:
        again, refused, info = await redelivered(
            client, session_id, waiting, params, answer(request, "r2", approved=True)
        )
    assert result == {
        "turnId": waiting["turnId"],
        "status": "completed",
        "response": "first",
        "stopReason": "maxRounds",
    }
    assert again == result
    assert refused == -32011
    assert lines(effects) == 1
    assert (info["pending"], info["turnCount"]) == (None, 1)
