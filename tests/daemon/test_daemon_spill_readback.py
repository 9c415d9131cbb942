"""A spilled tool result read back through a real robotad (G-200): the model gets a
``tool-result:`` reference for a result too long to show and reads it with Read. The session's
gate used to turn every Read ``file_path`` into ``<cwd>/<value>`` before the tool ran, so no
reference ever reached the store. The daemon's one store also answers each session for its
own results only: a fork reads what its copied history names, another session reads nothing,
and a deleted session's results go with it. A fork reads a result its history names
in a compaction's summary too.

The model is an OpenAI-compatible fake on loopback, so a later reply can name the reference
an earlier turn got (a scripted session's steps are fixed before it runs)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio

from tests.daemon_helpers import IO_TIMEOUT, Client, DaemonHome, connect, running_daemon
from tests.providers.fake_servers import FakeModelServer, Reply, openai_stream

LINES = 600  # of 300 characters and more: Grep's answer is far over the 64 K spill threshold


def calls(name: str, arguments: dict[str, Any]) -> Reply:
    """A reply calling one tool."""
    delta = {
        "index": 0,
        "id": f"call-{name}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }
    return Reply(events=openai_stream(tool_deltas=[[delta]], finish_reason="tool_calls"))


def says(text: str) -> Reply:
    return Reply(events=openai_stream([text]))


async def tool_results(client: Client, session_id: str) -> list[dict[str, Any]]:
    history = await client.call("session/history", {"sessionId": session_id})
    return [m for m in history["messages"] if m["role"] == "tool"]


async def read_back(
    client: Client, server: FakeModelServer, session_id: str, reference: str
) -> dict[str, Any]:
    """One turn of `session_id` whose model reads `reference` (3 lines); its tool message."""
    server.replies += [calls("Read", {"file_path": reference, "limit": 3}), says("read")]
    await client.call("session/run", {"sessionId": session_id, "prompt": "read it back"})
    return (await tool_results(client, session_id))[-1]


def stored_results(home: DaemonHome) -> list[Path]:
    return [
        path
        for folder in (home.root / "run" / "robota").glob("tr-*")
        for path in folder.iterdir()
        if path.name != ".owner"
    ]


def spill_home(tmp_path: Path, server: FakeModelServer) -> tuple[Path, DaemonHome]:
    """A workspace holding a folder Grep answers too long to show, and a daemon home whose
    provider ``fake`` is `server`."""
    work = tmp_path / "work"
    (work / "big").mkdir(parents=True)
    (work / "big" / "f.txt").write_text(
        "".join(f"line{n} " + "y" * 300 + "\n" for n in range(LINES))
    )
    home = DaemonHome(tmp_path / "home")
    home.write_config(server.provider_config("openai", path="/v1"))
    return work, home


def searching(server: FakeModelServer, work: Path) -> dict[str, Any]:
    """Script `server` to answer one Grep over ``big`` (far past the spill threshold), then
    "ok"; the create params of a session on it in ``default`` mode."""
    server.replies += [calls("Grep", {"pattern": "line", "path": str(work / "big")}), says("ok")]
    return {"cwd": str(work), "provider": "fake", "permissionMode": "default"}


async def test_a_spilled_result_reads_back_in_its_session_and_its_forks_only(
    tmp_path: Path, server: FakeModelServer
) -> None:
    """G-200: in ``default`` mode the session that got a reference reads its result back
    (numbered like a file, the permission decision saying no file is read); a fork reads
    it too, also after its source is deleted; a session that only knows the reference reads
    it as unknown; deleting the last session holding it removes the stored file."""
    work, home = spill_home(tmp_path, server)
    create = searching(server, work)
    with running_daemon(home) as daemon, trio.fail_after(IO_TIMEOUT * 3):
        async with connect(daemon) as client:
            await client.call("session/create", {**create, "sessionId": "source"})
            await client.call("session/subscribe", {"sessionId": "source"})
            await client.call("session/run", {"sessionId": "source", "prompt": "search"})
            (spilled,) = await tool_results(client, "source")
            reference = spilled["content"]
            assert reference.startswith("tool-result:")
            assert spilled["metadata"]["spilled"] is True
            assert len(stored_results(home)) == 1

            read = await read_back(client, server, "source", reference)
            assert read["metadata"]["ok"] is True, read["content"]
            assert read["content"].splitlines()[0].endswith("line0 " + "y" * 300)
            decided = [
                e for e in client.session_events("source") if e["type"] == "permission_decided"
            ]
            assert decided[-1]["decision"] == "allow"
            assert "no file is read" in decided[-1]["reason"]

            await client.call("session/fork", {"sessionId": "source", "newSessionId": "fork"})
            assert (await read_back(client, server, "fork", reference))["metadata"]["ok"]

            stranger = {
                **create,
                "sessionId": "stranger",
                "provider": "scripted",
                "script": [
                    {"toolCalls": [{"name": "Read", "arguments": {"file_path": reference}}]},
                    {"text": "no"},
                ],
            }
            await client.call("session/create", stranger)
            await client.call("session/run", {"sessionId": "stranger", "prompt": "steal"})
            (refused,) = await tool_results(client, "stranger")
            assert refused["metadata"]["ok"] is False
            assert "unknown or has expired" in refused["content"]
            assert "line0" not in refused["content"]

            await client.call("session/close", {"sessionId": "source"})
            await client.call("session/delete", {"sessionId": "source"})
            assert (await read_back(client, server, "fork", reference))["metadata"]["ok"]
            assert len(stored_results(home)) == 1
            await client.call("session/close", {"sessionId": "fork"})
            await client.call("session/delete", {"sessionId": "fork"})
            assert stored_results(home) == []


async def test_a_fork_reads_a_result_the_summary_of_its_history_names(
    tmp_path: Path, server: FakeModelServer
) -> None:
    """G-200: once a compaction replaced the tool message, the summary is what names the
    reference; the compacted session reads it back, and so does its fork. A fork used to be
    made an owner of the references its tool messages name only, so it read such a result
    as unknown."""
    work, home = spill_home(tmp_path, server)
    create = searching(server, work)
    with running_daemon(home) as daemon, trio.fail_after(IO_TIMEOUT * 3):
        async with connect(daemon) as client:
            await client.call("session/create", {**create, "sessionId": "source"})
            await client.call("session/run", {"sessionId": "source", "prompt": "search"})
            (spilled,) = await tool_results(client, "source")
            reference = spilled["content"]
            server.replies.append(says(f"A search found every line; its result is {reference}."))
            assert (await client.call("session/compact", {"sessionId": "source"}))["compacted"]
            assert await tool_results(client, "source") == []
            assert (await read_back(client, server, "source", reference))["metadata"]["ok"]

            await client.call("session/fork", {"sessionId": "source", "newSessionId": "fork"})
            read = await read_back(client, server, "fork", reference)
            assert read["metadata"]["ok"] is True, read["content"]
            assert read["content"].splitlines()[0].endswith("line0 " + "y" * 300)
