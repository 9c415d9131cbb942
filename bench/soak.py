"""The soak and the crash soak at full size, as ONE results table (markdown).

Run: ``.venv/bin/python bench/soak.py [--reduced] [--seed N]``. Prints the table (with the
date and the machine: nproc, CPU model, RAM) and exits 0 whether or not a check failed: the
verdict row says. ``make soak`` runs the same workloads as tests (``tests/system``).

- soak: `SOAK_SHAPES` (50 clients × 200 turns on 20 sessions), Read/Write/Bash tool calls,
  approvals answered over the wire, every client subscribed to its session;
- crash: `CRASH_SHAPES` (20 SIGKILLs at random moments, restarts, clients reconnecting);
- full disk: `full_disk_phase` (the state folder on a 4 MiB tmpfs filled to the last byte,
  200 refused turns, then the space back), reported as "records intact after N full-disk
  refusals" (skipped, saying why, when a tmpfs cannot be mounted: not root).

The plan, workload and checks are those of ``tests/system/soak_plan.py``,
``soak_workload.py`` and ``soak_checks.py``; ``bench/README.md`` explains every row.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import sys
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.system.daemon_process import DaemonProcess, Scale, daemon_home
from tests.system.full_disk_phase import full_disk_phase
from tests.system.soak_checks import check_settled, log_gaps
from tests.system.soak_plan import CRASH_SHAPES, SOAK_SHAPES, SoakShape, SoakStats
from tests.system.soak_workload import SoakRun, run_soak

#: Turns refused on a full disk in the full-disk phase.
FULL_DISK_REFUSALS: dict[Scale, int] = {"full": 200, "reduced": 12}
#: Daemon RSS growth allowed from the first quarter of the soak to the last.
RSS_GROWTH_TARGET = 0.10


def machine() -> str:
    model = "unknown CPU"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    ram_kib = 0
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            ram_kib = int(line.split()[1])
    return (
        f"nproc {os.cpu_count()}, {model}, {ram_kib / 2**20:.1f} GiB RAM, "
        f"Linux {platform.release()}, Python {platform.python_version()}"
    )


class Outcome:
    """One workload's statistics and the problems its checks found."""

    def __init__(self, shape: SoakShape, stats: SoakStats, problems: list[str], gaps: int):
        self.shape = shape
        self.stats = stats
        self.problems = problems
        self.gaps = gaps


async def run_workload(shape: SoakShape, seed: int) -> Outcome:
    with daemon_home() as home:
        daemon = DaemonProcess(home).start()
        try:
            stats = await run_soak(SoakRun(home, daemon, shape, seed=seed), timeout=3600)
        finally:
            daemon.stop()
        exact = shape.kills == 0
        problems = check_settled(
            home, stats.completed_by_session, stats.granted_effects, exact=exact
        )
        problems += stats.lost_responses + stats.anomalies + stats.stream_faults
        problems += stats.storage_faults
        if "Traceback" in daemon.output():
            problems.append("the daemon logged a traceback")
        gaps = 0 if exact else len(log_gaps(home))
    return Outcome(shape, stats, problems, gaps)


def _ms(values: list[float], quantile: float) -> str:
    if not values:
        return "–"
    ordered = sorted(values)
    return f"{ordered[min(len(ordered) - 1, int(quantile * len(ordered)))] * 1e3:.1f} ms"


def _rss(outcome: Outcome) -> str:
    value = outcome.stats.rss_growth()
    kib = outcome.stats.rss_kib
    start = outcome.stats.rss_start_kib
    if value is None or not kib or start is None:
        return "–"
    verdict = "met" if value < RSS_GROWTH_TARGET else "MISSED"
    return (
        f"{start / 1024:.0f} MiB idle → {kib[0] / 1024:.0f} → {kib[-1] / 1024:.0f} MiB under "
        f"load; last vs first quarter {value:+.1%} (target < {RSS_GROWTH_TARGET:.0%}: {verdict})"
    )


def _crash_only(describe: Callable[[SoakStats], str]) -> Callable[[Outcome], str]:
    return lambda o: describe(o.stats) if o.stats.kills else "–"


ROWS: list[tuple[str, Callable[[Outcome], str]]] = [
    (
        "shape: clients × turns, sessions",
        lambda o: f"{o.shape.clients} × {o.shape.turns_per_client}, {o.shape.sessions}",
    ),
    (
        "context window per session (auto-compaction)",
        lambda o: f"{o.shape.context_window:,} tokens" if o.shape.context_window else "default",
    ),
    ("SIGKILLs (restarts)", lambda o: str(o.stats.kills)),
    ("turns completed", lambda o: f"{o.stats.turns_completed:,}"),
    ("turns that waited for approval", lambda o: f"{o.stats.turns_waited:,}"),
    (
        "requests approved / denied",
        lambda o: f"{len(o.stats.approved):,} / {len(o.stats.denied):,}",
    ),
    (
        "resumes by the waiting client / by another client",
        lambda o: f"{o.stats.resumes:,} / {o.stats.helper_resumes:,}",
    ),
    (
        "SessionBusy / ExecutionPending refusals (expected, retried)",
        lambda o: f"{o.stats.busy_refusals:,} / {o.stats.pending_refusals:,}",
    ),
    ("compactions completed", lambda o: f"{len(o.stats.compactions):,}"),
    ("wall time", lambda o: f"{o.stats.wall_seconds:.0f} s"),
    (
        "throughput",
        lambda o: f"{o.stats.turns_completed / max(o.stats.wall_seconds, 1e-9):.1f} turns/s",
    ),
    (
        "session/run latency p50 / p99 (contended)",
        lambda o: f"{_ms(o.stats.run_seconds, 0.5)} / {_ms(o.stats.run_seconds, 0.99)}",
    ),
    (
        "events delivered (of them text_delta)",
        lambda o: f"{o.stats.events:,} ({o.stats.text_deltas:,})",
    ),
    ("lost responses", lambda o: str(len(o.stats.lost_responses))),
    ("lost / duplicated / reordered events", lambda o: str(len(o.stats.stream_faults))),
    ("overflows announced", lambda o: str(o.stats.overflows)),
    ("calls cut by a kill (then retried)", _crash_only(lambda s: str(s.interrupted_calls))),
    (
        "uncertain effects: executions refused on resume / abandoned",
        _crash_only(lambda s: f"{len(s.refused)} / {len(s.abandoned)}"),
    ),
    (
        "acknowledged waits still pending after a restart (checked)",
        _crash_only(lambda s: str(s.waits_checked_after_restart)),
    ),
    ("log entries a kill left open (reported)", lambda o: str(o.gaps) if o.stats.kills else "–"),
    (
        "records valid, journals decode, logs complete\\*, effects ≤ approvals, nothing pending",
        lambda o: "yes" if not o.problems else f"NO: {len(o.problems)} problems",
    ),
    ("daemon RSS", _rss),
    ("verdict (every correctness check above)", lambda o: "PASS" if not o.problems else "FAIL"),
]


def print_table(soak: Outcome, crash: Outcome, seed: int) -> None:
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    print(f"### robotad soak — {stamp}\n")
    print(f"Machine: {machine()}. Crash seed: {seed}.\n")
    print("| measure | soak | crash soak |")
    print("|---|---|---|")
    for label, describe in ROWS:
        print(f"| {label} | {describe(soak)} | {describe(crash)} |")
    print(
        "\n\\* logs: every log replays complete after the soak; after the crash soak every "
        "line decodes, and what a kill cut off is counted in the row above."
    )
    for outcome, name in ((soak, "soak"), (crash, "crash soak")):
        for problem in outcome.problems[:20]:
            print(f"- {name}: {problem}")


async def main(arguments: argparse.Namespace) -> None:
    scale: Scale = "reduced" if arguments.reduced else "full"
    seed = arguments.seed if arguments.seed is not None else random.randrange(2**32)
    soak = await run_workload(SOAK_SHAPES[scale], seed)
    crash = await run_workload(CRASH_SHAPES[scale], seed)
    with tempfile.TemporaryDirectory(prefix="rsys-disk-") as root:
        full_disk = await full_disk_phase(Path(root), FULL_DISK_REFUSALS[scale])
    print_table(soak, crash, seed)
    print(f"\nFull disk: {full_disk.summary}.")
    for problem in full_disk.problems[:20]:
        print(f"- full disk: {problem}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reduced", action="store_true", help="the sizes make test runs")
    parser.add_argument("--seed", type=int, default=None, help="seed of the kill moments")
    trio.run(main, parser.parse_args())
