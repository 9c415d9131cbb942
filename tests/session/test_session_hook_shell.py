"""The bounded child a hook or the classifier runs (`run_shell_command`): a command that ends
on its own leaves nothing behind — no descriptor held by robotad, no watcher process."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import trio

from robotad.session.hooks.shell import ShellFailure, run_shell_command
from robotad.tools import tether


def _open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


async def _group_gone(group: int) -> bool:
    """Whether process group `group` has emptied within a few seconds."""
    with trio.move_on_after(5):
        while True:
            try:
                os.killpg(group, 0)
            except ProcessLookupError:
                return True
            await trio.sleep(0.02)
    return False


async def test_a_finished_command_leaves_no_descriptor_and_no_watcher(tmp_path: Path) -> None:
    """Each run used to keep the tether's write end open in robotad and its watcher shell
    alive until robotad exited: a daemon running hooks on every turn ran out of descriptors,
    and every PreToolUse-gated call was then denied."""
    await run_shell_command("true", stdin=b"", cwd=tmp_path, env=dict(os.environ), time_limit=20)
    before = _open_descriptors()
    groups = []
    for _ in range(20):
        result = await run_shell_command(
            "echo $$", stdin=b"", cwd=tmp_path, env=dict(os.environ), time_limit=20
        )
        assert result.exit_code == 0
        groups.append(int(result.stdout))
    assert _open_descriptors() == before
    for group in groups:
        assert not tether.tethered(group)
        assert await _group_gone(group), f"process group {group} still has members"


async def test_what_a_finished_command_left_running_is_stopped(tmp_path: Path) -> None:
    """A background child of a hook that has exited dies with the released tether."""
    marker = tmp_path / "late"
    result = await run_shell_command(
        f"(sleep 1; touch {marker}) >/dev/null 2>&1 & echo $$",
        stdin=b"",
        cwd=tmp_path,
        env=dict(os.environ),
        time_limit=20,
    )
    assert await _group_gone(int(result.stdout))
    await trio.sleep(1.5)
    assert not marker.exists()


async def test_a_missing_working_directory_is_named(tmp_path: Path) -> None:
    """A session whose folder was removed: a hook or the classifier said only "No such file or
    directory", as if the shell were missing."""
    gone = tmp_path / "gone"
    with pytest.raises(ShellFailure) as refused:
        await run_shell_command("true", stdin=b"", cwd=gone, env=dict(os.environ), time_limit=20)
    assert str(refused.value) == (
        f"could not be started: the session's working directory {gone} does not exist"
    )


async def test_a_command_that_ended_but_left_its_output_open_is_told_apart(
    tmp_path: Path,
) -> None:
    """G-139: a hook that exits at once but starts ``sleep 60 &`` with its stdout still open
    runs out its timeout, and then says so: it was reported as a plain "timed out after 1s",
    sending its author looking for a slow command. One that runs on is still a plain timeout."""
    failures = []
    for command in ("sleep 60 & echo '{}'", "echo '{}'; exec sleep 60"):
        with trio.fail_after(20), pytest.raises(ShellFailure) as refused:
            await run_shell_command(
                command, stdin=b"", cwd=tmp_path, env=dict(os.environ), time_limit=1
            )
        failures.append(refused.value.reason)
    assert failures[0].startswith("timed out after 1s: it ended, but a process it started")
    assert failures[1] == "timed out after 1s"


async def test_a_command_holding_a_nul_could_not_be_started(tmp_path: Path) -> None:
    """A NUL in the command (a classifier's, say: config.toml lets ``\\u0000`` in) raised
    ValueError past the ShellFailure its callers handle, failing the turn with -32603 instead
    of denying the call with a reason."""
    with pytest.raises(ShellFailure) as refused:
        await run_shell_command(
            "echo a\0b", stdin=b"", cwd=tmp_path, env=dict(os.environ), time_limit=20
        )
    assert str(refused.value) == "could not be started: embedded null byte"
