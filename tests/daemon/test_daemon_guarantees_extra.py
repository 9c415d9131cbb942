"""The execution root and the state folder, end to end through real robotad processes: the cwd
a session reports is the root it uses, everywhere it is reported (G-104), and where records
are stored confers no trust on a session working there (G-219)."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.daemon_helpers import (
    IO_TIMEOUT,
    Client,
    DaemonHome,
    Event,
    RunningDaemon,
    connect,
    module_daemon,
    running_daemon,
    turns_of,
)

daemon = module_daemon()


@pytest.fixture(scope="module")
def hooked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningDaemon]:
    """A robotad whose SessionStart and PreToolUse hooks append their JSON input, one line
    each, to ``<home>/hook-inputs.jsonl``."""
    home = DaemonHome(tmp_path_factory.mktemp("hooked"))
    sink = home.root / "hook-inputs.jsonl"
    command = json.dumps(f"cat >> '{sink}'; echo >> '{sink}'")
    home.write_config(
        f"""
[[hooks.SessionStart]]
hooks = [{{type = "command", command = {command}}}]

[[hooks.PreToolUse]]
hooks = [{{type = "command", command = {command}}}]
"""
    )
    with running_daemon(home) as running:
        yield running


def hook_inputs(daemon: RunningDaemon, session_id: str) -> list[dict[str, Any]]:
    sink = daemon.home.root / "hook-inputs.jsonl"
    lines = sink.read_text().splitlines() if sink.exists() else []
    inputs = [json.loads(line) for line in lines if line.strip()]
    return [i for i in inputs if i.get("session_id") == session_id]


def stored_record(daemon: RunningDaemon, session_id: str) -> dict[str, Any]:
    record: dict[str, Any] = json.loads(daemon.home.record_path(session_id).read_bytes())["record"]
    return record


GLOB = {"name": "Glob", "arguments": {"pattern": "*"}}


async def every_reported_cwd(
    client: Client, daemon: RunningDaemon, cwd: str, sid: str
) -> dict[str, Any]:
    """Create session `sid` at `cwd`, run one turn with a tool call, close and reopen it;
    return every cwd the daemon reported for it on the way."""
    prompt = f"where is {sid}"
    seen: dict[str, Any] = {}
    created = await client.call(
        "session/create",
        {"cwd": cwd, "sessionId": sid, "script": [{"toolCalls": [GLOB]}, {"text": "here"}]},
    )
    seen["create"] = created["cwd"]
    seen["record after create"] = stored_record(daemon, sid)["cwd"]
    result = await client.call("session/run", {"sessionId": sid, "prompt": prompt})
    assert result["status"] == "completed", result
    seen["get"] = (await client.call("session/get", {"sessionId": sid}))["cwd"]
    await client.call("session/close", {"sessionId": sid})
    seen["record after close"] = stored_record(daemon, sid)["cwd"]
    rows = (await client.call("session/list"))["sessions"]
    seen["list (unloaded)"] = next(r["cwd"] for r in rows if r["sessionId"] == sid)
    seen["open (reloaded)"] = (await client.call("session/open", {"sessionId": sid}))["cwd"]
    found = await client.call("history/search", {"query": prompt})
    seen["history/search"] = [e["cwd"] for e in found["entries"] if e["sessionId"] == sid]
    inputs = hook_inputs(daemon, sid)
    seen["hook events"] = [i["hook_event_name"] for i in inputs]
    seen["hook cwds"] = sorted({i["cwd"] for i in inputs})
    return seen


def expected_reports(cwd: str) -> dict[str, Any]:
    return {
        "create": cwd,
        "record after create": cwd,
        "get": cwd,
        "record after close": cwd,
        "list (unloaded)": cwd,
        "open (reloaded)": cwd,
        "history/search": [cwd],
        "hook events": ["SessionStart", "PreToolUse", "SessionStart"],
        "hook cwds": [cwd],
    }


# -- G-104 --------------------------------------------------------------------------------------


@pytest.mark.parametrize("spelling", ["direct", "symlink"])
async def test_every_report_of_the_cwd_is_the_root_in_use(
    hooked: RunningDaemon, tmp_path: Path, spelling: str
) -> None:
    """G-104, G-103: session/create, session/get, the stored record (after the create and
    after the close), session/list, session/open after a reload, history/search and every
    hook input report one cwd — the root the session was created with and runs in, as given
    (a symlinked spelling stays that spelling), never the daemon's own directory."""
    project = tmp_path / "project"
    project.mkdir()
    root = project
    if spelling == "symlink":
        root = tmp_path / "alias"
        root.symlink_to(project)
    sid = f"root-{spelling}"
    with trio.fail_after(IO_TIMEOUT):
        async with connect(hooked) as client:
            seen = await every_reported_cwd(client, hooked, str(root), sid)
    assert seen == expected_reports(str(root))


async def test_an_unnormalised_spelling_is_reported_as_the_root_in_use(
    hooked: RunningDaemon, tmp_path: Path
) -> None:
    """G-104: given a cwd spelt with a '/./' segment and a trailing slash, the stored record
    and session/list name the same root SessionInfo reports and the session uses — from the
    create on, also for a session closed before any turn."""
    project = tmp_path / "project"
    project.mkdir()
    sid = "root-unnormalised"
    seen: dict[str, str] = {}
    with trio.fail_after(IO_TIMEOUT):
        async with connect(hooked) as client:
            created = await client.call(
                "session/create", {"cwd": f"{project}/./", "sessionId": sid}
            )
            seen["create"] = created["cwd"]
            seen["record after create"] = stored_record(hooked, sid)["cwd"]
            await client.call("session/close", {"sessionId": sid})
            seen["record after close"] = stored_record(hooked, sid)["cwd"]
            rows = (await client.call("session/list"))["sessions"]
            seen["list (unloaded)"] = next(r["cwd"] for r in rows if r["sessionId"] == sid)
            seen["open (reloaded)"] = (await client.call("session/open", {"sessionId": sid}))["cwd"]
    (start,) = [i for i in hook_inputs(hooked, sid) if i["source"] == "startup"]
    in_use = start["cwd"]
    assert Path(in_use) == project
    assert seen == dict.fromkeys(seen, in_use)


# -- G-219 --------------------------------------------------------------------------------------


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


WRITE = call("Write", file_path="WRITTEN", content="from a session\n")
BASH = call("Bash", command="true")


@dataclass(frozen=True)
class Scenario:
    """One turn's first round of `calls` under `mode` and `rules`, the decisions expected for
    it (sorted) and the status the turn ends with."""

    mode: str
    rules: dict[str, list[str]]
    calls: list[dict[str, Any]]
    decisions: list[tuple[str, str]]
    status: str


SCENARIOS = {
    "default asks for a write": Scenario(
        "default", {}, [GLOB, WRITE], [("Glob", "allow"), ("Write", "ask")], "waiting"
    ),
    "default asks for a write to a record": Scenario(
        "default",
        {},
        [call("Write", file_path="sessions/SESSION.json", content="{}")],
        [("Write", "ask")],
        "waiting",
    ),
    "acceptEdits still asks for a command": Scenario(
        "acceptEdits", {}, [WRITE, BASH], [("Bash", "ask"), ("Write", "allow")], "waiting"
    ),
    "plan denies a write": Scenario(
        "plan", {}, [GLOB, WRITE], [("Glob", "allow"), ("Write", "deny")], "completed"
    ),
    "a deny rule wins over bypassPermissions": Scenario(
        "bypassPermissions",
        {"deny": ["Write"]},
        [WRITE, BASH],
        [("Bash", "allow"), ("Write", "deny")],
        "completed",
    ),
}

Outcome = tuple[str, list[tuple[str, str]], list[str]]


async def decisions_at(client: Client, cwd: Path, scenario: Scenario, written: str) -> Outcome:
    """Run `scenario`'s turn in a new session at `cwd` (a Write targets `written`, a record
    path that session's own record): its status, its permission decisions (sorted) and the
    tools it asks a person about (sorted). A waiting turn is abandoned afterwards."""
    sid = f"g219-{secrets.token_hex(6)}"
    text = json.dumps(scenario.calls).replace("WRITTEN", written).replace("SESSION", sid)
    created = await client.call(
        "session/create",
        {
            "cwd": str(cwd),
            "sessionId": sid,
            "permissionMode": scenario.mode,
            "permissions": scenario.rules,
            "script": [{"toolCalls": json.loads(text)}, {"text": "done"}],
        },
    )
    assert created["permissionMode"] == scenario.mode
    result = await client.call("session/run", {"sessionId": sid, "prompt": "go"})
    await client.wait_for_event(sid, "turn_finished")
    decided: list[Event] = turns_of(client.events, sid, "permission_decided")
    asked = sorted(r["tool"] for r in result.get("requests", []))
    if result["status"] == "waiting":
        await client.call(
            "session/abandon", {"sessionId": sid, "executionId": result["executionId"]}
        )
    return result["status"], sorted((e["tool"], e["decision"]) for e in decided), asked


@pytest.mark.parametrize("name", list(SCENARIOS))
async def test_the_state_folder_confers_no_trust(
    daemon: RunningDaemon, tmp_path: Path, name: str
) -> None:
    """G-219: a session whose cwd is the daemon's state folder, or the store's records folder
    inside it, gets exactly the decisions a session in an ordinary folder gets for the same
    calls — asks still ask (a write to its own record file included), denies still deny, and
    nothing is allowed because of where the session works."""
    scenario = SCENARIOS[name]
    written = f"written-{list(SCENARIOS).index(name)}.txt"
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "sessions").mkdir(parents=True)
    state = daemon.home.state_dir
    places = {"elsewhere": elsewhere, "state folder": state, "records folder": state / "sessions"}
    outcomes: dict[str, Outcome] = {}
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            for place, cwd in places.items():
                outcomes[place] = await decisions_at(client, cwd, scenario, written)
    asked = sorted(tool for tool, decision in scenario.decisions if decision == "ask")
    assert outcomes == {place: (scenario.status, scenario.decisions, asked) for place in places}
    wrote = ("Write", "allow") in scenario.decisions
    assert [(cwd / written).exists() for cwd in places.values()] == [wrote] * len(places)
