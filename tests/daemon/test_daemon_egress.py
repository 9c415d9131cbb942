"""Egress and secrets through a real robotad (PROTOCOL.md §10.7): WebFetch asks and never
reaches this machine's own addresses without a rule naming the host; secrets ask before being
read; acceptEdits writes freely only inside the workspace and never into persistence paths.

One daemon for the module, with its own HOME (so ``~/.ssh`` and ``~/.bashrc`` are the test's).
Only loopback addresses are ever contacted: listeners on 127.0.0.1 and 127.0.0.2 that the
tests open, and count connections on.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.daemon_helpers import (
    IO_TIMEOUT,
    Client,
    DaemonHome,
    RunningDaemon,
    connect,
    running_daemon,
)
from tests.tools.loopback_http import LoopbackHTTP, respond, serve_loopback

SECRET = "SECRET-MATERIAL-7f3a"


class EgressHome(DaemonHome):
    """A daemon home whose HOME is a folder of its own, with secrets and a shell start-up
    file in it, and a shared folder named in ``[permissions] additional_dirs``."""

    @property
    def user_home(self) -> Path:
        return self.root / "home"

    def environment(self) -> dict[str, str]:
        return {**super().environment(), "HOME": str(self.user_home)}


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningDaemon]:
    home = EgressHome(tmp_path_factory.mktemp("egress"))
    for secret in (".ssh/id_ed25519", ".aws/credentials"):
        path = home.user_home / secret
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{SECRET}\n")
    (home.user_home / ".bashrc").write_text("# the person's own\n")
    (home.root / "shared").mkdir()
    home.write_config(f'[permissions]\nadditional_dirs = ["{home.root / "shared"}"]\n')
    with running_daemon(home) as running:
        yield running


def user_home(daemon: RunningDaemon) -> Path:
    assert isinstance(daemon.home, EgressHome)
    return daemon.home.user_home


async def create(client: Client, cwd: Path, mode: str, *steps: dict[str, Any]) -> str:
    params = {"cwd": str(cwd), "permissionMode": mode, "script": [*steps, {"text": "done"}]}
    session_id: str = (await client.call("session/create", params))["sessionId"]
    return session_id


def fetch(url: str) -> dict[str, Any]:
    return {"name": "WebFetch", "arguments": {"url": url}}


def calls(*tool_calls: dict[str, Any]) -> dict[str, Any]:
    return {"toolCalls": list(tool_calls)}


async def tool_results(client: Client, session_id: str) -> list[dict[str, Any]]:
    history = await client.call("session/history", {"sessionId": session_id})
    return [m for m in history["messages"] if m["role"] == "tool"]


async def run(client: Client, session_id: str) -> dict[str, Any]:
    result: dict[str, Any] = await client.call(
        "session/run", {"sessionId": session_id, "prompt": "go"}
    )
    return result


async def deny_each(client: Client, session_id: str, result: dict[str, Any]) -> list[Any]:
    """Deny every request until the turn completes (calls are asked one at a time); the
    requests, in order, each checked to have found no tool result of it yet."""
    asked: list[Any] = []
    while result["status"] == "waiting":
        asked.extend(result["requests"])
        results = await tool_results(client, session_id)
        assert len(results) == len(asked) - len(result["requests"])
        result = await answer(client, session_id, result, approved=False)
    return asked


async def answer(client: Client, session_id: str, waiting: dict[str, Any], approved: bool) -> Any:
    responses = [
        {"requestId": r["requestId"], "responseId": f"{r['requestId']}-1", "approved": approved}
        for r in waiting["requests"]
    ]
    params = {
        "sessionId": session_id,
        "executionId": waiting["executionId"],
        "responses": responses,
    }
    return await client.call("session/resume", params)


@pytest.fixture
async def listener(nursery: trio.Nursery) -> LoopbackHTTP:
    http = await serve_loopback(nursery)
    http.routes["/"] = partial(respond, status="200 OK", body=b"loopback service")
    return http


# -- WebFetch ------------------------------------------------------------------------------


async def test_default_mode_asks_and_the_guard_still_refuses_loopback(
    daemon: RunningDaemon, tmp_path: Path, listener: LoopbackHTTP
) -> None:
    """Default mode asks before a fetch; approved, a loopback address without a rule naming
    it is refused naming its class — the listener never sees a connection."""
    url = f"http://127.0.0.1:{listener.port}/"
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            session_id = await create(client, tmp_path, "default", calls(fetch(url)))
            waiting = await run(client, session_id)
            assert waiting["status"] == "waiting"
            assert [(r["tool"], r["arguments"]) for r in waiting["requests"]] == [
                ("WebFetch", {"url": url})
            ]
            assert listener.connections == 0
            resumed = await answer(client, session_id, waiting, approved=True)
            results = await tool_results(client, session_id)
    assert resumed["status"] == "completed"
    assert results[0]["metadata"]["ok"] is False
    assert "127.0.0.1: a loopback address" in results[0]["content"]
    assert listener.connections == 0


async def test_bypass_reaches_loopback_only_through_a_rule_naming_the_host(
    daemon: RunningDaemon, tmp_path: Path, listener: LoopbackHTTP
) -> None:
    """bypassPermissions does not lift the guard; ``localhost`` is refused like 127.0.0.1;
    an allow rule naming the exact host does lift it."""
    by_address = f"http://127.0.0.1:{listener.port}/"
    by_name = f"http://localhost:{listener.port}/"
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            session_id = await create(
                client,
                tmp_path,
                "bypassPermissions",
                calls(fetch(by_address), fetch(by_name)),
                {"text": "refused"},
                calls(fetch(by_name)),
            )
            first = await run(client, session_id)
            refused = await tool_results(client, session_id)
            assert listener.connections == 0
            rule = {
                "sessionId": session_id,
                "rule": "WebFetch(domain:localhost)",
                "kind": "allow",
                "scope": "session",
            }
            await client.call("session/addRule", rule)
            second = await run(client, session_id)
            allowed = (await tool_results(client, session_id))[len(refused) :]
    assert first["status"] == second["status"] == "completed"
    assert [r["metadata"]["ok"] for r in refused] == [False, False]
    assert "127.0.0.1: a loopback address" in refused[0]["content"]
    assert "localhost (" in refused[1]["content"]
    assert "a loopback address" in refused[1]["content"]
    assert [r["metadata"]["ok"] for r in allowed] == [True]
    assert allowed[0]["content"].endswith("loopback service")
    assert listener.connections == 1


async def test_an_allowed_host_redirecting_to_another_loopback_address_is_refused(
    daemon: RunningDaemon, tmp_path: Path, listener: LoopbackHTTP, nursery: trio.Nursery
) -> None:
    other = await serve_loopback(nursery, "127.0.0.2")
    target = f"http://127.0.0.2:{other.port}/"
    listener.routes["/go"] = partial(respond, status="302 Found", headers={"Location": target})
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            url = f"http://localhost:{listener.port}/go"
            session_id = await create(client, tmp_path, "bypassPermissions", calls(fetch(url)))
            await client.call(
                "session/addRule",
                {
                    "sessionId": session_id,
                    "rule": "WebFetch(domain:localhost)",
                    "kind": "allow",
                    "scope": "session",
                },
            )
            await run(client, session_id)
            results = await tool_results(client, session_id)
    assert results[0]["metadata"]["ok"] is False
    assert "refused to connect to 127.0.0.2: a loopback address" in results[0]["content"]
    assert listener.requests == ["/go"]
    assert other.connections == 0


# -- secrets -------------------------------------------------------------------------------


async def test_reading_secrets_asks_and_reads_nothing_before_the_answer(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    """Even in acceptEdits, Read of ~/.ssh/…, ~/.aws/… and a .env asks; nothing is read
    until the answer, and a denial reads nothing at all."""
    home = user_home(daemon)
    (tmp_path / ".env").write_text(f"TOKEN={SECRET}\n")
    paths = [str(home / ".ssh/id_ed25519"), str(home / ".aws/credentials"), str(tmp_path / ".env")]
    reads = [{"name": "Read", "arguments": {"file_path": p}} for p in paths]
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            session_id = await create(client, tmp_path, "acceptEdits", calls(*reads))
            waiting = await run(client, session_id)
            assert waiting["status"] == "waiting"
            assert await tool_results(client, session_id) == []
            asked = await deny_each(client, session_id, waiting)
            events = list(client.session_events(session_id))
            after = await tool_results(client, session_id)
    assert [r["arguments"]["file_path"] for r in asked] == paths
    assert all("bypassPermissions" in r["reason"] for r in asked)
    assert not any(e.get("type") == "tool_started" for e in events)
    assert SECRET not in repr(events)
    assert [r["metadata"]["ok"] for r in after] == [False, False, False]
    assert SECRET not in repr(after)


# -- the workspace ---------------------------------------------------------------------------


async def test_accept_edits_writes_inside_the_workspace_and_asks_elsewhere(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    home = user_home(daemon)
    cwd = tmp_path / "project"
    (cwd / ".git" / "hooks").mkdir(parents=True)
    shared = daemon.home.root / "shared"

    def write(path: Path) -> dict[str, Any]:
        return {"name": "Write", "arguments": {"file_path": str(path), "content": "echo hi\n"}}

    asked = [home / ".bashrc", tmp_path / "outside.txt", cwd / ".git" / "hooks" / "pre-commit"]
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            free = await create(
                client, cwd, "acceptEdits", calls(write(cwd / "inside.txt"), write(shared / "n"))
            )
            ran = await run(client, free)
            guarded = await create(client, cwd, "acceptEdits", calls(*(write(p) for p in asked)))
            waiting = await run(client, guarded)
            requests = await deny_each(client, guarded, waiting)
    assert ran["status"] == "completed"
    assert (cwd / "inside.txt").read_text() == "echo hi\n"
    assert (shared / "n").read_text() == "echo hi\n"
    assert waiting["status"] == "waiting"
    assert [r["arguments"]["file_path"] for r in requests] == [str(p) for p in asked]
    assert (home / ".bashrc").read_text() == "# the person's own\n"
    assert not (tmp_path / "outside.txt").exists()
    assert not (cwd / ".git" / "hooks" / "pre-commit").exists()
