"""The retry windows robotad keeps are written down where clients read them: the protocol
reference and the README say the numbers the code uses."""

from __future__ import annotations

from robotad.daemon.events import DEFAULT_BUFFER_SIZE
from robotad.daemon.turns import DEFAULT_RETAINED_TURNS
from robotad.session.recovery.retention import JOURNALS_KEPT
from tests.robotad_process import REPO


def test_the_reference_and_readme_state_the_windows_the_daemon_keeps() -> None:
    reference = (REPO / "protocol" / "REFERENCE.md").read_text()
    readme = " ".join((REPO / "README.md").read_text().split())
    assert f"remembers the last {DEFAULT_RETAINED_TURNS} of each session" in reference
    assert f"journals of the last {JOURNALS_KEPT} executions" in reference
    assert f"the last {DEFAULT_BUFFER_SIZE:,} of the session" in reference
    assert f"the last {DEFAULT_BUFFER_SIZE:,} events" in readme
    assert f"the last {DEFAULT_RETAINED_TURNS} `turnId`s" in readme
    assert f"the journals of the last {JOURNALS_KEPT} executions" in readme
