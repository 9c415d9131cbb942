"""Scale figures of a real robotad: idle sessions, stored sessions, one long session.

Run: ``.venv/bin/python bench/scale.py [--idle N] [--stored N] [--long N]``. Prints figures;
asserts nothing (``tests/system/test_system_scale.py`` checks the same runs for correctness).

- RSS per idle loaded session (target ≤ 150 KiB) and ``session/list`` latency with them loaded;
- ``session/list`` of N stored sessions written with the storage API before the daemon starts
  (target: 10,000 in under 1 s), first call (every file read) and repeated;
- a long session at N/4, N/2 and N messages: ``session/open``, ``session/run`` (a turn and its
  save), ``session/close`` (drain and save), ``session/compact`` and the storage API's save,
  each with the ratio of its time to the one at half the size (≈2 is linear; well above 2
  grows faster than linear).

Every daemon is a fresh process with private folders under /tmp, on the scripted provider.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.system.daemon_process import daemon_home
from tests.system.scale_workload import (
    LongFigures,
    idle_sessions,
    long_session,
    median,
    stored_sessions,
)

KIB_TARGET = 150
LIST_TARGET_SECONDS = 1.0
_LONG_STEPS = ("open", "run", "close", "compact", "store save")


async def bench_idle(count: int) -> None:
    with daemon_home() as home:
        figures = await idle_sessions(home, count)
    verdict = "ok" if figures.kib_per_session <= KIB_TARGET else "OVER TARGET"
    print(
        f"{count:,} idle loaded sessions: RSS {figures.rss_before_kib:,} → "
        f"{figures.rss_after_kib:,} KiB = {figures.kib_per_session:.1f} KiB/session "
        f"(target ≤ {KIB_TARGET}: {verdict}); session/list median "
        f"{median(figures.list_seconds) * 1e3:.1f} ms"
    )


async def bench_stored(count: int) -> None:
    with daemon_home() as home:
        figures = await stored_sessions(home, count)
    first = figures.first_list_seconds
    verdict = "ok" if first < LIST_TARGET_SECONDS else "OVER TARGET"
    print(
        f"{count:,} stored sessions (written in {figures.write_seconds:.1f} s): session/list "
        f"first {first * 1e3:.0f} ms (target < {LIST_TARGET_SECONDS:.0f} s: {verdict}), "
        f"repeated median {median(figures.list_seconds) * 1e3:.0f} ms; listed {figures.listed:,}"
    )


def _times(figures: LongFigures) -> tuple[float, ...]:
    return (
        figures.open_seconds,
        figures.run_seconds,
        figures.close_seconds,
        figures.compact_seconds,
        figures.store_save_seconds,
    )


async def bench_long(largest: int) -> None:
    sizes = (largest // 4, largest // 2, largest)
    results: list[LongFigures] = []
    for size in sizes:
        with daemon_home() as home:
            results.append(await long_session(home, size))
    print(f"long session ({', '.join(f'{s:,}' for s in sizes)} messages):")
    print(f"  {'step':<11}" + "".join(f"{s:>12,}" for s in sizes) + "   ratios (×2 size)")
    for index, step in enumerate(_LONG_STEPS):
        times = [_times(figures)[index] for figures in results]
        ratios = [later / earlier for earlier, later in itertools.pairwise(times)]
        flag = "  ← faster than linear growth" if any(r > 2.6 for r in ratios) else ""
        print(
            f"  {step:<11}"
            + "".join(f"{t * 1e3:>10.0f}ms" for t in times)
            + "   "
            + " ".join(f"{r:.2f}" for r in ratios)
            + flag
        )
    sizes_mb = ", ".join(f"{f.record_bytes / 1e6:.1f}" for f in results)
    print(f"  record sizes: {sizes_mb} MB")


async def main(arguments: argparse.Namespace) -> None:
    await bench_idle(arguments.idle)
    await bench_stored(arguments.stored)
    await bench_long(arguments.long)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--idle", type=int, default=1_000, help="idle loaded sessions")
    parser.add_argument("--stored", type=int, default=10_000, help="stored sessions")
    parser.add_argument("--long", type=int, default=50_000, help="messages of the long session")
    trio.run(main, parser.parse_args())
