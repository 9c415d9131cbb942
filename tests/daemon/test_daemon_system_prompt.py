"""A new session's system prompt through a real robotad: robota's default prompt for a model
(cwd, OS, date, tools, permission mode), `systemMessage` replacing it, project instructions
(AGENTS.md from the user's folder and from the repository root down to the cwd, nearest last,
size-capped with a note) and SessionInfo.instructions (one daemon for the module; its sessions
use an OpenAI-compatible provider that is never called)."""

from __future__ import annotations

import platform
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from robotad.prompting import INSTRUCTION_BYTES_CAP
from tests.daemon_helpers import IO_TIMEOUT, Client, RunningDaemon, connect, module_daemon

# Port 9 (discard) on loopback: nothing in this module makes a model call.
daemon = module_daemon(
    config='[providers.local]\nkind = "openai"\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "m"\n'
)


async def created(client: Client, cwd: Path, **extra: Any) -> tuple[dict[str, Any], str | None]:
    """A new session's SessionInfo and the content of its first message, if a system one."""
    info = await client.call("session/create", {"cwd": str(cwd), **extra})
    result = await client.call("session/history", {"sessionId": info["sessionId"]})
    first = result["messages"][0] if result["messages"] else None
    system = first["content"] if first and first["role"] == "system" else None
    return info, system


@pytest.fixture
def user_agents(daemon: RunningDaemon) -> Iterator[Path]:
    """The user's AGENTS.md in the daemon's config folder, removed after the test."""
    folder = daemon.home.root / "xdg-config" / "robota"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "AGENTS.md"
    path.write_text("USER-RULES: answer briefly.\n")
    yield path
    path.unlink()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """tmp/outside/AGENTS.md above tmp/outside/repo (a git root) with AGENTS.md in the root
    and in sub/, and an empty sub/deeper folder."""
    outside = tmp_path / "outside"
    root = outside / "repo"
    (root / ".git").mkdir(parents=True)
    (root / "sub" / "deeper").mkdir(parents=True)
    (outside / "AGENTS.md").write_text("OUTSIDE-RULES\n")
    (root / "AGENTS.md").write_text("ROOT-RULES\n")
    (root / "sub" / "AGENTS.md").write_text("SUB-RULES\n")
    return root


async def test_a_model_gets_the_default_prompt_saying_where_it_is(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            info, system = await created(
                client, tmp_path, provider="local", permissionMode="acceptEdits"
            )
    assert system is not None
    assert str(tmp_path) in system
    assert platform.system() in system
    assert "Permission mode: acceptEdits" in system
    for tool in ("Read", "Write", "Edit", "Bash", "Glob", "Grep", "WebFetch"):
        assert tool in system
    assert info["instructions"] == []
    assert info["messageCount"] == 1


async def test_instructions_come_from_the_user_and_from_root_to_cwd_nearest_last(
    daemon: RunningDaemon, repo: Path, user_agents: Path
) -> None:
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            info, system = await created(client, repo / "sub" / "deeper", provider="local")
            await client.call("session/close", {"sessionId": info["sessionId"]})
            reopened = await client.call("session/open", {"sessionId": info["sessionId"]})
    expected = [str(user_agents), str(repo / "AGENTS.md"), str(repo / "sub" / "AGENTS.md")]
    assert info["instructions"] == expected
    assert reopened["instructions"] == expected
    assert system is not None
    order = [system.index(mark) for mark in ("USER-RULES", "ROOT-RULES", "SUB-RULES")]
    assert order == sorted(order)
    assert "OUTSIDE-RULES" not in system  # above the repository root


async def test_system_message_replaces_the_default_and_keeps_the_instructions(
    daemon: RunningDaemon, repo: Path
) -> None:
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            info, system = await created(
                client, repo, provider="local", systemMessage="You are terse."
            )
    assert system is not None
    assert system.startswith("You are terse.")
    assert "Permission mode" not in system
    assert "ROOT-RULES" in system
    assert info["instructions"] == [str(repo / "AGENTS.md")]


async def test_a_large_instruction_file_is_cut_with_a_visible_note(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    (tmp_path / "AGENTS.md").write_text("x" * (INSTRUCTION_BYTES_CAP + 500) + "TAIL-MARK")
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            _, system = await created(client, tmp_path, provider="local")
    assert system is not None
    assert "TAIL-MARK" not in system
    assert f"only the first {INSTRUCTION_BYTES_CAP} are included" in system


async def test_the_scripted_provider_gets_only_the_system_message_given(
    daemon: RunningDaemon, repo: Path
) -> None:
    with trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            plain, plain_system = await created(client, repo, provider="scripted")
            _given, given_system = await created(
                client, repo, provider="scripted", systemMessage="Exactly this."
            )
    assert plain_system is None
    assert plain["messageCount"] == 0
    assert "instructions" not in plain
    assert given_system == "Exactly this."
