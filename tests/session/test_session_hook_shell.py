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


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
async def test_a_command_printing_without_end_is_stopped_at_the_cap(
    tmp_path: Path, stream: str
) -> None:
    """A command printing without end (``yes``) was read and thrown away at full speed, half a
    core of robotad's, until its timeout. Past the cap it is now stopped at once, its whole
    tree (here a second printer in the background) with it, and fails naming the stream and
    the cap. Its timeout (60 s) is far past the test's bound: only the cap can end it."""
    leader = tmp_path / "leader"
    to = " >&2" if stream == "stderr" else ""
    command = f"echo $$ > {leader}; yes{to} & exec yes{to}"
    with trio.fail_after(20), pytest.raises(ShellFailure) as stopped:
        await run_shell_command(
            command, stdin=b"", cwd=tmp_path, env=dict(os.environ), time_limit=60
        )
    assert stopped.value.reason == (
        f"printed more than 1048576 bytes on {stream}, more than robotad reads; robotad "
        "stopped it (write long output to a file instead)"
    )
    group = int(leader.read_text())
    assert not os.path.exists(f"/proc/{group}")  # reaped: no zombie left
    assert await _group_gone(group), f"process group {group} still has members"


async def test_output_up_to_the_cap_is_read_whole(tmp_path: Path) -> None:
    """The cap stops only what passes it: output of exactly the cap comes back whole."""
    result = await run_shell_command(
        "head -c 1000 /dev/zero; head -c 10 /dev/zero >&2",
        stdin=b"",
        cwd=tmp_path,
        env=dict(os.environ),
        time_limit=20,
        output_limit=1000,
    )
    assert (result.exit_code, result.stdout, result.stderr) == (0, b"\0" * 1000, b"\0" * 10)


async def test_a_stream_the_caller_does_not_read_goes_to_dev_null(tmp_path: Path) -> None:
    """What the caller does not read costs robotad nothing: the command's stream is
    ``/dev/null``, where it may print without limit (5 MB here, five times the cap)."""
    command = (
        'test "$(readlink /proc/$$/fd/1)" = /dev/null || exit 7; '
        "head -c 5000000 /dev/zero; echo done >&2"
    )
    result = await run_shell_command(
        command, stdin=b"", cwd=tmp_path, env=dict(os.environ), time_limit=20, read_stdout=False
    )
    assert (result.exit_code, result.stdout, result.stderr) == (0, b"", b"done\n")
