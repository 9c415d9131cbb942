"""The open-files limit: robotad raises its own soft limit at start-up and gives every program
it starts (the model's commands, hooks, MCP servers, key commands) the limit it was started
with (`robotad.open_files`)."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest
import trio

from robotad.open_files import WANTED, target
from tests.daemon_helpers import IO_TIMEOUT, DaemonHome, connect, running_daemon

INFINITY = resource.RLIM_INFINITY
#: The soft and hard limits the daemon and the child script are started with.
STARTED_WITH = (256, 4096)
REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("soft", "hard", "expected"),
    [
        (1024, 524_288, WANTED),  # the usual: up to what robotad asks for, not the hard limit
        (256, 4096, 4096),  # a lower hard limit caps it
        (1024, INFINITY, WANTED),
        (100_000, 200_000, 100_000),  # a limit already higher is kept
        (INFINITY, INFINITY, INFINITY),
        (4096, 4096, 4096),
    ],
)
def test_the_soft_limit_robotad_sets(soft: int, hard: int, expected: int) -> None:
    assert target(soft, hard) == expected


@contextmanager
def started_with_limit(soft: int) -> Iterator[None]:
    """Children started inside the block inherit the soft limit `soft` (this process's own is
    put back after)."""
    before = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, before[1]))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, before)


def soft_limit_of(pid: int) -> int:
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            return int(line.split()[3])
    raise AssertionError(f"no open-files line in /proc/{pid}/limits")


async def test_robotad_raises_its_limit_and_its_commands_and_hooks_get_the_old_one(
    tmp_path: Path,
) -> None:
    """Started with a soft limit of 256, robotad serves with 65,536 (or its hard limit); a
    command the model runs and a hook see 256, as they would have without robotad."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    home = DaemonHome(tmp_path / "home")
    hook_saw = tmp_path / "hook-saw"
    home.write_config(
        "[[hooks.PreToolUse]]\n"
        f'hooks = [{{type = "command", command = "ulimit -Sn > {hook_saw}"}}]\n'
    )
    script = [
        {"toolCalls": [{"name": "Bash", "arguments": {"command": "ulimit -Sn"}}]},
        {"text": "ok"},
    ]
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with ExitStack() as stack:
        with started_with_limit(STARTED_WITH[0]):
            daemon = stack.enter_context(running_daemon(home))
        with trio.fail_after(IO_TIMEOUT):
            async with connect(daemon) as client:
                create = {"cwd": str(workspace), "script": script}
                info = await client.call(
                    "session/create", create | {"permissionMode": "bypassPermissions"}
                )
                await client.call("session/run", {"sessionId": info["sessionId"], "prompt": "go"})
                history = await client.call("session/history", {"sessionId": info["sessionId"]})
        daemon_limit = soft_limit_of(daemon.process.pid)
    [tool] = [m for m in history["messages"] if m["role"] == "tool"]
    assert daemon_limit == (WANTED if hard == INFINITY else min(WANTED, hard))
    assert tool["content"].strip().splitlines()[0] == str(STARTED_WITH[0])
    assert hook_saw.read_text().strip() == str(STARTED_WITH[0])


CHILD = textwrap.dedent(
    """
    import json, os, resource, sys
    import trio
    from robotad import open_files
    from robotad.mcp.config import McpServerConfig, spec_of_config
    from robotad.mcp.stdio import open_stdio
    from robotad.providers.keys import _run_key_command
    from robotad.tools.tether import open_tethered_process, release

    resource.setrlimit(resource.RLIMIT_NOFILE, (256, 4096))
    raised = open_files.raise_limit()
    mcp_saw = sys.argv[1]

    async def main():
        process = await open_tethered_process(
            ["sh", "-c", "ulimit -Sn"], stdout=-1, stdin=-3
        )
        out = await process.stdout.receive_some(100)
        await process.wait()
        release(process.pid)
        spec = spec_of_config(
            "limit",
            McpServerConfig(command="sh", args=["-c", f"ulimit -Sn > {mcp_saw}; exec cat"]),
        )
        async with open_stdio(spec):
            with trio.fail_after(10):
                while not (os.path.exists(mcp_saw) and os.path.getsize(mcp_saw)):
                    await trio.sleep(0.01)
        return out.decode().strip()

    command = trio.run(main)
    # What the raised limit is for: past select()'s 1,024 (its pipe is numbered above).
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    key = _run_key_command("p", "ulimit -Sn", os.environ)
    print(json.dumps({
        "raised": raised,
        "own": resource.getrlimit(resource.RLIMIT_NOFILE)[0],
        "command": command,
        "key": key,
    }))
    """
)


def test_every_kind_of_child_gets_the_limit_robotad_was_started_with(tmp_path: Path) -> None:
    """The spawn paths one by one, in a process started with 256 (hard 4,096): a tethered
    command (Bash and hooks), an MCP server over stdio and a provider's key command — run
    while the process holds over 1,024 descriptors (its select() answered -32603 then)."""
    mcp_saw = tmp_path / "mcp-saw"
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(mcp_saw)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen == {"raised": 4096, "own": 4096, "command": "256", "key": "256"}
    assert mcp_saw.read_text().strip() == "256"
