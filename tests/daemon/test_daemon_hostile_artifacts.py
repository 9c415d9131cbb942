"""Hostile or hand-edited artifacts and records through a real robotad (one daemon for the
module): each is refused where it is wrong — -32602 for an import, RecordCorrupt for a stored
record — never -32603, with nothing written and other sessions undisturbed."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import trio

from protocol.errors import InvalidParams, RecordCorrupt, SessionNotFound
from tests.daemon_helpers import IO_TIMEOUT, Client, RunningDaemon, connect, module_daemon

daemon = module_daemon()

#: A valid ISO-8601 instant whose UTC date is in year 10000.
BEYOND_UTC = "9999-12-31T23:59:59-05:00"
GLOB = {"name": "Glob", "arguments": {"pattern": "*"}}


def state_files(daemon: RunningDaemon) -> set[str]:
    state = daemon.home.state_dir
    return {str(p.relative_to(state)) for p in state.rglob("*") if p.is_file()}


async def exported(client: Client, cwd: Path, *steps: dict[str, Any]) -> dict[str, Any]:
    """The artifact of a new session that ran one turn with `steps` scripted."""
    script = list(steps) or [{"text": "hi"}]
    info = await client.call("session/create", {"cwd": str(cwd), "script": script})
    await client.call("session/run", {"sessionId": info["sessionId"], "prompt": "go"})
    reply = await client.call("session/export", {"sessionId": info["sessionId"]})
    artifact: dict[str, Any] = reply["artifact"]
    return artifact


async def test_a_timestamp_with_no_utc_date_is_refused_where_it_stands(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    """G-002, G-004, G-030, G-032: a message or history timestamp whose UTC date is past
    year 9999 made import answer -32603 (and a stored record holding one fail to load the
    same way). An import is -32602 at that message, writing nothing; a stored record is
    RecordCorrupt there, listed as corrupt and left byte for byte."""
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            artifact = await exported(client, tmp_path)
            before = state_files(daemon)
            bad = copy.deepcopy(artifact)
            bad["record"]["messages"][1]["timestamp"] = BEYOND_UTC
            bad["record"]["history"] = [{"id": "h", "type": "t", "timestamp": BEYOND_UTC}]
            with pytest.raises(InvalidParams) as refused:
                await client.call("session/import", {"artifact": bad, "sessionId": "far-1"})
            with pytest.raises(SessionNotFound):
                await client.call("session/get", {"sessionId": "far-1"})
            after_refusal = state_files(daemon)
            stored = daemon.home.record_path("far-2")
            content = json.dumps({"schemaVersion": 1, "record": {**bad["record"], "id": "far-2"}})
            stored.write_text(content)
            with pytest.raises(RecordCorrupt) as corrupt:
                await client.call("session/open", {"sessionId": "far-2"})
            listed = {s["sessionId"]: s for s in (await client.call("session/list"))["sessions"]}
    message = "timestamp is out of range: in UTC it falls outside years 1-9999"
    assert refused.value.issues == [
        {"path": "$.artifact.record.messages[1]", "message": message},
        {"path": "$.artifact.record.history[0]", "message": message},
    ]
    assert after_refusal == before
    assert corrupt.value.data is not None
    assert corrupt.value.data["issues"] == [
        {"path": "$.record.messages[1]", "message": message},
        {"path": "$.record.history[0]", "message": message},
    ]
    assert listed["far-2"]["status"] == "corrupt"
    assert stored.read_text() == content
