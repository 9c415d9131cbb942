"""``robotactl run --max-rounds N`` against a real robotad: the limit reaches the daemon, the
turn completes (exit 0) with ``stopReason: "maxRounds"``, and a notice says why it stopped."""

from __future__ import annotations

from pathlib import Path

from protocol.methods import HistoryResult
from protocol.shapes import TurnCompleted
from robotactl.exit_codes import ExitCode

from .conftest import Ctl, RunningDaemon
from .ctl_helpers import decoded, new_session, sock


def test_run_max_rounds_stops_the_turn_and_says_so(
    ctl: Ctl, robotad: RunningDaemon, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "a.txt").write_text("a\n")
    read = {"toolCalls": [{"name": "Read", "arguments": {"file_path": str(work / "a.txt")}}]}
    script = [read, read, read, {"text": "done"}]
    session_id = new_session(ctl, robotad, work, script)

    result = ctl(*sock(robotad), "--json", "run", "-s", session_id, "--max-rounds", "2", "go")

    assert result.returncode == ExitCode.COMPLETED, result.stderr
    completed = decoded(result, TurnCompleted)
    assert completed.stop_reason == "maxRounds"
    assert result.stderr == ""  # under --json, the result says it
    history = decoded(ctl(*sock(robotad), "--json", "show", "-s", session_id), HistoryResult)
    assert [m.role for m in history.messages] == ["user", "assistant", "tool", "assistant", "tool"]
    other = new_session(ctl, robotad, work, script)
    said = ctl(*sock(robotad), "run", "-s", other, "--max-rounds", "2", "go")
    assert said.returncode == ExitCode.COMPLETED, said.stderr
    assert "round limit" in said.stderr


def test_run_max_rounds_below_one_is_a_usage_error(
    ctl: Ctl, robotad: RunningDaemon, tmp_path: Path
) -> None:
    result = ctl(*sock(robotad), "run", "-s", "any", "--max-rounds", "0", "go")
    assert result.returncode == ExitCode.USAGE
    assert "--max-rounds" in result.stderr
