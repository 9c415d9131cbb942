"""Scale, reduced: the correctness side of ``bench/scale.py`` (which prints the figures).

No timing is asserted here. With many idle sessions loaded, all of them are listed and
counted as loaded; with many records stored before the daemon starts, ``session/list`` shows
every one of them, valid, newest ``updatedAt`` first (G-006); a long stored session opens with
its full history, runs a turn, compacts to a short history and is stored valid again (G-010,
G-175). Sizes: `SCALE_SIZES` (``ROBOTA_SOAK=full`` runs the bench's own sizes).
"""

from __future__ import annotations

import trio

from tests.system.daemon_process import daemon_home, soak_scale
from tests.system.scale_workload import idle_sessions, long_session, stored_sessions

SCALE_SIZES = {
    "reduced": {"idle": 40, "stored": 300, "long": 2_000},
    "full": {"idle": 1_000, "stored": 10_000, "long": 50_000},
}
SCALE_TIMEOUT = {"reduced": 60.0, "full": 600.0}


async def test_many_idle_sessions_are_all_loaded_and_listed() -> None:
    count = SCALE_SIZES[soak_scale()]["idle"]
    with daemon_home() as home, trio.fail_after(SCALE_TIMEOUT[soak_scale()]):
        figures = await idle_sessions(home, count)
    assert figures.listed == count
    assert figures.loaded == count


async def test_every_stored_session_is_listed_newest_first() -> None:
    """G-006: every stored record is listed, valid, newest updatedAt first."""
    count = SCALE_SIZES[soak_scale()]["stored"]
    with daemon_home() as home, trio.fail_after(SCALE_TIMEOUT[soak_scale()]):
        figures = await stored_sessions(home, count)
    assert figures.listed == count
    assert figures.statuses == {"ok": count}
    assert figures.newest_first


async def test_a_long_session_opens_runs_compacts_and_stays_valid() -> None:
    """G-010, G-175: the whole history loads, a turn adds to it, compaction shrinks it to the
    system part and the summary, and the stored record stays valid."""
    messages = SCALE_SIZES[soak_scale()]["long"]
    with daemon_home() as home, trio.fail_after(SCALE_TIMEOUT[soak_scale()]):
        figures = await long_session(home, messages)
    assert figures.opened_count == messages
    assert figures.run_status == "completed"
    assert figures.compacted
    assert figures.history_after < 10
    assert figures.record_valid
