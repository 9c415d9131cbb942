"""The soak: many clients × many turns on shared sessions, with tool calls and approvals.

``make test`` runs the reduced shape, ``make soak`` (``ROBOTA_SOAK=full``) the full one
(`soak_workload.SOAK_SHAPES`). One real daemon; afterwards:

- zero lost responses and zero unexpected errors (SessionBusy and ExecutionPending refusals
  are expected between clients sharing a session, and counted);
- every subscriber saw its session's events with ``seq`` strictly increasing by one, from its
  subscription to the session's last event, no gap unless an overflow was announced;
- every turn completed; turns that asked for approval waited and were resumed (G-073, G-076),
  identical answers from two clients were idempotent (G-084);
- every record decodes valid with ``turnCount`` equal to the completed turns (G-010), every
  log replays complete (G-145, G-151), every journal decodes, nothing is left pending;
- every granted effect ran exactly once, denied ones never (G-083, G-084);
- histories were compacted under that load (each session's context window is small enough
  that it compacts every few dozen turns, as a long agent session's does);
- the daemon's RSS grew by less than 10% from the first quarter of the run to the last (full
  size only: the reduced run is too short to tell growth from warm-up).
"""

from __future__ import annotations

import pytest
import trio

from tests.system.daemon_process import DaemonProcess, daemon_home, soak_scale
from tests.system.soak_checks import check_settled
from tests.system.soak_plan import SOAK_SHAPES, SoakStats
from tests.system.soak_workload import SoakRun, run_soak, still_pending

#: Absolute bound on the whole soak, a guard against hangs, not a timing target.
SOAK_TIMEOUT = {"full": 1800.0, "reduced": 300.0}


def summary(stats: SoakStats) -> str:
    growth = stats.rss_growth()
    return (
        f"turns {stats.turns_completed} (waited {stats.turns_waited}) "
        f"in {stats.wall_seconds:.1f}s; "
        f"busy {stats.busy_refusals}, pending {stats.pending_refusals}, "
        f"resumes {stats.resumes}+{stats.helper_resumes} helper "
        f"({stats.idempotent_redeliveries} redelivered); events {stats.events}; "
        f"compactions {len(stats.compactions)}; "
        f"rss {stats.rss_start_kib} idle, {stats.rss_kib[:1]}→{stats.rss_kib[-1:]} KiB "
        f"growth {'n/a' if growth is None else f'{growth:.1%}'}"
    )


@pytest.mark.timeout(SOAK_TIMEOUT["full"] + 120)  # the default 120 s cut `make soak` short
async def test_soak_many_clients_shared_sessions_with_approvals() -> None:
    """G-010, G-073, G-076, G-084, G-145, G-151: see the module docstring."""
    scale = soak_scale()
    shape = SOAK_SHAPES[scale]
    with daemon_home() as home:
        daemon = DaemonProcess(home).start()
        try:
            run = SoakRun(home, daemon, shape, seed=1)
            stats = await run_soak(run, timeout=SOAK_TIMEOUT[scale])
            with trio.fail_after(30):
                left_pending = await still_pending(run)
            alive = daemon.alive()
        finally:
            daemon.stop()
        print(summary(stats))
        problems = check_settled(
            home, stats.completed_by_session, stats.granted_effects, exact=True
        )
        log = daemon.output()
    assert alive, log[-4000:]
    assert "Traceback" not in log, log[-4000:]
    assert stats.lost_responses == []
    assert stats.anomalies == []
    assert stats.stream_faults == []
    assert problems == []
    assert left_pending == {}
    assert stats.turns_completed == shape.turns, summary(stats)
    assert stats.turns_waited > 0, "no turn asked for approval: approvals were not exercised"
    assert stats.helper_resumes > 0, "no client answered another client's wait"
    assert stats.idempotent_redeliveries > 0, "no answer was delivered twice"
    assert stats.approved
    assert stats.denied
    assert stats.text_deltas > 0
    assert stats.compactions, "no history compacted: the sessions' context window is too wide"
    growth = stats.rss_growth()
    if scale == "full":
        assert growth is not None
        assert growth < 0.10, summary(stats)
