"""Checkpointed approvals end to end, through real robotad processes killed with SIGKILL.

Every test runs its own daemon over a private state folder (`DaemonHome`), parks a turn on an
approval, and kills the daemon outright — no shutdown, no final save — before a new daemon on the
same state folder carries on. Effects are Bash commands that append a line to a file in the
session's workspace, so "ran exactly once" is a line count. Where a test must know a tool body
is running, the command itself writes a marker file the test polls (bounded by an absolute
deadline); where a body must stay running, it waits for a release file the test creates.

A command a killed daemon left running dies with it (its process group is tethered to the
daemon); `cut_an_effect` proves that, and `orphan_reaped` still kills the group by the pid the
command wrote, so a regression fails the test instead of leaking a process.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from protocol.errors import EffectUncertain, RpcError, SessionBusy, StaleResponse
from robotad.storage.log_files import FileLogSource
from robotad.storage.log_replay import replay_log
from tests.daemon_helpers import (
    IO_TIMEOUT,
    PROCESS_TIMEOUT,
    Client,
    DaemonHome,
    RunningDaemon,
    connect,
    running_daemon,
)

#: Between two looks at a marker file a tool body writes (a poll, never a readiness sleep).
POLL_INTERVAL = 0.02
#: The JSON-RPC code of a resume refused for an effect of unknown outcome (PROTOCOL.md §10.1).
UNCERTAIN_CODE = EffectUncertain.code
#: How long a duplicate delivery may stay unanswered while the first one's body is held: not a
#: readiness wait — a delivery that attaches to the running continuation is answered only after
#: the body is released, one that is refused is answered at once.
ATTACH_GRACE = 2.0


# -- helpers ------------------------------------------------------------------------------------


def bash(command: str) -> dict[str, Any]:
    """A scripted tool call of Bash, which asks for approval in the default mode."""
    return {"name": "Bash", "arguments": {"command": command}}


def lines(path: Path) -> int:
    """How many times an effect appended its line to `path` (0 when it never ran)."""
    return len(path.read_text().splitlines()) if path.exists() else 0


def answer(request: dict[str, Any], response_id: str, *, approved: bool) -> dict[str, Any]:
    return {"requestId": request["requestId"], "responseId": response_id, "approved": approved}


def resume_params(session_id: str, execution_id: str, *answers: dict[str, Any]) -> dict[str, Any]:
    return {"sessionId": session_id, "executionId": execution_id, "responses": list(answers)}


async def park(client: Client, cwd: Path, *steps: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """A new session in `cwd` whose first turn (scripted by `steps`) ends waiting."""
    created = await client.call("session/create", {"cwd": str(cwd), "script": list(steps)})
    session_id: str = created["sessionId"]
    waiting = await client.call("session/run", {"sessionId": session_id, "prompt": "go"})
    assert waiting["status"] == "waiting", waiting
    return session_id, waiting


@contextlib.asynccontextmanager
async def connected(home: DaemonHome) -> AsyncIterator[Client]:
    """A client of a new daemon on `home`'s state folder, bounded by IO_TIMEOUT; the daemon
    stops when the block ends."""
    with running_daemon(home) as daemon, trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            yield client


def sigkill(daemon: RunningDaemon) -> None:
    """Kill the daemon outright (no shutdown, no save) and reap it."""
    daemon.process.kill()
    daemon.process.wait(PROCESS_TIMEOUT)


async def wait_for_file(path: Path) -> str:
    """The content of `path` once a tool body wrote a whole line to it (the caller bounds
    the wait)."""
    while True:
        with contextlib.suppress(FileNotFoundError):
            text = path.read_text()
            if text.endswith("\n"):
                return text
        await trio.sleep(POLL_INTERVAL)


async def gone(pid: int) -> None:
    """Return once process `pid` has exited (the caller bounds the wait)."""
    while True:
        try:
            raw = Path(f"/proc/{pid}/stat").read_bytes()
        except FileNotFoundError:
            return
        if raw[raw.rfind(b")") + 2 :].split()[0] in (b"Z", b"X", b"x"):
            return
        await trio.sleep(POLL_INTERVAL)


@contextlib.contextmanager
def orphan_reaped(pid_file: Path) -> Iterator[None]:
    """On the way out, kill the process group whose leader wrote its pid to `pid_file`: a Bash
    command the killed daemon could not stop (Bash runs each command as a group leader)."""
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError, ValueError, ProcessLookupError):
            os.killpg(int(pid_file.read_text().strip()), signal.SIGKILL)


def log_entries(home: DaemonHome, session_id: str) -> list[dict[str, Any]]:
    """The session log's lines, decoded."""
    text = (home.state_dir / "logs" / f"{session_id}.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines()]


async def history(client: Client, session_id: str) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = (
        await client.call("session/history", {"sessionId": session_id})
    )["messages"]
    return messages


async def pending_of(client: Client, session_id: str) -> dict[str, Any] | None:
    """What session/pending lists for the session (None when nothing is pending)."""
    pending: dict[str, Any] | None = (
        await client.call("session/pending", {"sessionId": session_id})
    )["pending"]
    return pending


def completed(turn_id: str, response: str = "done") -> dict[str, Any]:
    """The TurnResult of a turn that completed with `response`."""
    return {"turnId": turn_id, "status": "completed", "response": response, "stopReason": "end"}


async def call_until_killed(
    client: Client, method: str, params: dict[str, Any], lost: list[BaseException]
) -> None:
    """Make a call the daemon is killed during; what it fails with is added to `lost`."""
    try:
        await client.call(method, params)
    except (RpcError, ConnectionError) as exc:
        lost.append(exc)


async def sigkill_while_a_command_runs(
    daemon: RunningDaemon, client: Client, method: str, params: dict[str, Any], started: Path
) -> list[BaseException]:
    """Make the call, SIGKILL the daemon once its Bash command wrote its pid to `started`, and
    return once that command died with the daemon. Returns what the call failed with."""
    lost: list[BaseException] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(call_until_killed, client, method, params, lost)
        command_pid = int(await wait_for_file(started))  # the body runs
        sigkill(daemon)
    await gone(command_pid)  # the command died with the daemon
    return lost


# -- a parked approval survives SIGKILL ---------------------------------------------------------


async def redelivered(
    client: Any,
    session_id: str,
    waiting: dict[str, Any],
    params: dict[str, Any],
    changed: dict[str, Any],
) -> tuple[dict[str, Any], int, dict[str, Any]]:
    """The answer `params` delivered again, and `changed` (another answer to the same
    request) delivered after it: what the first got, the code refusing the second (it must be
    refused), and the session's info after both."""
    again = await client.call("session/resume", params)
    with pytest.raises(StaleResponse) as other:
        await client.call(
            "session/resume", resume_params(session_id, waiting["executionId"], changed)
        )
    info = await client.call("session/get", {"sessionId": session_id})
    return again, other.value.code, info


async def answered_append(
    client: Any, tmp_path: Path, effects: Path
) -> tuple[str, dict[str, Any], dict[str, Any], dict[str, Any]]:
    """A session parked on one Bash call appending a line to `effects`, then answered
    approved (response "r1"): its id, the waiting result, the resume's params and what the
    resume answered."""
    session_id, waiting = await park(
        client, tmp_path, {"toolCalls": [bash(f"echo x >> {effects}")]}, {"text": "done"}
    )
    (request,) = waiting["requests"]
    params = resume_params(session_id, waiting["executionId"], answer(request, "r1", approved=True))
    return session_id, waiting, params, await client.call("session/resume", params)


async def test_a_parked_approval_survives_sigkill_and_runs_exactly_once(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    """G-073, G-074, G-075, G-076, G-080, G-088: session/run returns "waiting" only once the
    request is durable — after SIGKILL a new daemon on the same state folder lists the same
    request through session/pending, a client of the new daemon approves it, the effect
    happens exactly once, and no user message is added by the resume."""
    effects = tmp_path / "effects.txt"
    command = f"echo x >> {effects}"
    home = DaemonHome(tmp_path_factory.mktemp("sigkill"))
    with running_daemon(home) as first:
        with trio.fail_after(IO_TIMEOUT):
            async with connect(first) as client:
                session_id, waiting = await park(
                    client, tmp_path, {"toolCalls": [bash(command)]}, {"text": "done"}
                )
        sigkill(first)
    (request,) = waiting["requests"]
    assert (request["tool"], request["arguments"]) == ("Bash", {"command": command})
    assert request["executionId"] == waiting["executionId"]
    assert lines(effects) == 0
    async with connected(home) as client:
        pending = await pending_of(client, session_id)
        resumed = await client.call(
            "session/resume",
            resume_params(session_id, waiting["executionId"], answer(request, "r1", approved=True)),
        )
        after = await client.call("session/get", {"sessionId": session_id})
        messages = await history(client, session_id)
    assert pending == {"executionId": waiting["executionId"], "requests": waiting["requests"]}
    assert resumed == completed(waiting["turnId"])
    assert lines(effects) == 1
    assert after["pending"] is None
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]


# -- redelivery ---------------------------------------------------------------------------------


async def test_a_redelivered_answer_runs_nothing_twice_even_after_sigkill(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    """G-084, G-085, G-086, G-088: delivering the identical {requestId, responseId, approved}
    again after the execution completed — on the same daemon and on a new one after SIGKILL —
    runs nothing again and returns the execution's latest TurnResult; the same responseId with
    other content, or another answer to the answered request, is StaleResponse (-32011)."""
    effects = tmp_path / "effects.txt"
    home = DaemonHome(tmp_path_factory.mktemp("redeliver"))
    with running_daemon(home) as first:
        with trio.fail_after(IO_TIMEOUT):
            async with connect(first) as client:
                session_id, waiting, params, result = await answered_append(
                    client, tmp_path, effects
                )
                (request,) = waiting["requests"]
                again = await client.call("session/resume", params)
        sigkill(first)
    assert result == completed(waiting["turnId"])
    assert again == result
    async with connected(home) as client:
        after_restart = await client.call("session/resume", params)
        stale: list[RpcError] = []
        for changed in (
            answer(request, "r1", approved=False),  # the response id, other content
            answer(request, "r2", approved=True),  # another answer to the request
        ):
            with pytest.raises(StaleResponse) as refused:
                await client.call(
                    "session/resume",
                    resume_params(session_id, waiting["executionId"], changed),
                )
            stale.append(refused.value)
        messages = await history(client, session_id)
    assert after_restart == result
    assert lines(effects) == 1
    assert [e.code for e in stale] == [-32011, -32011]
    assert all((e.data or {}).get("executionId") == waiting["executionId"] for e in stale)
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]


#: A PostModelCall hook that lets the first model call of a test's session go and holds the
#: second — the resumed turn's last reply, journaled and in history, its record not yet saved —
#: writing its pid to `held.pid` in the session's cwd first.
HOLD_THE_SECOND_REPLY = (
    '[[hooks.PostModelCall]]\nhooks = [{type = "command", command = "'
    "n=$(cat calls 2>/dev/null || echo 0); echo $((n + 1)) > calls; "
    'if [ $n -ge 1 ]; then echo $$ > held.pid; sleep 30; fi"}]\n'
)


async def test_an_answer_cut_off_before_the_turn_was_saved_gets_its_result(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    """G-084, G-085, G-096: SIGKILL once the resumed turn's last reply was journaled (and in
    history), before its record was saved. The new daemon puts the reply back from the journal;
    the client whose reply died with the daemon sends the identical answer again and gets the
    completed turn's result — it was StaleResponse (-32011) — and nothing runs twice; the turn
    counts as completed, and the session log says so in one ``turn_completed`` line (it had
    none); another answer is still StaleResponse."""
    effects = tmp_path / "effects.txt"
    held = tmp_path / "held.pid"
    home = DaemonHome(tmp_path_factory.mktemp("cut-before-save"))
    home.write_config(HOLD_THE_SECOND_REPLY)
    with orphan_reaped(held):
        with running_daemon(home) as first:
            with trio.fail_after(IO_TIMEOUT):
                async with connect(first) as client:
                    session_id, waiting = await park(
                        client,
                        tmp_path,
                        {"toolCalls": [bash(f"echo x >> {effects}")]},
                        {"text": "done"},
                    )
                    (request,) = waiting["requests"]
                    params = resume_params(
                        session_id, waiting["executionId"], answer(request, "r1", approved=True)
                    )
                    lost = await sigkill_while_a_command_runs(
                        first, client, "session/resume", params, held
                    )
        assert lost, "the resume cannot have answered: its last reply's hook was held"
    home.write_config("")  # the new daemon holds nothing
    async with connected(home) as client:
        again, refused, info = await redelivered(
            client, session_id, waiting, params, answer(request, "r1", approved=False)
        )
        messages = await history(client, session_id)
    assert again == completed(waiting["turnId"])
    assert refused == -32011
    assert lines(effects) == 1
    assert (info["pending"], info["turnCount"]) == (None, 1)
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert (tmp_path / "calls").read_text() == "2\n"  # the model was asked no more
    assert completed_in_log(home, session_id) == [waiting["turnId"]]


def completed_in_log(home: DaemonHome, session_id: str) -> list[str]:
    """The turn ids of the session log's ``turn_completed`` lines saying "completed"."""
    text = (home.state_dir / "logs" / f"{session_id}.jsonl").read_text()
    entries = [json.loads(line) for line in text.splitlines()]
    return [
        entry["data"]["turnId"]
        for entry in entries
        if entry["event"] == "turn_completed" and entry["data"]["status"] == "completed"
    ]


def log_lines(home: DaemonHome, session_id: str) -> list[dict[str, Any]]:
    text = (home.state_dir / "logs" / f"{session_id}.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines()]


def appended_in_log(home: DaemonHome, session_id: str) -> list[str]:
    """The ids of the messages the session log's ``history_mutation`` appends added."""
    return [
        message["id"]
        for entry in log_lines(home, session_id)
        if entry["event"] == "history_mutation" and entry["data"]["op"] == "append"
        for message in entry["data"]["messages"]
    ]


def replayed(home: DaemonHome, session_id: str) -> list[str]:
    """The ids of the history the session log replays to (G-145)."""
    source = FileLogSource.for_session(home.state_dir / "logs", session_id)
    return [message.id for message in replay_log(source)]


async def test_a_recovery_cut_off_in_its_save_logs_nothing_twice(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    """G-145, G-084: SIGKILL once the resumed turn's last reply was journaled and logged,
    before its record was saved; the next daemon's recovery puts the tool result and the
    reply back and is stopped in its save (the record and journal as the kill left them, the
    log holding what that recovery wrote before the save); a third daemon recovers again.
    Each recovery logs only what the log lacks — here just the ``turn_completed`` line — so
    the log replays to the history the recovery made, each message is appended once and its
    result logged once, and ``session/log`` calls it complete, before the third daemon loads
    the session (against its record) and after. Each recovery logged the put-back again: the
    log replayed the result and the reply twice, and appended them three times."""
    held = tmp_path / "held.pid"
    home = DaemonHome(tmp_path_factory.mktemp("recovered-twice"))
    home.write_config(HOLD_THE_SECOND_REPLY)
    with orphan_reaped(held), running_daemon(home) as first:
        with trio.fail_after(IO_TIMEOUT):
            async with connect(first) as client:
                session_id, waiting = await park(
                    client, tmp_path, {"toolCalls": [bash("echo x")]}, {"text": "done"}
                )
                (request,) = waiting["requests"]
                params = resume_params(
                    session_id, waiting["executionId"], answer(request, "r1", approved=True)
                )
                await sigkill_while_a_command_runs(first, client, "session/resume", params, held)
    home.write_config("")
    record, journal = home.record_path(session_id), home.state_dir / "journal" / session_id
    kept_record, kept_journal = record.read_bytes(), tmp_path / "journal-kept"
    shutil.copytree(journal, kept_journal)
    before = len(log_lines(home, session_id))
    async with connected(home) as client:  # the recovery whose save the test undoes
        made = [m["id"] for m in await history(client, session_id)]
    assert len(made) == 4
    lines = log_lines(home, session_id)
    (end,) = [  # recovery's last line before its save: a kill during the save keeps this far
        i for i, entry in enumerate(lines) if i >= before and entry["event"] == "turn_completed"
    ]
    path = home.state_dir / "logs" / f"{session_id}.jsonl"
    path.write_bytes(b"".join(path.read_bytes().splitlines(keepends=True)[: end + 1]))
    record.write_bytes(kept_record)
    shutil.rmtree(journal)
    shutil.copytree(kept_journal, journal)
    assert replayed(home, session_id) == made
    assert appended_in_log(home, session_id) == made
    async with connected(home) as client:
        unloaded = await client.call("session/log", {"sessionId": session_id})
        messages = [m["id"] for m in await history(client, session_id)]
        report = await client.call("session/log", {"sessionId": session_id})
        info = await client.call("session/get", {"sessionId": session_id})
    # Checked against the record, two messages: telling two more is no gap, telling the
    # result and the reply again is (the log said "the log rebuilds 6; its message 5 is
    # message 3 again").
    assert unloaded["complete"], unloaded["problems"]
    assert messages == made
    assert replayed(home, session_id) == made
    assert appended_in_log(home, session_id) == made
    assert report["complete"], report["problems"]
    assert completed_in_log(home, session_id) == [waiting["turnId"]]
    results = [e for e in log_lines(home, session_id) if e["event"] == "tool_result"]
    assert [e["data"]["tool"] for e in results] == ["Bash"]
    assert (info["pending"], info["turnCount"]) == (None, 1)


async def test_an_answer_cut_off_before_the_end_mark_gets_its_result(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    """G-084, G-085: the resumed turn completed and its record was saved; SIGKILL came while
    the execution's end mark was being written to the journal (the one fsync after the save),
    which leaves the journal without it. The identical answer, sent again to the new daemon,
    gets the completed turn's result instead of StaleResponse; nothing runs twice; another
    answer is still StaleResponse."""
    effects = tmp_path / "effects.txt"
    home = DaemonHome(tmp_path_factory.mktemp("cut-before-mark"))
    with running_daemon(home) as first:
        with trio.fail_after(IO_TIMEOUT):
            async with connect(first) as client:
                session_id, waiting, params, result = await answered_append(
                    client, tmp_path, effects
                )
                (request,) = waiting["requests"]
        sigkill(first)
    journal = home.state_dir / "journal" / session_id / f"{waiting['executionId']}.jsonl"
    kept = journal.read_text().splitlines(keepends=True)
    assert json.loads(kept[-1])["kind"] == "finished"
    journal.write_text("".join(kept[:-1]))  # what a kill during the mark's fsync can leave
    async with connected(home) as client:
        again, refused, info = await redelivered(
            client, session_id, waiting, params, answer(request, "r2", approved=True)
        )
    assert again == result == completed(waiting["turnId"])
    assert refused == -32011
    assert lines(effects) == 1
    assert (info["pending"], info["turnCount"]) == (None, 1)


async def deliver_twice_concurrently(
    home: DaemonHome, cwd: Path
) -> tuple[dict[str, Any], dict[str, Any] | RpcError, dict[str, Any], int]:
    """Park a call, deliver its approval from one connection and — while that continuation's
    tool body is still running — the identical approval from a second connection; then let
    the body finish. Returns (first result, second outcome, a later redelivery's result,
    effect count)."""
    effects = cwd / "effects.txt"
    release = cwd / "release"
    command = f"echo x >> {effects}; until [ -e {release} ]; do sleep 0.02; done"
    with running_daemon(home) as daemon:
        with trio.fail_after(IO_TIMEOUT):
            async with connect(daemon) as one, connect(daemon) as two:
                session_id, waiting = await park(one, cwd, {"toolCalls": [bash(command)]})
                (request,) = waiting["requests"]
                params = resume_params(
                    session_id, waiting["executionId"], answer(request, "r1", approved=True)
                )
                outcomes: dict[str, Any] = {}

                second_answered = trio.Event()

                async def deliver(client: Client, key: str) -> None:
                    try:
                        outcomes[key] = await client.call("session/resume", params)
                    except RpcError as exc:
                        outcomes[key] = exc
                    if key == "second":
                        second_answered.set()

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(deliver, one, "first")
                    await wait_for_file(effects)  # the first delivery's body runs
                    nursery.start_soon(deliver, two, "second")
                    with trio.move_on_after(ATTACH_GRACE):
                        await second_answered.wait()
                    release.touch()
                later = await two.call("session/resume", params)
    return outcomes["first"], outcomes["second"], later, lines(effects)


async def test_a_concurrent_duplicate_delivery_runs_nothing_twice(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    """G-084 (safety): the identical approval delivered from two connections while the first
    delivery's continuation runs never runs the effect twice; the second delivery gets either
    the result or SessionBusy, and a redelivery afterwards gets the execution's result."""
    home = DaemonHome(tmp_path_factory.mktemp("concurrent"))
    first, second, later, effects = await deliver_twice_concurrently(home, tmp_path)
    assert first["status"] == "completed"
    assert isinstance(second, SessionBusy) or second == first
    assert later == first
    assert effects == 1


async def test_a_concurrent_duplicate_delivery_returns_the_result(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    """G-084: the identical approval delivered from a second connection while the first
    delivery's continuation runs comes back with the execution's TurnResult, as session/run
    with a known turnId attaches to its turn (G-071)."""
    home = DaemonHome(tmp_path_factory.mktemp("concurrent-result"))
    first, second, _, effects = await deliver_twice_concurrently(home, tmp_path)
    assert second == first
    assert effects == 1


# -- a denial stays binding ---------------------------------------------------------------------


async def loosen(client: Client, session_id: str) -> None:
    """Make the session as permissive as it gets: allow Bash, then bypass permissions."""
    await client.call(
        "session/addRule",
        {"sessionId": session_id, "rule": "Bash", "kind": "allow", "scope": "session"},
    )
    await client.call(
        "session/setPermissionMode", {"sessionId": session_id, "mode": "bypassPermissions"}
    )


def tool_results(messages: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Tool results by the command of the call they answer."""
    commands = {
        call["id"]: call["arguments"]["command"]
        for message in messages
        for call in message.get("toolCalls", [])
    }
    return {commands[m["toolCallId"]]: m for m in messages if m["role"] == "tool"}


async def test_a_denial_stays_binding_when_the_round_continues_after_sigkill(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    """G-083, G-077, G-088: a round of two Bash calls that both need approval parks on the
    first (the second has not run); denying it continues the round, which parks again on the
    second. After SIGKILL, on a new daemon, an allow rule for Bash is added and the mode
    becomes bypassPermissions; approving the second call continues the same execution: the
    approved call runs once, the denied call never runs and stays a failed result."""
    denied_effect = tmp_path / "denied.txt"
    approved_effect = tmp_path / "approved.txt"
    denied_command = f"echo x >> {denied_effect}"
    approved_command = f"echo x >> {approved_effect}"
    home = DaemonHome(tmp_path_factory.mktemp("denial"))
    with running_daemon(home) as first:
        with trio.fail_after(IO_TIMEOUT):
            async with connect(first) as client:
                session_id, waiting = await park(
                    client,
                    tmp_path,
                    {"toolCalls": [bash(denied_command), bash(approved_command)]},
                    {"text": "done"},
                )
                (denied,) = waiting["requests"]
                execution_id = waiting["executionId"]
                again = await client.call(
                    "session/resume",
                    resume_params(session_id, execution_id, answer(denied, "no", approved=False)),
                )
        sigkill(first)
    assert denied["arguments"] == {"command": denied_command}
    assert (lines(denied_effect), lines(approved_effect)) == (0, 0)
    assert (again["status"], again["executionId"]) == ("waiting", execution_id)
    (second_request,) = again["requests"]
    assert second_request["arguments"] == {"command": approved_command}
    async with connected(home) as client:
        pending = await pending_of(client, session_id)
        await loosen(client, session_id)
        resumed = await client.call(
            "session/resume",
            resume_params(session_id, execution_id, answer(second_request, "yes", approved=True)),
        )
        messages = await history(client, session_id)
    assert pending == {"executionId": execution_id, "requests": again["requests"]}
    assert resumed == completed(waiting["turnId"])
    assert (lines(denied_effect), lines(approved_effect)) == (0, 1)
    results = tool_results(messages)
    assert results[denied_command]["metadata"]["ok"] is False
    assert results[approved_command]["metadata"].get("ok", True) is True


async def test_a_denial_cut_off_by_sigkill_stays_binding(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    """G-083, G-096, G-088: a denial is answered and the daemon is SIGKILLed while the
    continuation waits for the model — after the denied call's failed result was journaled,
    before the session record was saved again. The new daemon puts the journaled result back
    instead of asking again: nothing is pending, the denied call is a failed result, and with
    an allow rule and bypassPermissions neither a redelivered denial nor a late approval can
    make it run (StaleResponse)."""
    effect = tmp_path / "denied.txt"
    command = f"echo x >> {effect}"
    home = DaemonHome(tmp_path_factory.mktemp("denial-cut"))
    with running_daemon(home) as first:
        with trio.fail_after(IO_TIMEOUT):
            async with connect(first) as client:
                session_id, waiting = await park(
                    client,
                    tmp_path,
                    {"toolCalls": [bash(command)]},
                    {"text": "never streamed", "delayMs": 60_000},
                )
                (request,) = waiting["requests"]
                execution_id = waiting["executionId"]
                denial = resume_params(
                    session_id, execution_id, answer(request, "no", approved=False)
                )
                lost: list[BaseException] = []

                def model_called_after_denial(events: list[dict[str, Any]]) -> bool:
                    """The continuation asked the model again: the denied call's failed
                    result is in history (and, before that, in the journal)."""
                    ours = [e for e in events if e.get("sessionId") == session_id]
                    kinds = [e["type"] for e in ours]
                    if "approval_resolved" not in kinds:
                        return False
                    after = ours[kinds.index("approval_resolved") :]
                    return any(
                        e["type"] == "context_updated" and e["phase"] == "estimated" for e in after
                    )

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(call_until_killed, client, "session/resume", denial, lost)
                    await client.wait_for(model_called_after_denial)
                    sigkill(first)
        assert lost, "the resume cannot have completed: its model call waits for 60 s"
    async with connected(home) as client:
        pending = await pending_of(client, session_id)
        await loosen(client, session_id)
        refusals: list[RpcError] = []
        for params in (
            denial,
            resume_params(session_id, execution_id, answer(request, "yes", approved=True)),
        ):
            with pytest.raises(StaleResponse) as refused:
                await client.call("session/resume", params)
            refusals.append(refused.value)
        messages = await history(client, session_id)
    assert pending is None
    assert [e.code for e in refusals] == [-32011, -32011]
    assert lines(effect) == 0
    assert [m["role"] for m in messages] == ["user", "assistant", "tool"]
    assert tool_results(messages)[command]["metadata"]["ok"] is False


# -- an effect of unknown outcome ---------------------------------------------------------------


async def cut_an_effect(home: DaemonHome, cwd: Path) -> tuple[str, str, dict[str, Any]]:
    """Park a Bash call, approve it, and SIGKILL the daemon while its body runs (the body
    writes its pid, then sleeps); the orphaned command is killed too, before its effect.
    Returns (session id, execution id, the approval's resume params)."""
    started = cwd / "started.pid"
    command = f"echo $$ > {started}; sleep 30; echo x >> {cwd / 'effects.txt'}"
    with orphan_reaped(started):
        with running_daemon(home) as daemon:
            with trio.fail_after(IO_TIMEOUT):
                async with connect(daemon) as client:
                    session_id, waiting = await park(
                        client, cwd, {"toolCalls": [bash(command)]}, {"text": "afterwards"}
                    )
                    (request,) = waiting["requests"]
                    execution_id = waiting["executionId"]
                    approval = resume_params(
                        session_id, execution_id, answer(request, "r1", approved=True)
                    )
                    lost = await sigkill_while_a_command_runs(
                        daemon, client, "session/resume", approval, started
                    )
        assert lost, "the resume cannot have completed: its body sleeps for 30 s"
    started.unlink()
    return session_id, execution_id, approval


async def test_an_effect_cut_by_sigkill_is_never_rerun_and_can_be_abandoned(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    """G-094, G-092, G-099, G-100, G-101, G-086: an approved Bash call is running when the
    daemon is SIGKILLed, so its outcome is unknown (and the command died with the daemon).
    After a restart the execution is pending with no request left to answer and the call
    listed as `uncertain`; resuming it is EffectUncertain (-32015 naming the call), and neither
    that nor a redelivered approval runs the call again. session/abandon closes the call with
    a failed result starting "outcome unknown:" and discards the execution's journal; resuming
    it then is StaleResponse, and a new run is accepted."""
    home = DaemonHome(tmp_path_factory.mktemp("uncertain"))
    session_id, execution_id, approval = await cut_an_effect(home, tmp_path)
    journal_file = home.state_dir / "journal" / session_id / f"{execution_id}.jsonl"
    assert journal_file.exists()
    async with connected(home) as client:
        pending = await pending_of(client, session_id)
        log_report = await client.call("session/log", {"sessionId": session_id})
        with pytest.raises(RpcError) as refused:
            await client.call("session/resume", resume_params(session_id, execution_id))
        with contextlib.suppress(RpcError):  # its answer: see the next test
            await client.call("session/resume", approval)
        still = await pending_of(client, session_id)
        abandoned = await client.call(
            "session/abandon", {"sessionId": session_id, "executionId": execution_id}
        )
        with pytest.raises(StaleResponse):
            await client.call("session/resume", approval)
        messages = await history(client, session_id)
        after = await client.call("session/run", {"sessionId": session_id, "prompt": "on"})
    (call,) = messages[1]["toolCalls"]
    assert pending == {"executionId": execution_id, "requests": [], "uncertain": [call["id"]]}
    # The kill cut the call off; the restart closed it in the log with what is known.
    assert (log_report["complete"], log_report["problems"]) == (True, [])
    recovered = [e for e in log_entries(home, session_id) if e["event"] == "recovered"]
    assert [e["data"]["calls"] for e in recovered] == [
        [{"callId": call["id"], "outcome": "unknown"}]
    ]
    assert refused.value.code == UNCERTAIN_CODE
    assert refused.value.data == {
        "sessionId": session_id,
        "executionId": execution_id,
        "calls": [call["id"]],
    }
    assert still == pending
    assert not (tmp_path / "started.pid").exists()  # the body never started again
    assert lines(tmp_path / "effects.txt") == 0
    assert abandoned == {"abandoned": True}
    closed = messages[-1]
    assert (closed["role"], closed["toolCallId"], closed["metadata"]["ok"]) == (
        "tool",
        call["id"],
        False,
    )
    assert closed["content"].startswith("outcome unknown: Bash was running when robotad stopped")
    assert "killed when robotad stopped" in closed["content"]
    assert not journal_file.exists()
    assert after == completed(after["turnId"], "afterwards")


async def test_a_turn_cut_while_a_command_runs_without_approval_is_kept(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    """Killed while a command that needed no approval ran (its round's first command done,
    the second running), the turn vanished: the record had never been saved with its open
    round, so the prompt, both calls and the finished result were gone, though the commands
    had run. Now the record holds the open round before anything runs, and recovery puts the
    finished result back and lists the cut call as uncertain; `session/list` and
    `daemon/status` count the session waiting before anything loads it (the start-up scan
    once counted only executions that asked a person)."""
    home = DaemonHome(tmp_path_factory.mktemp("cut-unasked"))
    effects = tmp_path / "effects.txt"
    started = tmp_path / "started.pid"
    first = bash(f"echo one >> {effects}")
    second = bash(f"echo $$ > {started}; sleep 30; echo two >> {effects}")
    steps = [{"toolCalls": [first]}, {"toolCalls": [second]}, {"text": "afterwards"}]
    with orphan_reaped(started):
        with running_daemon(home) as daemon:
            with trio.fail_after(IO_TIMEOUT):
                async with connect(daemon) as client:
                    created = await client.call(
                        "session/create",
                        {
                            "cwd": str(tmp_path),
                            "script": steps,
                            "permissionMode": "bypassPermissions",
                        },
                    )
                    session_id = created["sessionId"]
                    lost = await sigkill_while_a_command_runs(
                        daemon,
                        client,
                        "session/run",
                        {"sessionId": session_id, "prompt": "go"},
                        started,
                    )
        assert lost
    async with connected(home) as client:
        status = await client.call("daemon/status")
        (row,) = (await client.call("session/list"))["sessions"]
        pending = await pending_of(client, session_id)
        messages = await history(client, session_id)
    # PROTOCOL §10.2: waiting from the daemon's first moment, before anything loads it
    assert status["sessions"] == {"loaded": 0, "running": 0, "waiting": 1}
    assert (row["sessionId"], row["loaded"], row["waiting"]) == (session_id, False, True)
    assert lines(effects) == 1  # the first command ran; the second was cut before its echo
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert messages[0]["content"] == "go"
    (done,) = messages[1]["toolCalls"]
    assert (messages[2]["toolCallId"], messages[2]["metadata"]["ok"]) == (done["id"], True)
    (cut,) = messages[3]["toolCalls"]
    assert pending is not None
    assert pending["uncertain"] == [cut["id"]]


async def test_an_imported_open_round_is_closed_before_the_next_prompt_never_run(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    """An export of a session waiting for approval, imported: its open round has no
    execution here. The next prompt used to run the stale call after the new user message
    (history no provider accepts: a call's result after a later prompt)."""
    home = DaemonHome(tmp_path_factory.mktemp("imported-open"))
    effects = tmp_path / "effects.txt"
    async with connected(home) as client:
        source, _waiting = await park(
            client,
            tmp_path,
            {"toolCalls": [bash(f"echo ran >> {effects}")]},
            {"text": "reply to the new prompt"},
        )
        artifact = (await client.call("session/export", {"sessionId": source}))["artifact"]
        imported = await client.call(
            "session/import", {"artifact": artifact, "sessionId": "imported"}
        )
        pending = await client.call("session/pending", {"sessionId": "imported"})
        result = await client.call("session/run", {"sessionId": "imported", "prompt": "p2"})
        messages = await history(client, "imported")
    assert imported["sessionId"] == "imported"
    assert pending["pending"] is None
    assert result["status"] == "completed", result
    assert lines(effects) == 0  # the stale call never ran
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "user", "assistant"]
    # Nothing here knows whether it ran (decision 64): never "not run"
    assert messages[2]["content"].startswith("outcome unknown: nothing here holds this call")
    assert messages[3]["content"] == "p2"


async def test_a_redelivered_approval_of_a_cut_effect_is_effect_uncertain(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    """G-094, G-084: the client whose approval was cut off by the kill delivers it again —
    the natural retry. The effect's outcome is unknown, so the answer is EffectUncertain, not a
    "waiting" result with nothing left to answer."""
    home = DaemonHome(tmp_path_factory.mktemp("uncertain-redelivery"))
    session_id, execution_id, approval = await cut_an_effect(home, tmp_path)
    async with connected(home) as client:
        with pytest.raises(RpcError) as refused:
            await client.call("session/resume", approval)
    assert refused.value.code == UNCERTAIN_CODE
    data = refused.value.data or {}
    assert (data.get("sessionId"), data.get("executionId"), len(data.get("calls", []))) == (
        session_id,
        execution_id,
        1,
    )
    assert not (tmp_path / "started.pid").exists()


def robotactl(daemon: RunningDaemon, *args: str) -> subprocess.CompletedProcess[str]:
    """robotactl against `daemon` (never autostarting another)."""
    return subprocess.run(
        [sys.executable, "-m", "robotactl", "--socket", str(daemon.socket_path), *args],
        env=daemon.home.environment(),
        capture_output=True,
        text=True,
        timeout=PROCESS_TIMEOUT,
        check=False,
    )


async def test_robotactl_leads_out_of_an_uncertain_effect(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    """PROTOCOL.md §10.2 from the command line: `show` says the outcome is unknown and names
    `robotactl abandon`; `approve` refuses with the same way out instead of -32603 or a loop;
    `abandon` closes the call as "outcome unknown" and the session takes prompts again."""
    home = DaemonHome(tmp_path_factory.mktemp("uncertain-ctl"))
    session_id, _execution_id, _approval = await cut_an_effect(home, tmp_path)
    with running_daemon(home) as daemon:
        show = await trio.to_thread.run_sync(robotactl, daemon, "show", "-s", session_id)
        approve = await trio.to_thread.run_sync(robotactl, daemon, "approve", "-s", session_id)
        as_json = await trio.to_thread.run_sync(
            robotactl, daemon, "--json", "deny", "-s", session_id
        )
        abandon = await trio.to_thread.run_sync(robotactl, daemon, "abandon", "-s", session_id)
        again = await trio.to_thread.run_sync(robotactl, daemon, "abandon", "-s", session_id)
        with trio.fail_after(IO_TIMEOUT):
            async with connect(daemon) as client:
                messages = await history(client, session_id)
                pending = await client.call("session/pending", {"sessionId": session_id})
    assert show.returncode == 0, show.stderr
    assert "outcome unknown" in show.stdout
    assert f"robotactl abandon -s {session_id}" in show.stdout
    assert approve.returncode == 1
    assert f"robotactl abandon -s {session_id}" in approve.stderr
    assert "-32603" not in approve.stderr
    assert "error -32015" in approve.stderr
    (call,) = json.loads(as_json.stderr)["error"]["data"]["calls"]
    assert json.loads(as_json.stderr)["error"]["code"] == -32015  # as robotad would answer
    assert call.startswith("call")
    assert abandon.returncode == 0, abandon.stderr
    assert abandon.stdout.startswith("abandoned execution ")
    assert "outcome unknown for " in abandon.stdout
    assert again.returncode == 1
    assert "nothing in session" in again.stderr
    assert messages[-1]["content"].startswith("outcome unknown:")
    assert pending == {"pending": None}
