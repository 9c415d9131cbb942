"""robotactl with prompts and sessions larger than one reply of robotad carries (16 MiB): the
listings stay usable and an export that cannot fit says what to do instead."""

from __future__ import annotations

import json
from pathlib import Path

from protocol.methods import SearchResult, SessionList
from robotactl.exit_codes import ExitCode

from .conftest import Ctl, RunningDaemon
from .ctl_helpers import decoded, sock

#: Each prompt fits a request; two of them (and the record holding them) do not fit a reply.
PROMPT_CHARS = 9_000_000


def test_huge_prompts_leave_ls_and_history_working_and_export_says_why_not(
    ctl: Ctl, robotad: RunningDaemon, tmp_path: Path
) -> None:
    """Two 9 MB prompts used to make ``ls`` (which asks history/search for 5,000 prompts) and
    ``history`` fail for good — the reply was larger than a frame. Now a search shows a
    prompt that long shortened with a marker, and ``export`` of a session over the frame
    limit fails saying how to export it."""
    create = {
        "cwd": str(tmp_path),
        "sessionId": "big",
        "autoCompactThreshold": False,
        "script": [{"text": "ok"}, {"text": "ok"}],
    }
    made = ctl(*sock(robotad), "call", "session/create", "-", input=json.dumps(create))
    assert made.returncode == 0, made.stderr
    for letter in "AB":
        run = {"sessionId": "big", "prompt": letter * PROMPT_CHARS}
        ran = ctl(*sock(robotad), "call", "session/run", "-", input=json.dumps(run))
        assert ran.returncode == 0, ran.stderr

    listed = ctl(*sock(robotad), "ls", NO_COLOR="1")
    assert listed.returncode == 0, listed.stderr
    assert "big" in listed.stdout
    assert [
        s.session_id for s in decoded(ctl(*sock(robotad), "--json", "ls"), SessionList).sessions
    ] == ["big"]
    found = decoded(ctl(*sock(robotad), "--json", "history"), SearchResult)
    assert [e.prompt[0] for e in found.entries] == ["B", "A"]
    for entry in found.entries:
        assert entry.prompt.endswith(
            f"… [prompt shortened: {PROMPT_CHARS - 65_536} more characters]"
        )
    assert ctl(*sock(robotad), "history", NO_COLOR="1").returncode == 0

    exported = ctl(*sock(robotad), "export", "-s", "big", "-o", str(tmp_path / "big.json"))
    assert exported.returncode == ExitCode.ERROR
    assert "more than one reply of robotad carries (16 MiB)" in exported.stderr
    assert "robotactl compact -s big" in exported.stderr
    assert not (tmp_path / "big.json").exists()
