"""Permissions and approvals end to end through a real robotad: mode changes, session and
project rules, and what happens to a tool call that needs a person (one daemon for the
module)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest
import trio

from protocol.errors import (
    ExecutionPending,
    InvalidParams,
    StaleResponse,
    TransitionRefused,
)
from tests.daemon_helpers import IO_TIMEOUT, Client, RunningDaemon, connect, module_daemon

daemon = module_daemon()


async def create(client: Client, cwd: Path, *steps: dict[str, Any], **extra: Any) -> str:
    params: dict[str, Any] = {"cwd": str(cwd), **extra}
    if steps:
        params["script"] = list(steps)
    session_id: str = (await client.call("session/create", params))["sessionId"]
    return session_id


def write_call(path: Path) -> dict[str, Any]:
    return {"name": "Write", "arguments": {"file_path": str(path), "content": "written\n"}}


async def test_set_permission_mode(daemon: RunningDaemon, tmp_path: Path) -> None:
    """PROTOCOL §5: session/setPermissionMode → {mode}, persisted with the record; auto
    without a classifier is TransitionRefused (-32013, {sessionId, mode, reason}) and leaves
    the mode; an unknown mode is -32602 at $.mode."""
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            session_id = await create(client, tmp_path)
            entered = await client.call(
                "session/setPermissionMode", {"sessionId": session_id, "mode": "acceptEdits"}
            )
            with pytest.raises(TransitionRefused) as refused:
                await client.call(
                    "session/setPermissionMode", {"sessionId": session_id, "mode": "auto"}
                )
            with pytest.raises(InvalidParams) as unknown:
                await client.call(
                    "session/setPermissionMode", {"sessionId": session_id, "mode": "yolo"}
                )
            info = await client.call("session/get", {"sessionId": session_id})
    assert entered == {"mode": "acceptEdits"}
    data = refused.value.data
    assert data is not None
    assert (data["sessionId"], data["mode"]) == (session_id, "auto")
    assert data["reason"]
    assert [i["path"] for i in unknown.value.issues] == ["$.mode"]
    assert info["permissionMode"] == "acceptEdits"
    record = json.loads(daemon.home.record_path(session_id).read_bytes())["record"]
    assert record["settings"]["permissionMode"] == "acceptEdits"


async def test_session_rules(daemon: RunningDaemon, tmp_path: Path) -> None:
    """PROTOCOL §5: session/addRule {scope: "session"} → the rule lists; a malformed rule is
    -32602 at $.rule and adds nothing; a deny rule decides the next call."""
    target = tmp_path / "seen.txt"
    target.write_text("hello\n")
    read = {"name": "Read", "arguments": {"file_path": str(target)}}
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            session_id = await create(client, tmp_path, {"toolCalls": [read]}, {"text": "ok"})
            rules = await client.call(
                "session/addRule",
                {"sessionId": session_id, "rule": "Read", "kind": "deny", "scope": "session"},
            )
            with pytest.raises(InvalidParams) as malformed:
                await client.call(
                    "session/addRule",
                    {"sessionId": session_id, "rule": "Read(", "kind": "deny", "scope": "session"},
                )
            await client.call("session/run", {"sessionId": session_id, "prompt": "read"})
            decided = await client.wait_for_event(session_id, "permission_decided")
            history = await client.call("session/history", {"sessionId": session_id})
    assert rules == {"allow": [], "ask": [], "deny": ["Read"]}
    assert [i["path"] for i in malformed.value.issues] == ["$.rule"]
    assert decided["decision"] == "deny"
    result = next(m for m in history["messages"] if m["role"] == "tool")
    assert result["metadata"]["ok"] is False
    assert "hello" not in (result["content"] or "")


async def test_project_rules_persist_for_the_canonical_cwd(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    """G-115: a project-scoped rule is persisted for the canonical cwd in an owner-only file
    and applies to every later session with that cwd, however it is spelt."""
    project = tmp_path / "project"
    project.mkdir()
    alias = tmp_path / "alias"
    alias.symlink_to(project)
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            first = await create(client, project)
            rules = await client.call(
                "session/addRule",
                {
                    "sessionId": first,
                    "rule": "Bash(git push:*)",
                    "kind": "deny",
                    "scope": "project",
                },
            )
            later = await create(client, alias)
            later_rules = await client.call(
                "session/addRule",
                {"sessionId": later, "rule": "Glob", "kind": "allow", "scope": "session"},
            )
            elsewhere = await create(client, tmp_path)
            other_rules = await client.call(
                "session/addRule",
                {"sessionId": elsewhere, "rule": "Glob", "kind": "allow", "scope": "session"},
            )
    assert rules["deny"] == ["Bash(git push:*)"]
    assert later_rules["deny"] == ["Bash(git push:*)"]
    assert other_rules["deny"] == []
    digest = hashlib.sha256(os.path.realpath(project).encode()).hexdigest()
    stored = daemon.home.state_dir / "projects" / f"{digest}.json"
    assert json.loads(stored.read_bytes())["deny"] == ["Bash(git push:*)"]
    assert stored.stat().st_mode & 0o777 == 0o600
    assert stored.parent.stat().st_mode & 0o777 == 0o700


async def test_unknown_executions_are_stale(daemon: RunningDaemon, tmp_path: Path) -> None:
    """PROTOCOL §3: with nothing waiting, session/pending is {pending: null} and resuming or
    abandoning an execution is StaleResponse (-32011, {sessionId, executionId})."""
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            session_id = await create(client, tmp_path)
            pending = await client.call("session/pending", {"sessionId": session_id})
            with pytest.raises(StaleResponse) as stale:
                await client.call(
                    "session/resume",
                    {"sessionId": session_id, "executionId": "e-1", "responses": []},
                )
            with pytest.raises(StaleResponse) as abandoned:
                await client.call(
                    "session/abandon", {"sessionId": session_id, "executionId": "e-1"}
                )
    assert pending == {"pending": None}
    for refused in (stale, abandoned):
        data = refused.value.data
        assert data is not None
        assert (data["sessionId"], data["executionId"]) == (session_id, "e-1")


async def test_a_call_needing_approval_waits_and_resumes(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    """G-079, PROTOCOL §5: the turn ends waiting with the exact request (approval_requested,
    turn_finished "waiting"); session/pending, session/list and daemon/status show it; a new
    run is ExecutionPending (-32005) and adds nothing; another connection resumes it with an
    approval, the call runs and the turn completes; an identical redelivery runs nothing
    again and returns the latest result."""
    target = tmp_path / "approved.txt"
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            session_id = await create(
                client, tmp_path, {"toolCalls": [write_call(target)]}, {"text": "done"}
            )
            waiting = await client.call("session/run", {"sessionId": session_id, "prompt": "w"})
            requested = await client.wait_for_event(session_id, "approval_requested")
            finished = await client.wait_for_event(session_id, "turn_finished")
            pending = await client.call("session/pending", {"sessionId": session_id})
            rows = {s["sessionId"]: s for s in (await client.call("session/list"))["sessions"]}
            status = await client.call("daemon/status")
            before = await client.call("session/history", {"sessionId": session_id})
            with pytest.raises(ExecutionPending) as refused:
                await client.call("session/run", {"sessionId": session_id, "prompt": "no"})
            after = await client.call("session/history", {"sessionId": session_id})
        request = waiting["requests"][0]
        resume = {
            "sessionId": session_id,
            "executionId": waiting["executionId"],
            "responses": [
                {"requestId": request["requestId"], "responseId": "r1", "approved": True}
            ],
        }
        async with connect(daemon) as other:
            resumed = await other.call("session/resume", resume)
            target.write_text("changed by a person\n")
            redelivered = await other.call("session/resume", resume)
            info = await other.call("session/get", {"sessionId": session_id})
    assert waiting["status"] == "waiting"
    assert request["tool"] == "Write"
    assert request["arguments"]["file_path"] == str(target)
    assert requested["requests"] == waiting["requests"]
    assert finished["status"] == "waiting"
    assert pending["pending"] == {
        "executionId": waiting["executionId"],
        "requests": waiting["requests"],
    }
    assert rows[session_id]["waiting"] is True
    assert status["sessions"]["waiting"] >= 1
    assert refused.value.data == {"sessionId": session_id, "executionId": waiting["executionId"]}
    assert after == before
    assert resumed == {
        "status": "completed",
        "turnId": waiting["turnId"],
        "response": "done",
        "stopReason": "end",
    }
    assert redelivered == resumed
    assert target.read_text() == "changed by a person\n"
    assert (info["pending"], info["turnCount"]) == (None, 1)


async def test_abandon_closes_the_calls_and_accepts_runs_again(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    """G-101: once session/abandon returned {abandoned:true}, session/run is accepted again;
    nothing ran, and resuming the abandoned execution is StaleResponse (-32011)."""
    target = tmp_path / "abandoned.txt"
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            session_id = await create(client, tmp_path, {"toolCalls": [write_call(target)]})
            waiting = await client.call("session/run", {"sessionId": session_id, "prompt": "w"})
            abandoned = await client.call(
                "session/abandon",
                {"sessionId": session_id, "executionId": waiting["executionId"]},
            )
            again = await client.call("session/run", {"sessionId": session_id, "prompt": "next"})
            with pytest.raises(StaleResponse):
                await client.call(
                    "session/resume",
                    {
                        "sessionId": session_id,
                        "executionId": waiting["executionId"],
                        "responses": [],
                    },
                )
    assert abandoned == {"abandoned": True}
    assert again["status"] == "completed"
    assert not target.exists()
