"""A session whose log is damaged between two loads, in process: it loads all the same, and
``session/log`` names what is wrong (G-151) instead of the load failing."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
import trio

from protocol.methods import CreateParams, RunParams
from robotad.daemon.manager import SessionManager
from robotad.daemon.operations import SessionOperations

TIMEOUT = 20.0


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _folder(path: Path) -> None:
    path.mkdir()


def _link(path: Path) -> None:
    path.symlink_to(path.with_name("elsewhere.jsonl"))
    path.with_name("elsewhere.jsonl").write_text("planted\n")


@pytest.mark.parametrize("plant", [_fifo, _folder, _link], ids=["fifo", "folder", "symlink"])
async def test_a_session_whose_log_is_not_a_file_loads_and_its_log_says_why(
    manager: SessionManager, tmp_path: Path, plant: Callable[[Path], None]
) -> None:
    """G-151: the log replaced by a FIFO, a folder or a symlink while the session was not
    loaded. Loading it looked at the log's last line to close what a stop cut off, and the
    refusal to read such a file failed the load: every call on the session answered -32603
    "internal error" for as long as the file stayed. Now the load goes on (that look is best
    effort), the planted file is left as it is, and ``session/log`` names the problem."""
    with trio.fail_after(TIMEOUT):
        info = await manager.create(CreateParams(cwd=str(tmp_path), session_id="s"))
        await SessionOperations(manager).run(RunParams(session_id="s", prompt="hello"), None)
        await manager.close(info.session_id)
        log_file = manager.logs_dir / "s.jsonl"
        log_file.unlink()
        plant(log_file)

        live = await manager.session("s")
        report = await SessionOperations(manager).log("s")

    assert live.session.get_history()[0].content == "hello"
    assert not report.complete
    assert "cannot be read" in report.problems[0].message
    assert not log_file.is_file() or log_file.is_symlink()
