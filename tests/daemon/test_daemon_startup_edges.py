"""What robotad says when it starts, or cannot (issue 14, PROTOCOL §10.3): a ``ROBOTA_CONFIG``
naming no file and a malformed ``[permissions]`` pattern stop the start with their path, the
state folder in use is logged, ``--version`` prints the version, and one lock serves a whole
socket folder (as the README says)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from robotad.server.daemon_methods import daemon_version
from tests import robotad_process
from tests.daemon_helpers import PROCESS_TIMEOUT, REPO, DaemonHome, running_daemon


def _start_refused(home: DaemonHome) -> subprocess.CompletedProcess[str]:
    """robotad started on `home`, expected to refuse at once."""
    return subprocess.run(
        [sys.executable, "-m", "robotad", "--socket", str(home.socket_path)],
        capture_output=True,
        text=True,
        env=home.environment(),
        cwd=REPO,
        timeout=PROCESS_TIMEOUT,
        check=False,
    )


def test_a_robota_config_naming_no_file_stops_the_start(tmp_path: Path) -> None:
    home = DaemonHome(tmp_path)
    home.config_path.unlink()
    result = _start_refused(home)
    assert result.returncode == 1
    assert str(home.config_path) in result.stderr
    assert "ROBOTA_CONFIG names this file, and it does not exist" in result.stderr
    assert not home.socket_path.exists()


def test_a_malformed_default_pattern_stops_the_start_with_its_toml_path(tmp_path: Path) -> None:
    home = DaemonHome(tmp_path)
    home.write_config('[permissions]\nallow = ["Read(*)", "Read("]\ndeny = ["Bash(:*)"]\n')
    result = _start_refused(home)
    assert result.returncode == 1
    assert str(home.config_path) in result.stderr
    assert "permissions.allow[1]:" in result.stderr
    assert "permissions.deny[0]:" in result.stderr
    assert "permissions.allow[0]" not in result.stderr


def test_the_state_folder_is_logged_at_start(tmp_path_factory: pytest.TempPathFactory) -> None:
    home = DaemonHome(tmp_path_factory.mktemp("logged"))
    with running_daemon(home) as daemon:
        pass  # the "serving" line may follow the ready byte: read the log once it has stopped
    serving = next(line for line in daemon.output().splitlines() if " serving " in line)
    assert f"state_dir={home.state_dir}" in serving


def _serving_line(home: DaemonHome, env: dict[str, str]) -> str:
    """The ``serving`` line of a robotad started on `home` with `env` and stopped (the
    last of `home`'s log, which every robotad started there appends to)."""
    daemon = robotad_process.start_robotad(home.socket_path, home.log_path, env=env)
    robotad_process.stop_robotad(daemon)  # the line may follow the ready byte: read it after
    return [line for line in daemon.output().splitlines() if " serving " in line][-1]


def test_the_serving_line_names_the_config_file_read_or_says_there_was_none(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Without a config file the line still said ``config=…/config.toml``, as if that file
    had been read. It now says there was none, and where robotad looked; with one, it names
    it."""
    home = DaemonHome(tmp_path_factory.mktemp("config"))
    env = home.environment()
    del env["ROBOTA_CONFIG"]  # the default place, $XDG_CONFIG_HOME/robota/config.toml
    default = Path(env["XDG_CONFIG_HOME"]) / "robota" / "config.toml"
    missing = _serving_line(home, env)
    assert f'config="none: no file at {default}, the defaults"' in missing
    default.parent.mkdir(exist_ok=True)  # robotad may have made it (its own folder)
    default.write_text("[defaults]\nmax_rounds = 3\n")
    found = _serving_line(home, env)
    assert found.endswith(f" config={default}")


def test_version_prints_the_daemon_version() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "robotad", "--version"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=PROCESS_TIMEOUT,
        check=False,
    )
    assert (result.returncode, result.stdout) == (0, f"robotad {daemon_version()}\n")


def test_one_daemon_per_socket_folder(tmp_path_factory: pytest.TempPathFactory) -> None:
    home = DaemonHome(tmp_path_factory.mktemp("lock"))
    with running_daemon(home) as daemon:
        other = subprocess.run(
            [
                sys.executable,
                "-m",
                "robotad",
                "--socket",
                str(home.socket_path.with_name("b.sock")),
            ],
            capture_output=True,
            text=True,
            env=home.environment(),
            cwd=REPO,
            timeout=PROCESS_TIMEOUT,
            check=False,
        )
    assert other.returncode == 1
    assert f"pid {daemon.pid}" in other.stderr


def test_a_provider_table_without_a_name_stops_the_start(tmp_path: Path) -> None:
    """``[providers.""]`` was accepted at start; robotad now refuses it as it refuses any
    other problem of its file: exit 1, the file and the table's path named, nothing bound."""
    home = DaemonHome(tmp_path)
    home.write_config('[providers.""]\nkind = "openai"\n')
    result = _start_refused(home)
    assert result.returncode == 1
    assert f"invalid configuration {home.config_path}:" in result.stderr
    assert 'providers."": a provider\'s name cannot be empty' in result.stderr
    assert not home.socket_path.exists()


def test_a_base_url_the_http_client_refuses_stops_the_start(tmp_path: Path) -> None:
    """``base_url = "http://[::1/v1"`` (a bracket left open) passed the start; the first
    ``robotactl new`` on that provider then got -32603 and robotad's log a traceback. Now
    the start stops on it, at its key, as on any other problem of the file."""
    home = DaemonHome(tmp_path)
    home.write_config(
        'default_provider = "local"\n[providers.local]\nkind = "openai"\n'
        'base_url = "http://[::1/v1"\n'
    )
    result = _start_refused(home)
    assert result.returncode == 1
    assert f"invalid configuration {home.config_path}:" in result.stderr
    assert "providers.local.base_url: names no valid host" in result.stderr
    assert "Traceback" not in result.stderr
    assert not home.socket_path.exists()
