"""Permissions and approvals end to end through a real robotad: mode changes, session and
project rules, and what happens to a tool call that needs a person (one daemon for the
module; the test of rules stored by an earlier robotad restarts one of its own)."""

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
    SessionNotFound,
    StaleResponse,
    TransitionRefused,
)
from tests.daemon_helpers import (
    IO_TIMEOUT,
    Client,
    DaemonHome,
    RunningDaemon,
    connect,
    module_daemon,
    running_daemon,
)

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


MCP_ARGUMENT_RULE = "mcp__files__write(/etc/**)"


async def test_an_argument_pattern_on_an_mcp_tool_is_refused_where_it_enters(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    """Decision 73: MCP tools have no argument a pattern could match, so
    ``mcp__files__write(/etc/**)`` denied nothing. session/create refuses it at
    $.permissions.deny[i], session/addRule at $.rule (either scope, in any case of ``mcp__``)
    — -32602 saying what to write, nothing added or persisted — and the bare names stay
    accepted. (An import leaves such a rule out, decision 81: see the import's test.)"""
    created, added, rules = await _refused_where_it_enters(
        daemon,
        tmp_path,
        {"deny": ["Read(/etc/**)", MCP_ARGUMENT_RULE]},
        [(MCP_ARGUMENT_RULE, "session"), ("Mcp__files(x)", "project")],
        ("mcp__files__write", "deny"),
    )
    assert [i["path"] for i in created.issues] == ["$.permissions.deny[1]"]
    for refusal in (created, *added):
        (issue,) = refusal.issues
        assert issue["message"].startswith("MCP tools take no argument pattern")
    assert "write 'mcp__files__write' for every call" in created.issues[0]["message"]
    assert "write 'mcp__files' for every tool" in added[1].issues[0]["message"]
    assert rules == {"allow": [], "ask": [], "deny": ["mcp__files__write"]}


async def _refused_where_it_enters(
    daemon: RunningDaemon,
    tmp_path: Path,
    given: dict[str, list[str]],
    added: list[tuple[str, str]],
    accepted: tuple[str, str],
) -> tuple[InvalidParams, list[InvalidParams], Any]:
    """Rules that session/create must refuse (`given`, as its permissions) and session/addRule
    must refuse (`added`: each deny rule with its scope), then one it must take (`accepted`:
    the rule and its kind, for the session): the refusals, each -32602 with one issue and
    the addRule ones at $.rule, and the session's rules after. Nothing is persisted for the
    project (a refused project rule is not written)."""
    project = tmp_path / "project"
    project.mkdir()
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            with pytest.raises(InvalidParams) as created:
                await create(client, project, permissions=given)
            session_id = await create(client, project)
            refusals = []
            for rule, scope in added:
                with pytest.raises(InvalidParams) as refused:
                    await client.call(
                        "session/addRule",
                        {"sessionId": session_id, "rule": rule, "kind": "deny", "scope": scope},
                    )
                refusals.append(refused.value)
            rule, kind = accepted
            rules = await client.call(
                "session/addRule",
                {"sessionId": session_id, "rule": rule, "kind": kind, "scope": "session"},
            )
    assert [[i["path"] for i in e.issues] for e in refusals] == [["$.rule"]] * len(added)
    for refusal in (created.value, *refusals):
        assert refusal.code == -32602
        assert len(refusal.issues) == 1
    digest = hashlib.sha256(os.path.realpath(project).encode()).hexdigest()
    assert not (daemon.home.state_dir / "projects" / f"{digest}.json").exists()
    return created.value, refusals, rules


async def test_a_stored_argument_pattern_on_an_mcp_tool_is_left_out_on_load(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    """Decisions 73 and 81: a session's record and a project's rule file written before
    robotad refused such rules may hold one — an argument pattern on an MCP tool, or an MCP
    name in another case. The session still loads, and a new one is created in that project,
    without them (they never applied to a call); the daemon's log names each rule left out,
    whose it was and what to write; the session's next save leaves them out of its record,
    and the project's file is kept as written."""
    home = DaemonHome(tmp_path_factory.mktemp("stored"))
    project = tmp_path / "project"
    project.mkdir()
    with running_daemon(home) as daemon, trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            session_id = await create(client, project, permissions={"deny": ["Read(/etc/**)"]})
            await client.call(
                "session/addRule",
                {"sessionId": session_id, "rule": "Bash(rm:*)", "kind": "deny", "scope": "project"},
            )
    # As an earlier robotad wrote them.
    stored = json.loads(home.record_path(session_id).read_bytes())
    stored["record"]["settings"]["permissions"]["deny"].append(MCP_ARGUMENT_RULE)
    stored["record"]["settings"]["permissions"]["allow"].append("Mcp__files__read")
    home.record_path(session_id).write_text(json.dumps(stored))
    digest = hashlib.sha256(os.path.realpath(project).encode()).hexdigest()
    project_file = home.state_dir / "projects" / f"{digest}.json"
    project_rules = json.loads(project_file.read_bytes())
    project_rules["ask"].append("mcp__files(x)")
    project_rules["deny"].append("MCP__files")
    project_file.write_text(json.dumps(project_rules))
    with running_daemon(home) as again, trio.fail_after(IO_TIMEOUT):
        async with connect(again) as client:
            loaded = await client.call(
                "session/addRule",
                {
                    "sessionId": session_id,
                    "rule": "mcp__files__write",
                    "kind": "deny",
                    "scope": "session",
                },
            )
            fresh = await create(client, project)
            fresh_rules = await client.call(
                "session/addRule",
                {"sessionId": fresh, "rule": "Glob", "kind": "allow", "scope": "session"},
            )
    assert loaded == {
        "allow": [],
        "ask": [],
        "deny": ["Read(/etc/**)", "Bash(rm:*)", "mcp__files__write"],
    }
    assert fresh_rules == {"allow": ["Glob"], "ask": [], "deny": ["Bash(rm:*)"]}
    saved = json.loads(home.record_path(session_id).read_bytes())["record"]["settings"]
    assert MCP_ARGUMENT_RULE not in saved["permissions"]["deny"]
    assert "Mcp__files__read" not in saved["permissions"]["allow"]
    assert json.loads(project_file.read_bytes())["ask"] == ["mcp__files(x)"]
    assert json.loads(project_file.read_bytes())["deny"] == ["Bash(rm:*)", "MCP__files"]
    log = again.output()
    assert f"session {session_id}: the deny rule {MCP_ARGUMENT_RULE!r} is left out" in log
    assert "write 'mcp__files__write' for every call of that tool" in log
    assert f"({project_file}): the ask rule 'mcp__files(x)' is left out" in log
    assert f"session {session_id}: the allow rule 'Mcp__files__read' is left out" in log
    assert "write 'mcp__files__read' for every call of that tool" in log
    assert f"({project_file}): the deny rule 'MCP__files' is left out" in log


async def test_an_mcp_name_in_another_case_is_refused_where_it_enters(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    """Decision 81: every MCP tool is offered under a name starting with ``mcp__`` itself and
    a rule's name is compared exactly, so ``Mcp__files__write`` matched no call. session/create
    refuses it at $.permissions.allow[i], session/addRule at $.rule (either scope) — -32602
    saying what to write, nothing added or persisted."""
    created, added, rules = await _refused_where_it_enters(
        daemon,
        tmp_path,
        {"allow": ["mcp__files", "Mcp__files__write"]},
        [("MCP__files", "session"), ("mCp__files__write", "project")],
        ("Glob", "allow"),
    )
    assert [i["path"] for i in created.issues] == ["$.permissions.allow[1]"]
    for refusal in (created, *added):
        (issue,) = refusal.issues
        assert issue["message"].startswith("MCP tools are named with 'mcp__' in lower case")
    assert created.issues[0]["message"].endswith(
        "; write 'mcp__files__write' for every call of that tool"
    )
    assert (
        added[0].issues[0]["message"].endswith("; write 'mcp__files' for every tool of that server")
    )
    assert rules == {"allow": ["Glob"], "ask": [], "deny": []}


async def test_an_import_leaves_out_the_mcp_rules_an_earlier_robotad_took(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    """Decision 81: the export of a session stored before robotad refused them, and not
    loaded since, holds its MCP rules as its record does — an argument pattern, a name in
    another case. The import takes the session as loading it would: without them, its
    record too, each named in the daemon's log with what to write. Its other rules are still
    refused at their own paths in the artifact, and a refused import creates nothing and
    logs no rule left out."""
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            session_id = await create(client, tmp_path)
            artifact = (await client.call("session/export", {"sessionId": session_id}))["artifact"]
            permissions = artifact["record"]["settings"]["permissions"]
            permissions["allow"] = ["Mcp__files__read", "Glob"]
            permissions["deny"] = [MCP_ARGUMENT_RULE, "Read(/etc/**)", "MCP__docs"]
            info = await client.call(
                "session/import", {"artifact": artifact, "sessionId": "imported-old"}
            )
            stored = json.loads(daemon.home.record_path("imported-old").read_bytes())
            rules = await client.call(
                "session/addRule",
                {"sessionId": "imported-old", "rule": "Grep", "kind": "ask", "scope": "session"},
            )
            refusals = []
            for deny in (
                [MCP_ARGUMENT_RULE, "Read(domain:example.com)"],  # refused by Read's profile
                ["MCP__docs", "Mcp__files", "Read("],
            ):
                permissions["deny"] = deny
                with pytest.raises(InvalidParams) as refused:
                    await client.call(
                        "session/import", {"artifact": artifact, "sessionId": "refused-old"}
                    )
                refusals.append(refused.value)
            with pytest.raises(SessionNotFound):
                await client.call("session/get", {"sessionId": "refused-old"})
    assert info["sessionId"] == "imported-old"
    assert rules == {"allow": ["Glob"], "ask": ["Grep"], "deny": ["Read(/etc/**)"]}
    assert stored["record"]["settings"]["permissions"] == {
        "allow": ["Glob"],
        "ask": [],
        "deny": ["Read(/etc/**)"],
    }
    where = "$.artifact.record.settings.permissions"
    assert [[i["path"] for i in e.issues] for e in refusals] == [
        [f"{where}.deny[1]"],
        [f"{where}.deny[2]"],
    ]
    assert refusals[0].issues[0]["message"].startswith("domain: patterns apply only to URL")
    log = daemon.output()
    said = "the import of session imported-old: the {} rule {!r} is left out"
    assert said.format("allow", "Mcp__files__read") in log
    assert said.format("deny", MCP_ARGUMENT_RULE) in log
    assert said.format("deny", "MCP__docs") in log
    assert "write 'mcp__docs' for every tool of that server" in log
    assert "the import of session refused-old" not in log
