"""The systemd user units (PROTOCOL.md §1): their content, `install_units`, and
``systemd-analyze verify --user`` accepting them with nothing to say."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from robotad.units import SERVICE_NAME, SOCKET_UNIT_NAME, install_units, render_units

from .conftest import PROCESS_TIMEOUT, REPO, Ctl

SYSTEMD_ANALYZE = shutil.which("systemd-analyze")
needs_systemd_analyze = pytest.mark.skipif(
    SYSTEMD_ANALYZE is None, reason="systemd-analyze is not installed (.ci/run installs it)"
)


def settings(text: str, section: str) -> dict[str, list[str]]:
    """``key -> [values]`` of one section of a unit file (comments skipped)."""
    values: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            current = line.strip("[]")
            continue
        if current == section:
            key, _, value = line.partition("=")
            values.setdefault(key, []).append(value)
    return values


def verify(*units: Path) -> subprocess.CompletedProcess[str]:
    """``systemd-analyze verify --user --man=no`` on `units`.

    It exits 0 even for unknown keys, so callers assert that stderr is empty. ``--user``
    needs XDG_RUNTIME_DIR, which tests/conftest.py points at a private temp directory.
    """
    assert SYSTEMD_ANALYZE is not None
    return subprocess.run(
        [SYSTEMD_ANALYZE, "verify", "--user", "--man=no", *map(str, units)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def executable(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o755)
    return path


# -- content -----------------------------------------------------------------------------------


def test_socket_unit_listens_privately_in_the_runtime_dir() -> None:
    socket = render_units(exec_path="/usr/bin/robotad")[SOCKET_UNIT_NAME]
    assert settings(socket, "Socket") == {
        "ListenStream": ["%t/robota/robotad.sock"],
        "SocketMode": ["0600"],
        "DirectoryMode": ["0700"],
        "RemoveOnStop": ["yes"],
    }
    assert settings(socket, "Install") == {"WantedBy": ["sockets.target"]}


def test_service_unit_is_a_watched_notify_service() -> None:
    service = settings(render_units(exec_path="/opt/r/bin/robotad")[SERVICE_NAME], "Service")
    assert service["Type"] == ["notify"]
    assert service["NotifyAccess"] == ["main"]
    assert service["ExecStart"] == ["/opt/r/bin/robotad"]
    assert service["WatchdogSec"] == ["30"]
    assert service["Restart"] == ["on-failure"]
    assert service["NoNewPrivileges"] == ["yes"]
    assert service["UMask"] == ["0077"]
    # Where robotad gets keys under systemd (issue 14, PROTOCOL §10.3): an optional file.
    assert service["EnvironmentFile"] == ["-%h/.config/robota/env"]


def test_checked_in_units_are_the_rendered_ones() -> None:
    """systemd/ holds the units as a package would install them; they cannot drift."""
    rendered = render_units(exec_path="/usr/bin/robotad")
    for name, text in rendered.items():
        assert (REPO / "systemd" / name).read_text() == text


def test_default_exec_start_is_this_installation(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without exec_path: the robotad beside sys.executable, else `python -P -m robotad`
    with this source tree on PYTHONPATH — absolute either way."""
    monkeypatch.setenv("PATH", "/nonexistent")  # no other robotad may be found
    service = settings(render_units()[SERVICE_NAME], "Service")
    sibling = Path(sys.executable).parent / "robotad"
    if sibling.is_file():  # an installed checkout (`make` does pip install -e)
        assert service["ExecStart"] == [os.path.abspath(sibling)]
        assert "Environment" not in service
    else:
        assert service["ExecStart"] == [f"{os.path.abspath(sys.executable)} -P -m robotad"]
        assert service["Environment"] == [f"PYTHONPATH={REPO}"]


def test_relative_exec_path_is_made_absolute(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    service = settings(render_units(exec_path="bin/robotad")[SERVICE_NAME], "Service")
    assert service["ExecStart"] == [str(tmp_path / "bin" / "robotad")]


@pytest.mark.parametrize("bad", ["/opt/a\nb/robotad", "/opt/x\x7f/robotad", '/opt/q"/robotad'])
def test_paths_no_unit_can_carry_are_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="robotad"):
        render_units(exec_path=bad)


# -- install_units -----------------------------------------------------------------------------


def test_install_units_writes_both_with_the_real_exec_start(tmp_path: Path) -> None:
    robotad = executable(tmp_path / "venv" / "bin" / "robotad")
    unit_dir = tmp_path / "units" / "nested"
    written = install_units(unit_dir, exec_path=str(robotad))
    assert written == [unit_dir / SOCKET_UNIT_NAME, unit_dir / SERVICE_NAME]
    service = settings((unit_dir / SERVICE_NAME).read_text(), "Service")
    assert service["ExecStart"] == [str(robotad)]
    assert (unit_dir / SOCKET_UNIT_NAME).read_text() == render_units()[SOCKET_UNIT_NAME]
    for path in written:
        assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert sorted(p.name for p in unit_dir.iterdir()) == [SERVICE_NAME, SOCKET_UNIT_NAME]


def test_install_units_replaces_old_units(tmp_path: Path) -> None:
    first, second = executable(tmp_path / "a" / "robotad"), executable(tmp_path / "b" / "robotad")
    install_units(tmp_path / "u", exec_path=str(first))
    install_units(tmp_path / "u", exec_path=str(second))
    service = settings((tmp_path / "u" / SERVICE_NAME).read_text(), "Service")
    assert service["ExecStart"] == [str(second)]
    assert len(list((tmp_path / "u").iterdir())) == 2


def test_install_units_defaults_to_the_xdg_user_unit_dir(tmp_path: Path) -> None:
    config_home = Path(os.environ["XDG_CONFIG_HOME"])  # a temp dir (tests/conftest.py)
    written = install_units(exec_path=str(executable(tmp_path / "robotad")))
    assert [p.parent for p in written] == [config_home / "systemd" / "user"] * 2


def test_a_refused_path_writes_nothing(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="control character"):
        install_units(tmp_path / "u", exec_path="/bad\npath")
    assert not (tmp_path / "u").exists()


# -- systemd-analyze verify --------------------------------------------------------------------


@needs_systemd_analyze
def test_systemd_analyze_accepts_the_installed_units(tmp_path: Path) -> None:
    written = install_units(tmp_path / "u")  # this installation's own ExecStart
    result = verify(*written)
    assert (result.returncode, result.stderr) == (0, "")


@needs_systemd_analyze
@pytest.mark.parametrize("directory", ["with space", "per%cent", "dollar$sign", "semi;colon"])
def test_systemd_analyze_reads_back_awkward_exec_paths(tmp_path: Path, directory: str) -> None:
    """Escaping: verify resolves ExecStart and complains unless it names the real file."""
    robotad = executable(tmp_path / directory / "robotad")
    result = verify(*install_units(tmp_path / "u", exec_path=str(robotad)))
    assert (result.returncode, result.stderr) == (0, "")


@needs_systemd_analyze
@hypothesis_settings(max_examples=25, deadline=None)
@given(
    st.text(
        alphabet=st.sampled_from("aZ09 %$;:@#&()[]{}!~^+=,._-é€"), min_size=1, max_size=12
    ).filter(lambda name: name not in {".", ".."})
)
def test_any_representable_exec_path_reads_back_exactly(directory: str) -> None:
    """For every directory name a unit can carry, systemd resolves ExecStart to that file."""
    with tempfile.TemporaryDirectory() as scratch:
        robotad = executable(Path(scratch) / directory / "robotad")
        result = verify(*install_units(Path(scratch) / "u", exec_path=str(robotad)))
    assert (result.returncode, result.stderr) == (0, "")


@needs_systemd_analyze
def test_verify_would_report_a_bad_unit(tmp_path: Path) -> None:
    """The check above can fail: an unknown key and a missing executable both show up."""
    written = install_units(tmp_path / "u", exec_path=str(tmp_path / "missing" / "robotad"))
    service = written[1]
    service.write_text(service.read_text().replace("[Service]\n", "[Service]\nFrobnicate=yes\n"))
    result = verify(*written)
    assert "Frobnicate" in result.stderr
    assert "missing/robotad" in result.stderr


# -- the unit's command under socket activation --------------------------------------------------


@pytest.mark.skipif(
    shutil.which("systemd-socket-activate") is None, reason="systemd-socket-activate missing"
)
def test_rendered_exec_start_serves_a_socket_activated_listener(tmp_path: Path) -> None:
    """What systemd would run: the unit's ExecStart and Environment, handed the listener as
    fd 3 by systemd-socket-activate; robotactl (never autostarting) talks to it."""
    import select
    import shlex

    service = settings(render_units()[SERVICE_NAME], "Service")
    argv = shlex.split(service["ExecStart"][0])
    path = tmp_path / "robotad.sock"
    passed = ["XDG_STATE_HOME", "XDG_CONFIG_HOME", "XDG_RUNTIME_DIR", "HOME", "PATH"]
    env_flags = [f"-E{name}" for name in passed]
    env_flags += [f"-E{assignment}" for assignment in service.get("Environment", [])]
    activator = subprocess.Popen(
        ["systemd-socket-activate", "-l", str(path), *env_flags, *argv],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
    )
    try:
        assert activator.stderr is not None
        # "Listening on PATH as 3." — the listener exists; the daemon starts on first connect.
        readable, _, _ = select.select([activator.stderr], [], [], PROCESS_TIMEOUT)
        assert readable, "systemd-socket-activate did not start listening"
        assert b"Listening on" in activator.stderr.readline()
        ctl = Ctl()
        result = ctl("--socket", str(path), "--no-autostart", "--json", "status")
        assert result.returncode == 0, result.stderr
        # systemd-socket-activate execs the command, so the daemon has its pid.
        assert json.loads(result.stdout)["pid"] == activator.pid
        stop = ctl("--socket", str(path), "shutdown", "--wait")
        assert stop.returncode == 0, stop.stderr
        assert activator.wait(PROCESS_TIMEOUT) == 0
    finally:
        if activator.poll() is None:
            activator.kill()
            activator.wait()
