"""robotactl's usage edges without a daemon (issue 14): ``rm`` names its session like the
other commands, usage errors are exit 2, and with ``--json`` every error is JSON on stderr."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from robotactl.cli import RpcFailed, cli
from robotactl.exit_codes import ExitCode
from robotactl.usage import as_usage_error
from tests.robotad_process import PROCESS_TIMEOUT, REPO, child_environment


def test_rm_refuses_no_session_and_two_different_ones_as_usage(tmp_path: Path) -> None:
    socket = str(tmp_path / "none.sock")
    nothing = CliRunner().invoke(cli, ["--socket", socket, "--no-autostart", "rm"])
    assert nothing.exit_code == ExitCode.USAGE
    assert "robotactl rm -s ID" in nothing.stderr
    both = CliRunner().invoke(cli, ["--socket", socket, "--no-autostart", "rm", "a", "-s", "b"])
    assert both.exit_code == ExitCode.USAGE


def test_a_json_run_prints_a_usage_error_as_json_on_stderr() -> None:
    result = CliRunner().invoke(cli, ["--json", "new", "--idle-timeout", "soon"])
    assert result.exit_code == ExitCode.USAGE
    assert result.stdout == ""
    error = json.loads(result.stderr)["error"]
    assert error["usage"] is True
    assert "--idle-timeout" in error["message"]


def test_a_json_run_prints_a_failure_as_json_on_stderr(tmp_path: Path) -> None:
    socket = str(tmp_path / "none.sock")
    result = CliRunner().invoke(cli, ["--socket", socket, "--no-autostart", "--json", "ls"])
    assert result.exit_code == ExitCode.ERROR
    assert result.stdout == ""
    assert "robotad is not running" in json.loads(result.stderr)["error"]["message"]


def test_invalid_params_from_options_become_usage_errors_others_stay() -> None:
    issues = [{"path": "$.permissions.allow[1]", "message": "unbalanced parentheses"}]
    typed = as_usage_error(
        RpcFailed(-32602, "invalid params", {"issues": issues}),
        {"$.permissions.allow": "--allow"},
    )
    assert typed.exit_code == ExitCode.USAGE
    assert typed.format_message() == "--allow ($.permissions.allow[1]): unbalanced parentheses"
    other = RpcFailed(-32602, "invalid params", {"issues": [{"path": "$.cwd", "message": "x"}]})
    assert as_usage_error(other, {"$.permissions.allow": "--allow"}) is other


# -- found by a review of the command line (session 8) -----------------------------------------


def _usage(args: list[str], env: dict[str, str] | None = None) -> str:
    result = CliRunner().invoke(
        cli, ["--no-autostart", "--socket", "/nonexistent/s", *args], env=env
    )
    assert result.exit_code == ExitCode.USAGE, result.output
    return result.stderr


def test_a_bad_session_id_is_a_usage_error_quoting_it_and_its_source() -> None:
    """Before, the daemon answered -32602 (exit 1) with its pattern, printed twice, and
    neither the value nor where it came from."""
    assert "'a/b': session id must be one safe path segment" in _usage(["show", "-s", "a/b"])
    assert "session id is longer than 128 characters" in _usage(["show", "-s", "x" * 200])
    assert "(from ROBOTA_SESSION)" in _usage(["show"], env={"ROBOTA_SESSION": "bad/x"})
    for args in (["new", "--id", ".."], ["fork", "--id", "a/b"], ["import", "-", "--id", "a/b"]):
        assert "safe path segment" in _usage(args)
    assert "safe path segment" in _usage(["rm", ".."])
    assert "safe path segment" in _usage(["mcp", "-s", "a b"])


def test_an_empty_session_or_turn_id_is_refused_not_taken_for_none() -> None:
    """``-s "$SID"`` with SID unset must not act on this folder's session, nor
    ``--turn-id "$TID"`` start a new turn each time."""
    for command in ("show", "abort", "approve", "rm", "mcp", "export"):
        assert "session id is empty" in _usage([command, "-s", ""])
    assert "--turn-id" in _usage(["run", "-s", "a", "--turn-id", "", "hi"])


def test_seconds_that_are_not_finite_are_usage_errors() -> None:
    """nan and inf went through click's FloatRange: a traceback, or a JSON null the user never
    typed."""
    for value in ("nan", "inf", "1e400"):
        assert "not a finite number of seconds" in _usage(["new", "--idle-timeout", value])
        assert "not a finite number of seconds" in _usage(["shutdown", "--grace", value])


def test_export_to_dash_is_stdout_and_to_nothing_is_a_usage_error() -> None:
    assert "give a file name, or - for stdout" in _usage(["export", "-s", "a", "-o", ""])
    from robotactl.commands.records import _output_path

    assert _output_path("-", None, None) is None  # type: ignore[arg-type]


def test_global_usage_errors_are_json_with_json() -> None:
    """A missing or unknown command, an unknown option, an option without its value, a bad
    ROBOTA_NO_AUTOSTART: all before any command ran, all plain text before."""
    cases: list[tuple[list[str], dict[str, str]]] = [
        (["--json", "nosuch"], {}),
        (["--json"], {}),
        (["--json", "--bogus", "status"], {}),
        (["--json", "--socket"], {}),
        (["--json", "ls"], {"ROBOTA_NO_AUTOSTART": "2"}),
    ]
    for args, env in cases:
        result = CliRunner().invoke(cli, args, env=env)
        assert result.exit_code == ExitCode.USAGE, args
        assert result.stdout == ""
        assert json.loads(result.stderr)["error"]["usage"] is True, args


def test_an_aborted_turn_under_json_carries_its_code() -> None:
    """Every other daemon error under --json has its code; an aborted turn had only a
    message, whether Ctrl-C or `robotactl abort` stopped it."""
    from robotactl.commands.turns import TurnWasAborted

    error = TurnWasAborted("s1").document()["error"]
    assert error["code"] == -32006
    assert error["data"] == {"sessionId": "s1"}
    assert error["message"].startswith("the turn in session s1 was aborted")
    assert TurnWasAborted("s1").exit_code == ExitCode.ABORTED


def test_an_empty_socket_is_a_usage_error_on_both_sides() -> None:
    """robotactl took it for the default socket; robotad for the current folder."""
    import robotad.cli

    client = CliRunner().invoke(cli, ["--socket", "", "status"])
    assert client.exit_code == ExitCode.USAGE
    assert "--socket" in client.stderr
    daemon = CliRunner().invoke(robotad.cli.main, ["--socket", ""])
    assert daemon.exit_code == 2
    assert "is empty" in daemon.output


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["status"], "Aborted!"),  # the quick path
        (["--json", "status"], '{"error": {"message": "interrupted"}}'),
        (["ls"], "Aborted!"),  # the full client
        (["--json", "ls"], '{"error": {"message": "interrupted"}}'),
    ],
)
def test_ctrl_c_while_robotad_does_not_answer_is_said_plainly(
    tmp_path: Path, argv: list[str], expected: str
) -> None:
    """A daemon that accepts and never answers (stopped, or stuck): Ctrl-C ends any command
    with click's words or, with ``--json``, one JSON line; never a traceback."""
    socket_dir = tmp_path / "run"
    socket_dir.mkdir(mode=0o700)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(socket_dir / "robotad.sock"))
    listener.listen(8)
    try:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "robotactl",
                "--socket",
                str(socket_dir / "robotad.sock"),
                *argv,
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=child_environment(),
            cwd=REPO,
        )
        listener.settimeout(PROCESS_TIMEOUT)
        accepted, _ = listener.accept()  # it asked; nobody answers
        try:
            time.sleep(0.2)  # into its wait for the reply
            process.send_signal(signal.SIGINT)
            stdout, stderr = process.communicate(timeout=PROCESS_TIMEOUT)
        finally:
            accepted.close()
    finally:
        listener.close()
    assert process.returncode == ExitCode.ERROR, stderr
    assert "Traceback" not in stderr.decode()
    assert stderr.decode().strip().splitlines()[-1] == expected
    assert stdout == b""


@pytest.mark.parametrize(
    ("argv", "hint"),
    [
        (["ls", "--json"], "given before the command: robotactl --json ls"),
        (
            ["status", "--socket", "/tmp/x"],
            "given before the command: robotactl --socket PATH status",
        ),
        (["new", "--no-autostart"], "given before the command: robotactl --no-autostart new"),
    ],
)
def test_a_global_option_after_the_command_says_where_it_goes(argv: list[str], hint: str) -> None:
    result = CliRunner().invoke(cli, argv)
    assert result.exit_code == ExitCode.USAGE
    assert f"No such option '{argv[1]}'. It is a global option, {hint}" in result.output


def test_the_mcp_table_names_as_many_tools_as_fit_and_counts_the_rest() -> None:
    """server-everything's dozen tools, prefix and all, made one row of 450 characters."""
    from robotactl.commands.mcp import TOOLS_WIDTH, tools_cell

    many = [f"mcp__every__{name}" for name in ("echo", "add", "longRunningOperation")]
    many += [f"mcp__every__tool{index}" for index in range(10)]
    cell = tools_cell("every", many)
    assert cell.startswith("echo, add, ")
    assert len(cell) <= TOOLS_WIDTH + len(", … (+99 more)")
    shown = cell.split(", … ")[0].split(", ")
    assert cell.endswith(f"(+{len(many) - len(shown)} more)")
    assert tools_cell("every", many[:2]) == "echo, add"
    assert tools_cell("every", []) == "-"
    fits = ["a" * 20, "b" * 20, "c"]  # the count of one more would not have fitted
    assert tools_cell("every", fits) == ", ".join(fits)


@pytest.mark.parametrize(
    "argv", [["run", "-"], ["call", "daemon/status", "-"], ["--json", "run", "-s", "x", "-"]]
)
def test_standard_input_that_is_not_utf8_is_said_in_a_line_in_a_utf8_locale(
    tmp_path: Path, argv: list[str]
) -> None:
    """In a UTF-8 locale Python reads stdin strictly: `run -` and `call METHOD -` given bytes
    that are not UTF-8 died with a UnicodeDecodeError traceback (the C locale's surrogates
    were already said in a line). Stdin is read before connecting: no daemon needed."""
    process = subprocess.run(
        [sys.executable, "-m", "robotactl", "--socket", str(tmp_path / "none.sock"), *argv],
        input=b"caf\xe9 \xff\n",
        capture_output=True,
        env=child_environment(PYTHONIOENCODING="utf-8:strict", ROBOTA_NO_AUTOSTART="1"),
        cwd=REPO,
        timeout=PROCESS_TIMEOUT,
        check=False,
    )
    stderr = process.stderr.decode()
    assert process.returncode == ExitCode.USAGE, stderr
    assert "Traceback" not in stderr
    assert process.stdout == b""
    message = "standard input, or a file it read, is not valid UTF-8 text"
    if "--json" in argv:
        assert message in json.loads(stderr)["error"]["message"]
    else:
        assert stderr.startswith(f"robotactl: {message}")
