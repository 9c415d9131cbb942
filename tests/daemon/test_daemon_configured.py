"""A robotad with a configuration file, end to end: default permissions, the classifier that
makes ``auto`` mode possible, hooks fired in the session's cwd, and a bad file refused at
start with every problem located (PROTOCOL §8)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from protocol.errors import ProviderFailed
from tests.daemon_helpers import (
    IO_TIMEOUT,
    PROCESS_TIMEOUT,
    REPO,
    DaemonHome,
    RunningDaemon,
    connect,
    running_daemon,
)

ALLOW = json.dumps({"decision": "allow", "reason": "fine by the classifier"})


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningDaemon]:
    home = DaemonHome(tmp_path_factory.mktemp("configured"))
    classifier = home.root / "classifier.sh"
    classifier.write_text(f"cat > /dev/null\necho '{ALLOW}'\n")
    home.write_config(
        f"""
[permissions]
deny = ["Bash(rm:*)"]

[classifier]
command = "sh {classifier}"

[[hooks.SessionStart]]
hooks = [{{type = "command", command = "echo started >> hook-runs.txt"}}]

[[hooks.PreToolUse]]
matcher = "Glob"
hooks = [{{type = "command", command = "echo 'no globbing here' >&2; exit 2"}}]

[[hooks.PermissionDecision]]
hooks = [{{type = "command", command = "cat >> decisions.jsonl; echo >> decisions.jsonl"}}]
"""
    )
    with running_daemon(home) as running:
        yield running


async def test_configured_defaults_classifier_and_hooks(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    """New sessions get the configured rules; with a classifier, auto mode is accepted and
    the classifier stands in for the person; SessionStart hooks run in the session's cwd, a
    blocking PreToolUse hook denies its call, and a PermissionDecision hook hears of both
    decisions with their reasons (G-128)."""
    target = tmp_path / "by-classifier.txt"
    write = {"name": "Write", "arguments": {"file_path": str(target), "content": "ok\n"}}
    glob = {"name": "Glob", "arguments": {"pattern": "*"}}
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            info = await client.call(
                "session/create",
                {
                    "cwd": str(tmp_path),
                    "permissionMode": "auto",
                    "script": [{"toolCalls": [write]}, {"toolCalls": [glob]}, {"text": "done"}],
                },
            )
            session_id = info["sessionId"]
            rules = await client.call(
                "session/addRule",
                {"sessionId": session_id, "rule": "Read", "kind": "allow", "scope": "session"},
            )
            result = await client.call("session/run", {"sessionId": session_id, "prompt": "go"})
            history = await client.call("session/history", {"sessionId": session_id})
    assert info["permissionMode"] == "auto"
    assert rules["deny"] == ["Bash(rm:*)"]
    assert result["status"] == "completed"
    assert target.read_text() == "ok\n"
    results = [m for m in history["messages"] if m["role"] == "tool"]
    assert [m["name"] for m in results] == ["Write", "Glob"]
    assert results[0]["metadata"]["ok"] is True
    assert results[1]["metadata"]["ok"] is False
    assert (tmp_path / "hook-runs.txt").read_text() == "started\n"
    decided = [json.loads(line) for line in (tmp_path / "decisions.jsonl").read_text().splitlines()]
    assert [(d["hook_event_name"], d["tool_name"], d["decision"]) for d in decided] == [
        ("PermissionDecision", "Write", "allow"),
        ("PermissionDecision", "Glob", "deny"),
    ]
    assert decided[0]["reason"] == "fine by the classifier"
    assert "no globbing here" in decided[1]["reason"]


def test_a_bad_configuration_is_refused_at_start_with_every_problem(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """PROTOCOL §8: unknown keys and wrong types are located errors at start; the daemon
    exits non-zero before serving."""
    home = DaemonHome(tmp_path_factory.mktemp("badconfig"))
    home.write_config('default_provider = 5\n[bogus]\nx = 1\n[permissions]\nallow = "Read"\n')
    finished = subprocess.run(
        [sys.executable, "-m", "robotad", "--socket", str(home.socket_path)],
        env=home.environment(),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=PROCESS_TIMEOUT,
        check=False,
    )
    assert finished.returncode == 1
    for location in ("default_provider", "bogus", "permissions.allow"):
        assert location in finished.stderr
    assert not home.socket_path.exists()


async def test_a_session_whose_provider_is_gone_stays_readable(tmp_path: Path) -> None:
    """Its [providers] table removed from the config (or its key unset): the session loads,
    shows its history and forks; a turn fails saying why and what to do. Such a session used
    to refuse even to show its history (-32007 on every load)."""
    home = DaemonHome(tmp_path / "home")
    work = tmp_path / "work"
    work.mkdir()
    home.write_config('[providers.local]\nkind = "openai"\nbase_url = "http://127.0.0.1:9/v1"\n')
    with running_daemon(home) as first:
        async with connect(first) as client:
            with trio.fail_after(IO_TIMEOUT):
                await client.call(
                    "session/create", {"cwd": str(work), "sessionId": "kept", "provider": "local"}
                )
    home.write_config("")  # the table is gone
    with running_daemon(home) as second:
        async with connect(second) as client:
            with trio.fail_after(IO_TIMEOUT):
                history = await client.call("session/history", {"sessionId": "kept"})
                with pytest.raises(ProviderFailed) as failed:
                    await client.call("session/run", {"sessionId": "kept", "prompt": "again"})
                await client.call("session/close", {"sessionId": "kept"})
        said = second.output()
    assert all(message["role"] != "user" for message in history["messages"])
    reason = failed.value.data["reason"]
    assert "unknown provider 'local'" in reason
    assert "restore [providers.local]" in reason
    record = json.loads(home.record_path("kept").read_text())
    assert record["record"]["settings"]["provider"] == "local"  # the record still names it
    assert f"config={home.config_path}" in said  # the log says which file it read
    assert "loads without its provider local" in said


async def test_a_key_out_of_reach_for_a_moment_comes_back_when_the_session_loads_again(
    tmp_path: Path,
) -> None:
    """The key command failed when the session loaded: a turn fails saying that closing the
    session and using it again is enough, and it is — the provider is built anew at load."""
    home = DaemonHome(tmp_path / "home")
    work = tmp_path / "work"
    work.mkdir()
    gate = tmp_path / "key-ok"
    gate.write_text("")
    command = f"test -e {gate} && echo sk-test"
    home.write_config(
        '[providers.local]\nkind = "openai"\nbase_url = "http://127.0.0.1:9/v1"\n'
        f"api_key_command = {json.dumps(command)}\n"
    )
    run = {"sessionId": "keyed", "prompt": "hi"}
    with running_daemon(home) as daemon:
        async with connect(daemon) as client:
            with trio.fail_after(IO_TIMEOUT):
                create = {"cwd": str(work), "sessionId": "keyed", "provider": "local"}
                await client.call("session/create", create)
                await client.call("session/close", {"sessionId": "keyed"})
                gate.unlink()  # the key is out of reach when the session loads again
                with pytest.raises(ProviderFailed) as without_key:
                    await client.call("session/run", run)
                gate.write_text("")
                await client.call("session/close", {"sessionId": "keyed"})
                with pytest.raises(ProviderFailed) as with_key:
                    await client.call("session/run", run)
    assert "`robotactl close` the session and use it again" in without_key.value.data["reason"]
    # Built anew with its key: the call reached the network (nothing listens on port 9).
    assert "127.0.0.1:9" in with_key.value.data["reason"]
    assert "restore [providers.local]" not in with_key.value.data["reason"]
