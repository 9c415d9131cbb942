"""Bash: output and exit status, the session's cwd, and that the whole process tree ends with
the call — on exit, on timeout and on cancellation."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
from pathlib import Path

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from robotad.agent.tool import ArgumentError, ToolContext
from robotad.tools import BashTool
from robotad.tools import bash as bash_module
from robotad.tools.bash import (
    MAX_COMMAND_CHARS,
    MAX_OUTPUT_CHARS,
    OutputCapture,
    command_environment,
)
from tests.tools.tool_calls import call, is_running

# The shell records its own pid, a background child, a subshell and the subshell's own
# background child (a grandchild of the shell) before it parks on `wait`.
SPAWN_TREE = (
    "echo $$ >> pids; "
    "sleep 1000 & echo $! >> pids; "
    "( sleep 1000 & echo $! >> pids; echo $BASHPID >> pids; echo go > ready; wait ) & "
    "wait"
)


def _pids(directory: Path) -> list[int]:
    return [int(line) for line in (directory / "pids").read_text().split()]


async def test_success_reports_output_and_exit_status(tmp_path: Path) -> None:
    with trio.fail_after(20):
        result = await call(BashTool(), tmp_path, command="echo hello; printf 'no newline'")
    assert result.ok
    assert result.content == "hello\nno newline\nexit status 0"
    assert result.metadata == {"exit_code": 0, "timed_out": False}


async def test_non_zero_exit_is_a_failed_result_that_keeps_the_output(tmp_path: Path) -> None:
    with trio.fail_after(20):
        result = await call(BashTool(), tmp_path, command="echo out; echo err >&2; exit 3")
    assert not result.ok
    assert result.content == "out\nerr\nexit status 3"
    assert result.metadata["exit_code"] == 3


async def test_runs_in_the_session_cwd_not_the_process_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """G-117: the tool works in the session's cwd, whatever the daemon's own cwd is."""
    session = tmp_path / "session"
    session.mkdir()
    monkeypatch.chdir(tmp_path)
    with trio.fail_after(20):
        result = await call(BashTool(), session, command="pwd -P; echo made > here.txt")
    assert result.content.splitlines()[0] == os.path.realpath(session)
    assert (session / "here.txt").read_text() == "made\n"
    assert not (tmp_path / "here.txt").exists()


async def test_stdin_is_empty(tmp_path: Path) -> None:
    with trio.fail_after(20):
        result = await call(BashTool(), tmp_path, command="cat; echo done")
    assert result.content == "done\nexit status 0"


async def test_missing_session_cwd_is_a_failed_result(tmp_path: Path) -> None:
    result = await call(BashTool(), tmp_path / "gone", command="true")
    assert not result.ok
    assert "does not exist" in result.content


async def test_timeout_kills_children_and_grandchildren(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "ready")

    async def unblock_the_shell() -> None:
        await trio.to_thread.run_sync((tmp_path / "ready").read_text, abandon_on_cancel=True)

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(unblock_the_shell)
            result = await call(BashTool(), tmp_path, command=SPAWN_TREE, timeout=2000)
            nursery.cancel_scope.cancel()

    pids = _pids(tmp_path)
    assert len(pids) == 4, "the command did not get to start its tree before the timeout"
    assert not result.ok
    assert result.metadata["timed_out"] is True
    assert "timed out after 2000 ms" in result.content
    assert result.content.endswith("exit status 143 (killed by SIGTERM)")
    assert [pid for pid in pids if is_running(pid)] == []


async def test_cancellation_kills_the_whole_tree_and_propagates(tmp_path: Path) -> None:
    """The tool's side of G-095: a cancelled Bash call stops its whole process tree and
    re-raises Cancelled only after the tree is gone."""
    os.mkfifo(tmp_path / "ready")
    finished = False

    async def run_until_cancelled(scope: trio.CancelScope) -> None:
        nonlocal finished
        with scope:
            await call(BashTool(), tmp_path, command=SPAWN_TREE)
            finished = True

    scope = trio.CancelScope()
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run_until_cancelled, scope)
            await trio.to_thread.run_sync((tmp_path / "ready").read_text, abandon_on_cancel=True)
            scope.cancel()

    assert scope.cancelled_caught
    assert not finished
    pids = _pids(tmp_path)
    assert len(pids) == 4
    assert [pid for pid in pids if is_running(pid)] == []


async def test_background_jobs_end_with_the_command(tmp_path: Path) -> None:
    with trio.fail_after(20):
        result = await call(
            BashTool(), tmp_path, command="sleep 1000 & echo $! > pids; echo started"
        )
    assert result.ok
    assert result.content == "started\nexit status 0"
    assert not is_running(_pids(tmp_path)[0])


async def test_a_detached_process_holding_the_output_does_not_hold_the_call(
    tmp_path: Path,
) -> None:
    # The parent waits until its child has detached (written its pid) before it exits.
    command = (
        "setsid sh -c 'echo $$ > pid; exec sleep 1000' & "
        "until [ -s pid ]; do :; done; echo parent done"
    )
    try:
        with trio.fail_after(20):
            result = await call(BashTool(), tmp_path, command=command)
    finally:
        detached = int((tmp_path / "pid").read_text())
        os.kill(detached, signal.SIGKILL)
    assert result.ok
    assert result.content == (
        "parent done\n"
        "[output stream still held by a detached process; stopped reading]\n"
        "exit status 0"
    )


async def test_a_tree_that_ignores_sigterm_is_killed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bash_module, "KILL_GRACE_S", 0.2)
    command = "trap '' TERM; sleep 1000 & echo $! >> pids; echo $$ >> pids; wait"
    with trio.fail_after(30):
        result = await call(BashTool(), tmp_path, command=command, timeout=1000)
    assert not result.ok
    assert result.metadata["signal"] == "SIGKILL"
    assert result.metadata["exit_code"] == 137
    assert result.content.endswith("timed out after 1000 ms\nexit status 137 (killed by SIGKILL)")
    assert [pid for pid in _pids(tmp_path) if is_running(pid)] == []


async def test_a_command_killed_by_a_signal_reports_it(tmp_path: Path) -> None:
    with trio.fail_after(20):
        result = await call(BashTool(), tmp_path, command="kill -KILL $$")
    assert not result.ok
    assert result.content == "exit status 137 (killed by SIGKILL)"


async def test_long_output_keeps_head_and_tail(tmp_path: Path) -> None:
    with trio.fail_after(20):
        result = await call(BashTool(), tmp_path, command="seq 1 100000")
    assert result.ok
    lines = result.content.splitlines()
    assert lines[:3] == ["1", "2", "3"]
    assert lines[-2:] == ["100000", "exit status 0"]
    assert any("bytes of output omitted" in line for line in lines)
    assert len(result.content) < MAX_OUTPUT_CHARS + 200


async def test_the_call_does_not_run_in_the_daemon_process_group(tmp_path: Path) -> None:
    with trio.fail_after(20):
        result = await call(BashTool(), tmp_path, command="cut -d' ' -f5 /proc/$$/stat; echo $$")
    group, pid = result.content.splitlines()[:2]
    assert int(group) == int(pid) != os.getpgrp()


def _render_all(chunks: list[bytes], limit: int) -> tuple[str, bytes]:
    capture = OutputCapture(limit)
    for chunk in chunks:
        capture.feed(chunk)
    return capture.render(), b"".join(chunks)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.text(alphabet="abc\n", max_size=40), max_size=12),
    st.integers(min_value=2, max_value=120),
)
def test_output_capture_keeps_everything_or_exactly_head_and_tail(
    texts: list[str], limit: int
) -> None:
    rendered, whole = _render_all([text.encode() for text in texts], limit)
    half = limit // 2
    if len(whole) <= 2 * half:
        assert rendered == whole.decode()
    else:
        omitted = len(whole) - 2 * half
        assert rendered == (
            whole[:half].decode()
            + f"\n[… {omitted} bytes of output omitted …]\n"
            + whole[-half:].decode()
        )


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=40), max_size=12), st.integers(min_value=2, max_value=120))
def test_output_capture_of_any_bytes_stays_bounded(chunks: list[bytes], limit: int) -> None:
    rendered, whole = _render_all(chunks, limit)
    if len(whole) <= 2 * (limit // 2):
        assert rendered == whole.decode("utf-8", "replace")
    else:
        assert f"[… {len(whole) - 2 * (limit // 2)} bytes of output omitted …]" in rendered
        assert len(rendered) <= 2 * (limit // 2) + 60


def test_output_capture_does_not_split_characters_at_the_cuts() -> None:
    rendered, _ = _render_all([("é" * 10 + "x" * 20 + "é" * 10).encode()], 10)
    assert rendered == "éé\n[… 50 bytes of output omitted …]\néé"


async def test_secret_named_environment_variables_never_reach_the_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A provider key in the daemon's environment is not readable by a model-run command,
    while ordinary variables still are."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-planted-7f3a")
    monkeypatch.setenv("ROBOTA_PLAIN_SETTING", "visible-value")
    result = await BashTool().run(
        BashTool().decode_arguments(
            {"command": 'echo "key=[$OPENAI_API_KEY] plain=[$ROBOTA_PLAIN_SETTING]"'}
        ),
        ToolContext(cwd=tmp_path, session_id="s"),
    )
    assert result.ok
    assert "sk-planted-7f3a" not in result.content
    assert "key=[]" in result.content
    assert "plain=[visible-value]" in result.content


def test_a_url_with_credentials_is_kept_out_whatever_its_variable_is_called() -> None:
    environ = {
        "DATABASE_URL": "postgres://app:hunter2@db.internal/prod",
        "REDIS": "redis://:s3cret@cache:6379/0",
        "REMOTE": "https://ghp_0123456789abcdef@github.com/me/repo.git",
        "PLAIN_URL": "https://example.com/path?q=1",
        "USER_ONLY": "ssh://git@example.com/repo",
        "PATH": "/usr/bin",
    }
    assert command_environment(environ) == {
        "PLAIN_URL": "https://example.com/path?q=1",
        "USER_ONLY": "ssh://git@example.com/repo",
        "PATH": "/usr/bin",
    }


def test_secret_variables_are_known_by_more_than_the_log_redaction_words() -> None:
    """Names the log's key rule lets through but that hold secrets as environment variables,
    the configured providers' key variables whatever they are called, and names that only
    look alike, kept."""
    secret = [
        "PGPASSWORD",
        "MYSQL_PWD",
        "OPENAI_KEY",
        "ANTHROPIC_KEY",
        "GITHUB_PAT",
        "CI_JOB_JWT",
        "SENTRY_DSN",
        "GHTOKEN",
        "LLAMA_CREDS",
    ]
    kept = ["TOKENIZERS_PARALLELISM", "PYTHON_COMPAT", "SSH_AUTH_SOCK", "KEYTIMEOUT", "HOME"]
    environ = dict.fromkeys([*secret, *kept], "value")
    assert command_environment(environ, hidden=frozenset({"LLAMA_CREDS"})) == dict.fromkeys(
        kept, "value"
    )


def test_a_command_longer_than_the_system_takes_is_refused_before_anything_reads_it() -> None:
    """Reading a 300 KB command (the rules split it with shlex, quadratic in a token's length)
    held the daemon for 10 s before the spawn's E2BIG; now the arguments are refused first."""
    with pytest.raises(ArgumentError) as refused:
        BashTool().decode_arguments({"command": "x" * (MAX_COMMAND_CHARS + 1)})
    assert str(refused.value) == (
        f"invalid arguments for Bash: Expected `str` of length <= {MAX_COMMAND_CHARS}"
        " - at `$.command`"
    )


def test_the_command_cap_counts_the_bytes_the_system_counts() -> None:
    """Linux's limit is in bytes: a command of fewer characters than the cap but more bytes
    (Cyrillic is two bytes a letter in UTF-8) passed and then failed at the spawn as
    "Argument list too long"; it is refused with the arguments, saying so."""
    letters = "echo " + "ж" * (MAX_COMMAND_CHARS // 2)  # within the cap in characters
    assert len(letters) <= MAX_COMMAND_CHARS
    with pytest.raises(ArgumentError) as refused:
        BashTool().decode_arguments({"command": letters})
    assert str(refused.value) == (
        "invalid arguments for Bash: the command is 131,075 bytes in UTF-8; the system runs "
        f"at most {MAX_COMMAND_CHARS:,} in one argument - at `$.command`"
    )
    fits = "echo " + "ж" * ((MAX_COMMAND_CHARS - len("echo ")) // 2)
    assert BashTool().decode_arguments({"command": fits}).command == fits


async def test_the_longest_command_is_the_longest_the_system_runs(tmp_path: Path) -> None:
    """The cap is Linux's limit for one argument on 4 KiB pages (32 pages with the NUL) and
    never above it: the longest command runs; one more character cannot be started there."""
    system_limit = 32 * os.sysconf("SC_PAGE_SIZE") - 1
    assert system_limit >= MAX_COMMAND_CHARS
    longest = "echo " + "x" * (MAX_COMMAND_CHARS - len("echo "))
    with trio.fail_after(30):
        result = await call(BashTool(), tmp_path, command=longest)
    assert result.ok, result.content[-200:]
    assert result.content.startswith("x" * 100)
    beyond = "echo " + "x" * (system_limit + 1 - len("echo "))
    with pytest.raises(OSError, match="Argument list too long") as refused:
        subprocess.run(["/bin/sh", "-c", beyond], check=False)
    assert refused.value.errno == errno.E2BIG
