"""robotactl's usage edges without a daemon (issue 14): ``rm`` names its session like the
other commands, usage errors are exit 2, and with ``--json`` every error is JSON on stderr."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from robotactl.cli import RpcFailed, cli
from robotactl.exit_codes import ExitCode
from robotactl.usage import as_usage_error


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
