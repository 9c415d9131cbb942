"""`tests.no_skips`: under ``ROBOTA_NO_SKIPS=1`` (CI) a skip fails the run, naming its reason;
otherwise a skip stays a skip. Run on a throwaway test file in a child pytest."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.robotad_process import PROCESS_TIMEOUT, child_environment

TESTS = """
import pytest

def test_passes():
    pass

@pytest.mark.skipif(True, reason="the frobnicator is not installed")
def test_marked():
    pass

def test_skips_inside():
    pytest.skip("no frobnicator here either")

@pytest.mark.xfail(reason="known")
def test_expected_failure():
    assert False
"""


def run_child(folder: Path, no_skips: str | None) -> subprocess.CompletedProcess[str]:
    (folder / "test_child.py").write_text(TESTS)
    env = child_environment()
    env.pop("ROBOTA_NO_SKIPS", None)
    if no_skips is not None:
        env["ROBOTA_NO_SKIPS"] = no_skips
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "tests.no_skips",
            "-p",
            "no:cacheprovider",
            "-q",
            "-rA",
            "--rootdir",
            str(folder),
            str(folder / "test_child.py"),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=folder,
        timeout=PROCESS_TIMEOUT,
    )


def test_skips_fail_under_no_skips(tmp_path: Path) -> None:
    done = run_child(tmp_path, "1")
    assert done.returncode == 1, done.stdout
    summary = done.stdout.splitlines()[-1]
    assert "1 passed" in summary
    assert "1 xfailed" in summary
    assert "skipped" not in summary
    assert "the frobnicator is not installed" in done.stdout
    assert "no frobnicator here either" in done.stdout


@pytest.mark.parametrize("no_skips", [None, "0"])
def test_skips_stay_skips_otherwise(tmp_path: Path, no_skips: str | None) -> None:
    done = run_child(tmp_path, no_skips)
    assert done.returncode == 0, done.stdout
    assert "1 passed, 2 skipped, 1 xfailed" in done.stdout.splitlines()[-1]
