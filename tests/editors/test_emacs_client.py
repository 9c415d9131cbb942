"""The Emacs client (editors/emacs/robota.el), driven headless against a real robotad.

Each test runs ``emacs --batch -Q`` as a subprocess with an absolute timeout: byte-compiling
the package (no warnings allowed), checkdoc, and the ERT suite in tests/editors/robota-test.el
against a live ``python -m robotad`` on a private socket (PROTOCOL §1: Emacs's built-in
jsonrpc.el, with Content-Length framing, works unmodified). The full-turn ERT test runs a
whole scripted turn through the session methods; no ERT test may skip. Everything skips
cleanly when ``emacs`` is not installed (`.ci/run` installs it).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.robotad_process import RobotadProcess, child_environment, start_robotad, stop_robotad

EMACS = shutil.which("emacs")
pytestmark = pytest.mark.skipif(
    EMACS is None, reason="emacs is not installed (apt-get install emacs-nox)"
)

REPO = Path(__file__).resolve().parents[2]
CLIENT = REPO / "editors" / "emacs" / "robota.el"
ERT_SUITE = REPO / "tests" / "editors" / "robota-test.el"
#: Absolute bound on one Emacs run (the ERT suite itself takes a few seconds).
EMACS_TIMEOUT = 120.0
#: The ERT summary line, e.g. "Ran 9 tests, 9 results as expected, 0 unexpected, 1 skipped".
SUMMARY = re.compile(
    r"^Ran (?P<ran>\d+) tests?, (?P<expected>\d+) results? as expected, "
    r"(?P<unexpected>\d+) unexpected(?:, (?P<skipped>\d+) skipped)?",
    re.MULTILINE,
)


def run_emacs(*args: str, home: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """``emacs --batch -Q ARGS`` from the repository root, with a private HOME."""
    assert EMACS is not None
    return subprocess.run(
        [EMACS, "--batch", "-Q", *args],
        capture_output=True,
        text=True,
        errors="replace",
        env=child_environment(HOME=str(home), **env),
        cwd=REPO,
        timeout=EMACS_TIMEOUT,
        check=False,
    )


def run_ert(selector: str, daemon: RobotadProcess, home: Path) -> subprocess.CompletedProcess[str]:
    """Run the ERT tests matching `selector` against `daemon`."""
    return run_emacs(
        "-L",
        str(CLIENT.parent),
        "-l",
        str(CLIENT),
        "-l",
        str(ERT_SUITE),
        "--eval",
        f"(ert-run-tests-batch-and-exit '{selector})",
        home=home,
        ROBOTA_SOCKET=str(daemon.socket_path),
        ROBOTA_TEST_DAEMON_PID=str(daemon.pid),
    )


def summary(result: subprocess.CompletedProcess[str]) -> dict[str, int]:
    """ERT's closing counts; fails the test with Emacs's output when there are none."""
    match = SUMMARY.search(result.stdout + result.stderr)
    assert match, f"no ERT summary:\n{result.stdout}\n{result.stderr}"
    return {name: int(value or 0) for name, value in match.groupdict().items()}


@pytest.fixture
def daemon(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> Iterator[RobotadProcess]:
    """A live robotad on a private short-path socket for the test's duration."""
    socket_dir = tmp_path_factory.mktemp("sock")
    socket_dir.chmod(0o700)
    running = start_robotad(socket_dir / "robotad.sock", tmp_path / "robotad.log")
    try:
        yield running
    finally:
        stop_robotad(running)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """An empty HOME so no user configuration can leak into Emacs."""
    path = tmp_path / "home"
    path.mkdir()
    return path


def test_client_byte_compiles_without_warnings(tmp_path: Path, home: Path) -> None:
    """robota.el and its ERT suite compile with every byte-compiler warning an error."""
    for source in (CLIENT, ERT_SUITE):
        shutil.copy(source, tmp_path / source.name)
    result = run_emacs(
        "-L",
        str(tmp_path),
        "--eval",
        "(setq byte-compile-error-on-warn t)",
        "-f",
        "batch-byte-compile",
        str(tmp_path / CLIENT.name),
        str(tmp_path / ERT_SUITE.name),
        home=home,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "Warning" not in output, output
    assert (tmp_path / "robota.elc").is_file()
    assert (tmp_path / "robota-test.elc").is_file()


def test_client_passes_checkdoc(home: Path) -> None:
    """robota.el follows Emacs's documentation conventions (checkdoc reports nothing)."""
    result = run_emacs(
        "--eval",
        "(progn (require 'checkdoc)"
        " (setq checkdoc-spellcheck-documentation-flag nil)"
        f' (checkdoc-file "{CLIENT}"))',
        home=home,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "robota.el:" not in output, output


def test_client_installs_as_a_package_with_autoloads(tmp_path: Path, home: Path) -> None:
    """package-install-file accepts the headers (Package-Requires met by the built-in
    jsonrpc), and after package-initialize the commands and the prefix map are autoloaded
    without loading robota.el itself."""
    elpa = tmp_path / "elpa"
    setup = f'(progn (require \'package) (setq package-user-dir "{elpa}") (package-initialize)'
    installed = run_emacs("--eval", f'{setup} (package-install-file "{CLIENT}"))', home=home)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    probe = run_emacs(
        "--eval",
        f"{setup}"
        ' (global-set-key (kbd "C-c r") \'robota-command-map)'
        ' (princ (format "%S %S %S\\n"'
        " (autoloadp (symbol-function 'robota-send-prompt))"
        ' (key-binding (kbd "C-c r p"))'
        " (featurep 'robota))))",
        home=home,
    )
    assert probe.returncode == 0, probe.stdout + probe.stderr
    assert probe.stdout.split() == ["t", "robota-send-prompt", "nil"], probe.stdout


def test_ert_suite_against_live_daemon(daemon: RobotadProcess, home: Path) -> None:
    """Connecting, initialize, daemon/status, errors, reconnecting, event rendering and
    approvals: every ERT test but the full turn passes against a real robotad."""
    result = run_ert("(not (tag full-turn))", daemon, home)
    counts = summary(result)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert counts["unexpected"] == 0, output
    assert counts["skipped"] == 0, output
    assert counts["ran"] >= 10, output
    assert daemon.process.poll() is None, daemon.output()


def test_ert_full_turn_against_live_daemon(daemon: RobotadProcess, home: Path) -> None:
    """A scripted session from Emacs: streamed text, an approval answered yes through
    y-or-n-p, the file written, the final reply streamed."""
    result = run_ert("(tag full-turn)", daemon, home)
    counts = summary(result)
    output = result.stdout + result.stderr
    assert counts["ran"] == 1, output
    assert counts["skipped"] == 0, output  # robotad serves session/create: nothing may skip
    assert result.returncode == 0, output
    assert counts["expected"] == 1, output
    assert daemon.process.poll() is None, daemon.output()
