"""SIGKILL at random moments during a soak: nothing acknowledged is lost, nothing runs twice.

The soak of `soak_workload` runs with a killer (`CRASH_SHAPES`: 3 kills reduced, 20 full)
that SIGKILLs the daemon at random moments — mid-turn, mid-approval, mid-write — and restarts
it; clients reconnect and carry on. The kill moments come from a seed printed with the
result (``ROBOTA_SOAK_SEED=N`` replays one). Checked:

- while the daemon is dead, every stored record decodes valid and every journal and log
  decodes once the torn final line an interrupted append may leave is set aside (G-007);
- after each restart, every wait a client was told about (and had not answered yet) is still
  listed by session/pending with the same requests (G-075, G-088), and clients resume it;
- after the run: records valid, journals and log lines decode (what a kill cut off — a
  provider call, a tool call — is printed, not failed), nothing pending, and no Bash effect
  ran more often than it was approved — an effect whose outcome a kill made uncertain is
  never re-run (G-094); such resumes are refused, listed, and their executions abandoned;
- no lost response on a live connection, no unexpected error, every event stream in order
  for the life of its connection.
"""

from __future__ import annotations

import os
import random

import pytest
import trio

from tests.system.daemon_process import DaemonProcess, daemon_home, soak_scale
from tests.system.soak_checks import check_settled, log_gaps
from tests.system.soak_plan import CRASH_SHAPES
from tests.system.soak_workload import SoakRun, run_soak, still_pending

#: Absolute bound on the whole run, a guard against hangs, not a timing target.
CRASH_TIMEOUT = {"full": 1800.0, "reduced": 300.0}


def crash_seed() -> int:
    configured = os.environ.get("ROBOTA_SOAK_SEED")
    return int(configured) if configured else random.randrange(2**32)


@pytest.mark.timeout(CRASH_TIMEOUT["full"] + 120)  # the default 120 s is for one test, not a soak
async def test_sigkill_at_random_moments_loses_nothing_and_repeats_nothing() -> None:
    """G-007, G-075, G-088, G-094: see the module docstring."""
    scale = soak_scale()
    shape = CRASH_SHAPES[scale]
    seed = crash_seed()
    with daemon_home() as home:
        daemon = DaemonProcess(home).start()
        try:
            run = SoakRun(home, daemon, shape, seed=seed)
            stats = await run_soak(run, timeout=CRASH_TIMEOUT[scale])
            with trio.fail_after(30):
                left_pending = await still_pending(run)
            alive = daemon.alive()
        finally:
            daemon.stop()
        problems = check_settled(
            home, stats.completed_by_session, stats.granted_effects, exact=False
        )
        gaps = log_gaps(home)
    print(
        f"seed {seed}: {stats.kills} kills, {stats.turns_completed} turns, "
        f"{len(stats.compactions)} compactions, "
        f"{stats.interrupted_calls} calls cut, {stats.resumes + stats.helper_resumes} resumes, "
        f"{len(stats.refused)} executions refused resume, {len(stats.abandoned)} abandoned, "
        f"{stats.settled} waits answered after the clients left, "
        f"{stats.waits_checked_after_restart} acknowledged waits found pending after a restart"
    )
    for failure in stats.resume_failures:
        print("  refused resume:", failure)
    for gap in gaps:
        print("  log left open by a kill:", gap)
    assert alive
    assert stats.kills == shape.kills
    assert stats.storage_faults == [], f"seed {seed}"
    assert stats.lost_responses == [], f"seed {seed}"
    assert stats.anomalies == [], f"seed {seed}"
    assert stats.stream_faults == [], f"seed {seed}"
    assert problems == [], f"seed {seed}"
    assert left_pending == {}, f"seed {seed}"
    assert stats.turns_completed >= shape.turns
    assert stats.waits_checked_after_restart > 0, "no kill fell on an acknowledged wait"
