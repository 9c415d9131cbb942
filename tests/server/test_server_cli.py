"""The ``robotad`` command line: options, their merging around ``run``, install-units."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import robotad.cli
from protocol.framing import DEFAULT_MAX_FRAME_BYTES


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Capture what would be served instead of serving it."""
    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(robotad.cli, "_serve", calls.append)
    return calls


def test_plain_robotad_serves_with_defaults(served: list[dict[str, Any]]) -> None:
    result = CliRunner().invoke(robotad.cli.main, [])
    assert result.exit_code == 0, result.output
    assert served == [
        {
            "socket": None,
            "log_level": "info",
            "max_message_bytes": DEFAULT_MAX_FRAME_BYTES,
            "event_buffer": 10_000,
            "ready_fd": None,
            "trace": False,
        }
    ]


def test_options_before_and_after_run_merge(served: list[dict[str, Any]]) -> None:
    args = ["--socket", "/a.sock", "--trace", "run", "--socket", "/b.sock", "--ready-fd", "5"]
    result = CliRunner().invoke(robotad.cli.main, args)
    assert result.exit_code == 0, result.output
    (options,) = served
    assert options["socket"] == Path("/b.sock")
    assert options["trace"] is True
    assert options["ready_fd"] == 5
    result = CliRunner().invoke(
        robotad.cli.main, ["--log-level", "DEBUG", "--max-message-bytes", "2048", "run"]
    )
    assert result.exit_code == 0, result.output
    assert served[1]["log_level"].lower() == "debug"
    assert served[1]["max_message_bytes"] == 2048


@pytest.mark.parametrize(
    "args",
    [
        ["--log-level", "loud"],
        ["--max-message-bytes", "0"],
        ["--event-buffer", "-1"],
        ["--ready-fd", "x"],
        ["run", "--no-such-option"],
    ],
)
def test_usage_errors_exit_2(served: list[dict[str, Any]], args: list[str]) -> None:
    result = CliRunner().invoke(robotad.cli.main, args)
    assert result.exit_code == 2
    assert served == []


def test_help_names_every_option() -> None:
    result = CliRunner().invoke(robotad.cli.main, ["--help"])
    assert result.exit_code == 0
    for option in (
        "--socket",
        "--log-level",
        "--max-message-bytes",
        "--event-buffer",
        "--ready-fd",
        "--trace",
    ):
        assert option in result.output
    assert "install-units" in result.output


@pytest.mark.parametrize("args", [["--help"], ["run", "--help"]])
def test_help_says_where_the_config_and_state_are_and_what_exits_mean(args: list[str]) -> None:
    """``robotad --help`` named no file: a new user learnt of ROBOTA_CONFIG, the config file's
    place and the exit statuses only from the README."""
    result = CliRunner().invoke(robotad.cli.main, args)
    assert result.exit_code == 0
    for words in (
        "ROBOTA_CONFIG",
        "$XDG_CONFIG_HOME/robota/config.toml",
        "ROBOTA_STATE_DIR",
        "ROBOTA_SOCKET",
        "1  could not start (a config error",
        "2  usage",
    ):
        assert words in result.output
    if args == ["--help"]:  # each command's line whole, not cut at click's 45 characters
        assert "Serve on the socket (what plain robotad does)." in result.output
        assert "Write the systemd user units." in result.output


def test_install_units_prints_the_written_paths(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import robotad.units

    written = [tmp_path / "robotad.socket", tmp_path / "robotad.service"]
    monkeypatch.setattr(robotad.units, "install_units", lambda: written)
    result = CliRunner().invoke(robotad.cli.main, ["install-units"])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [str(p) for p in written]
