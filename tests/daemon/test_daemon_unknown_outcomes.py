"""A call a session closes without its result never claims it did not run (architecture
decision 64), through real robotad processes.

An export holds a call without its result when it was taken while the call ran, or of a session
where robotad stopped while it ran (the call is then ``uncertain``). Imported, the next prompt
closed such a call "not run: …" — though its command had run — and the model, told so, might
run it again. A fork of the uncertain session closed it "not carried over", which a model reads
the same way. Both now close it with a result starting ``outcome unknown:`` (PROTOCOL.md §10.2).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from tests.daemon.test_daemon_recoverable_e2e import (
    bash,
    connected,
    cut_an_effect,
    history,
    lines,
    pending_of,
    wait_for_file,
)
from tests.daemon_helpers import DaemonHome


def closing_result(messages: list[dict[str, Any]], call_id: str) -> str:
    """The content of the one tool message answering `call_id`."""
    (result,) = [m for m in messages if m.get("toolCallId") == call_id]
    assert result["metadata"]["ok"] is False
    content: str = result["content"]
    return content


async def test_an_export_taken_while_a_command_ran_imports_as_outcome_unknown(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    """The export is taken while the command runs (it waits for a release file); the command
    then finishes in the source. The import's next prompt closes the call as of unknown
    outcome — the command did run — and runs nothing again."""
    home = DaemonHome(tmp_path_factory.mktemp("exported-mid-call"))
    effects, started, release = tmp_path / "effects.txt", tmp_path / "started", tmp_path / "go"
    command = f"echo up > {started}; while [ ! -e {release} ]; do sleep 0.05; done; "
    command += f"echo ran >> {effects}"
    script = [{"toolCalls": [bash(command)]}, {"text": "done"}, {"text": "imported reply"}]
    async with connected(home) as client:
        create = {"cwd": str(tmp_path), "script": script, "permissionMode": "bypassPermissions"}
        source = (await client.call("session/create", create))["sessionId"]
        async with trio.open_nursery() as nursery:
            run = {"sessionId": source, "prompt": "go"}
            nursery.start_soon(client.call, "session/run", run)
            await wait_for_file(started)  # the command runs
            artifact = (await client.call("session/export", {"sessionId": source}))["artifact"]
            release.touch()
        imported = {"artifact": artifact, "sessionId": "imported"}
        await client.call("session/import", imported)
        result = await client.call("session/run", {"sessionId": "imported", "prompt": "next"})
        messages = await history(client, "imported")
    (call,) = messages[1]["toolCalls"]
    assert result["status"] == "completed", result
    assert lines(effects) == 1  # it ran in the source, once, and never in the import
    closed = closing_result(messages, call["id"])
    assert closed.startswith("outcome unknown: nothing here holds this call's execution")
    assert "not known" in closed
    assert not closed.startswith("not run")


async def test_a_call_robotad_stopped_during_stays_of_unknown_outcome_in_forks_and_imports(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    """The source lists the call as uncertain; a fork of it, and an import of its export,
    close it with a result starting "outcome unknown:", as `session/abandon` does in the
    source; the source keeps its pending execution."""
    home = DaemonHome(tmp_path_factory.mktemp("uncertain-copies"))
    session_id, _execution_id, _approval = await cut_an_effect(home, tmp_path)
    async with connected(home) as client:
        before = await pending_of(client, session_id)
        fork = (await client.call("session/fork", {"sessionId": session_id}))["sessionId"]
        forked = await history(client, fork)
        artifact = (await client.call("session/export", {"sessionId": session_id}))["artifact"]
        await client.call("session/import", {"artifact": artifact, "sessionId": "imported"})
        await client.call("session/run", {"sessionId": "imported", "prompt": "next"})
        imported = await history(client, "imported")
        after = await pending_of(client, session_id)
    assert before is not None
    (call_id,) = before["uncertain"]
    in_fork = closing_result(forked, call_id)
    assert in_fork.startswith("outcome unknown: Bash was running when robotad stopped")
    assert in_fork.endswith("The fork was taken before this call had a result.")
    in_import = closing_result(imported, call_id)
    assert in_import.startswith("outcome unknown: nothing here holds this call's execution")
    assert after == before
