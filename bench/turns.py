"""Per-turn and per-delta overhead of a real robotad, as a client meets it.

Run: ``.venv/bin/python bench/turns.py [--turns N] [--chunks N]``. Prints figures; asserts
nothing.

- daemon overhead per turn: ``session/run`` to its result on one connection, with the scripted
  provider answering at once (no delay, no tool) — persistence, journal, session log and events
  included — as a median over `--turns` turns spread over fresh sessions of 50 turns each (so
  history stays short), beside the round trip of ``daemon/status`` on the same connection
  (target: under 5 ms per turn);
- added latency per ``text_delta``: one step streamed in `--chunks` pieces at zero delay to a
  subscribed client: the time from the first delta received to the last, over the number of
  deltas, and the growth of the whole turn's time per extra chunk against a one-chunk turn of
  the same text (target: under 1 ms per delta).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.system.daemon_process import DaemonHome, DaemonProcess, daemon_home
from tests.system.soak_client import SoakConnection, open_soak_connection

TURNS_PER_SESSION = 50
TURN_TARGET_MS = 5.0
DELTA_TARGET_MS = 1.0


async def _seconds(connection: SoakConnection, method: str, params: dict[str, Any]) -> float:
    started = time.perf_counter()
    await connection.call(method, params)
    return time.perf_counter() - started


async def per_turn(connection: SoakConnection, home: DaemonHome, turns: int) -> None:
    cwd = str(home.workspace("turns"))
    times: list[float] = []
    for index in range(turns):
        if index % TURNS_PER_SESSION == 0:
            session_id = f"turns-{index // TURNS_PER_SESSION}"
            await connection.call("session/create", {"cwd": cwd, "sessionId": session_id})
        params = {"sessionId": session_id, "prompt": f"prompt {index}"}
        times.append(await _seconds(connection, "session/run", params))
    status = [await _seconds(connection, "daemon/status", {}) for _ in range(200)]
    median = statistics.median(times) * 1e3
    verdict = "ok" if median < TURN_TARGET_MS else "OVER TARGET"
    print(
        f"turn overhead: median {median:.2f} ms, p90 "
        f"{statistics.quantiles(times, n=10)[-1] * 1e3:.2f} ms over {turns} turns "
        f"(target < {TURN_TARGET_MS:.0f} ms: {verdict}); daemon/status round trip "
        f"{statistics.median(status) * 1e3:.3f} ms"
    )


async def per_delta(connection: SoakConnection, home: DaemonHome, chunks: int) -> None:
    cwd = str(home.workspace("deltas"))
    text = "x" * (chunks * 4)
    script = [{"text": text, "chunks": 1}, {"text": text, "chunks": chunks}] * 3
    await connection.call("session/create", {"cwd": cwd, "sessionId": "deltas", "script": script})
    await connection.subscribe("deltas")
    stream = connection.stream("deltas")
    whole: dict[int, list[float]] = {1: [], chunks: []}
    spans: list[float] = []
    for round_number in range(6):
        pieces = 1 if round_number % 2 == 0 else chunks
        seen = stream.text_deltas
        first: float | None = None
        last = 0.0

        async def watch(target: int, seen: int = seen) -> None:
            nonlocal first, last
            while stream.text_deltas < seen + target:
                await stream.changed.wait()
                now = time.perf_counter()
                if first is None:
                    first = now
                last = now

        started = time.perf_counter()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch, pieces)
            await connection.call("session/run", {"sessionId": "deltas", "prompt": "stream"})
        whole[pieces].append(time.perf_counter() - started)
        if pieces > 1 and first is not None:
            spans.append((last - first) / (pieces - 1))
    span = statistics.median(spans) * 1e3
    growth = (statistics.median(whole[chunks]) - statistics.median(whole[1])) / (chunks - 1)
    verdict = "ok" if max(span, growth * 1e3) < DELTA_TARGET_MS else "OVER TARGET"
    print(
        f"text_delta ({chunks} chunks): first→last delta {span:.3f} ms per delta; turn time "
        f"grows {growth * 1e3:.3f} ms per extra chunk (target < {DELTA_TARGET_MS:.0f} ms: "
        f"{verdict})"
    )


async def main(arguments: argparse.Namespace) -> None:
    with daemon_home() as home:
        daemon = DaemonProcess(home).start()
        try:
            async with open_soak_connection(daemon.socket_path) as connection:
                await per_turn(connection, home, arguments.turns)
                await per_delta(connection, home, arguments.chunks)
        finally:
            daemon.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=500, help="turns to time")
    parser.add_argument("--chunks", type=int, default=2_000, help="deltas in the streamed step")
    trio.run(main, parser.parse_args())
