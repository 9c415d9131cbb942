"""Per-turn and per-delta overhead of a real robotad, as a client meets it.

Run: ``.venv/bin/python bench/turns.py [--turns N] [--chunks N]``. Prints figures; asserts
nothing.

- daemon overhead per turn: ``session/run`` until both its result and the turn's
  ``turn_finished`` event have arrived on one connection (as a client following the turn waits),
  with the scripted provider answering at once (no delay, no tool) — persistence, journal,
  session log and events included — as a median over `--turns` turns spread over fresh
  sessions of 50 turns each (so history stays short), beside the round trip of
  ``daemon/status`` on the same connection;
- the fsync floor of a turn, measured in the same run, one sample after each turn (so load from
  elsewhere falls on both alike), on the same file system: the durable steps a turn took when
  the target was set (issue #20) and nothing else — a new journal file written and fsynced, its
  folder fsynced; the session record written to a temporary file, fsynced, renamed over the
  old one, its folder fsynced (4 fsyncs). The turn's median over the floor's median is the
  figure (target ≤ 1.5×). A plain turn has since dropped the journal's two (its answer is
  staged: nothing could ever recover from it), so the record's half of the floor (2 fsyncs:
  what a turn still must sync) is printed too, with the turn's ratio to it. Beside them, the
  daemon's CPU time per turn (user + system, from ``/proc/<pid>/stat`` around the timed turns):
  other load stretches wall times and fsyncs alike, while CPU per turn barely moves with it;
- added latency per ``text_delta``: one step streamed in `--chunks` pieces at zero delay to a
  subscribed client: the time from the first delta received to the last, over the number of
  deltas, and the growth of the whole turn's time per extra chunk against a one-chunk turn of
  the same text (target: under 1 ms per delta).

``--vs CHECKOUT`` compares instead: a daemon of this checkout and one of `CHECKOUT` (another
worktree of the repository, e.g. ``git worktree add /tmp/base HEAD~3``) each get one
connection, and their turns alternate one by one, first one side then the other, over
sessions of 50 turns; printed are each side's median turn and daemon CPU per turn, and the
median of the paired differences, then those of a session's first turns alone (the first model
call of a session stores its tool set's sidecar). On a shared machine the CPU's speed drifts by
2× within an hour, more than most changes move a turn; paired turns see the same drift, so a
difference of 0.05 ms shows over 800 turns where two separate runs disagree by 1 ms.
"""

from __future__ import annotations

import argparse
import os
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
TURN_TARGET_RATIO = 1.5
DELTA_TARGET_MS = 1.0
#: About what a turn's journal entry and session record weigh.
FLOOR_PAYLOAD = b"x" * 600 + b"\n"


def fsync_floor(folder: Path, index: int) -> tuple[float, float]:
    """Seconds for the durable steps of one turn as filed and nothing else, and for their
    record half alone (see the module docstring)."""
    started = time.perf_counter()
    journal = os.open(folder / f"j-{index}.jsonl", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(journal, FLOOR_PAYLOAD)
        os.fsync(journal)
    finally:
        os.close(journal)
    directory = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(directory)
        record_started = time.perf_counter()
        temporary = folder / ".record.tmp"
        record = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(record, FLOOR_PAYLOAD)
            os.fsync(record)
        finally:
            os.close(record)
        os.rename(temporary, folder / "record.json")
        os.fsync(directory)
    finally:
        os.close(directory)
    ended = time.perf_counter()
    return ended - started, ended - record_started


async def _seconds(connection: SoakConnection, method: str, params: dict[str, Any]) -> float:
    started = time.perf_counter()
    await connection.call(method, params)
    return time.perf_counter() - started


async def _turn_seconds(connection: SoakConnection, params: dict[str, Any]) -> float:
    """One ``session/run`` as a client following its turn meets it: until both its reply and
    the turn's ``turn_finished`` event have arrived (they travel separately)."""
    stream = connection.stream(params["sessionId"])
    finished = stream.turn_finished
    started = time.perf_counter()
    await connection.call("session/run", params)
    while stream.turn_finished == finished:
        await stream.changed.wait()
    return time.perf_counter() - started


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds the process `pid` has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def per_turn(
    connection: SoakConnection, home: DaemonHome, turns: int, daemon_pid: int
) -> None:
    cwd = str(home.workspace("turns"))
    floor_dir = home.state_dir / "fsync-floor"
    floor_dir.mkdir(mode=0o700)
    times: list[float] = []
    floors: list[float] = []
    record_floors: list[float] = []
    cpu = 0.0
    for index in range(turns):
        if index % TURNS_PER_SESSION == 0:
            session_id = f"turns-{index // TURNS_PER_SESSION}"
            await connection.call("session/create", {"cwd": cwd, "sessionId": session_id})
        params = {"sessionId": session_id, "prompt": f"prompt {index}"}
        before = cpu_seconds(daemon_pid)
        times.append(await _turn_seconds(connection, params))
        cpu += cpu_seconds(daemon_pid) - before
        whole, record_half = fsync_floor(floor_dir, index)
        floors.append(whole)
        record_floors.append(record_half)
    status = [await _seconds(connection, "daemon/status", {}) for _ in range(200)]
    median = statistics.median(times) * 1e3
    floor = statistics.median(floors) * 1e3
    record_floor = statistics.median(record_floors) * 1e3
    ratio = median / floor
    verdict = "ok" if ratio <= TURN_TARGET_RATIO else "OVER TARGET"
    print(
        f"turn overhead: median {median:.2f} ms, p90 "
        f"{statistics.quantiles(times, n=10)[-1] * 1e3:.2f} ms over {turns} turns; fsync floor "
        f"as filed (4 fsyncs) {floor:.2f} ms: {ratio:.2f} × the floor (target ≤ "
        f"{TURN_TARGET_RATIO} ×: {verdict}); the record's 2 fsyncs a turn still takes "
        f"{record_floor:.2f} ms: {median / record_floor:.2f} ×; daemon/status round trip "
        f"{statistics.median(status) * 1e3:.3f} ms; daemon CPU {cpu / turns * 1e3:.2f} ms per turn"
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


async def paired(this: Path, other: Path, turns: int, rounds: int = 4) -> None:
    """Turns of this checkout's daemon and `other`'s, alternating (module docstring), in
    `rounds` rounds of fresh daemons, started in the other order each round: where the
    scheduler happens to put two processes can favour one for a whole run."""
    times: list[list[float]] = [[], []]
    cpu = [0.0, 0.0]
    per_round: list[float] = []
    #: Where in `times` a session's first turn is (its first model call stores the tool set).
    firsts: list[int] = []
    for round_number in range(rounds):
        checkouts = [this, other] if round_number % 2 == 0 else [other, this]
        with (
            daemon_home({"PYTHONPATH": str(checkouts[0])}) as home_a,
            daemon_home({"PYTHONPATH": str(checkouts[1])}) as home_b,
        ):
            started = [DaemonProcess(home_a).start(), DaemonProcess(home_b).start()]
            if round_number % 2:
                started.reverse()
                home_a, home_b = home_b, home_a
            try:
                round_times, round_firsts = await _paired_round(
                    started, (home_a, home_b), turns // rounds, cpu
                )
            finally:
                for daemon in started:
                    daemon.stop()
        firsts += [len(times[0]) + index for index in round_firsts]
        for side in (0, 1):
            times[side] += round_times[side]
        per_round.append(statistics.median(b - a for a, b in zip(*round_times, strict=True)) * 1e3)
    counted = len(times[0])
    differences = [b - a for a, b in zip(times[0], times[1], strict=True)]
    for name, side in ((f"this ({this})", 0), (f"vs ({other})", 1)):
        print(
            f"{name}: median turn {statistics.median(times[side]) * 1e3:.2f} ms, "
            f"daemon CPU {cpu[side] / counted * 1e3:.2f} ms per turn"
        )
    rounds_text = ", ".join(f"{value:+.3f}" for value in per_round)
    print(
        f"paired over {counted} turns: vs − this median {statistics.median(differences) * 1e3:+.3f}"
        f" ms, mean {statistics.fmean(differences) * 1e3:+.3f} ms (positive: this checkout is "
        f"faster); by round {rounds_text} ms"
    )
    if firsts:
        first = [differences[index] for index in firsts]
        print(
            f"a session's first turn ({len(first)} pairs): vs − this median "
            f"{statistics.median(first) * 1e3:+.3f} ms, mean {statistics.fmean(first) * 1e3:+.3f}"
            f" ms; this {statistics.median(times[0][i] for i in firsts) * 1e3:.2f} ms, vs "
            f"{statistics.median(times[1][i] for i in firsts) * 1e3:.2f} ms (medians)"
        )


async def _paired_round(
    daemons: list[DaemonProcess], homes: tuple[DaemonHome, DaemonHome], turns: int, cpu: list[float]
) -> tuple[list[list[float]], list[int]]:
    """One round of `paired`: side 0 is this checkout's daemon, side 1 the other's. Each
    side's turn times, and where a session's first turn is among them."""
    times: list[list[float]] = [[], []]
    firsts: list[int] = []
    async with (
        open_soak_connection(daemons[0].socket_path) as first,
        open_soak_connection(daemons[1].socket_path) as second,
    ):
        connections = (first, second)
        warm_up = 20
        for index in range(warm_up + turns):
            session_id = f"pair-{index // TURNS_PER_SESSION}"
            for side in (0, 1) if index % 2 == 0 else (1, 0):
                connection = connections[side]
                if index % TURNS_PER_SESSION == 0:
                    cwd = str(homes[side].workspace(session_id))
                    await connection.call("session/create", {"cwd": cwd, "sessionId": session_id})
                before = cpu_seconds(daemons[side].pid)
                run = {"sessionId": session_id, "prompt": f"prompt {index}"}
                took = await _turn_seconds(connection, run)
                if index >= warm_up:
                    if side == 0 and index % TURNS_PER_SESSION == 0:
                        firsts.append(len(times[0]))
                    times[side].append(took)
                    cpu[side] += cpu_seconds(daemons[side].pid) - before
    return times, firsts


async def main(arguments: argparse.Namespace) -> None:
    if arguments.vs is not None:
        await paired(Path(__file__).resolve().parents[1], arguments.vs.resolve(), arguments.turns)
        return
    with daemon_home() as home:
        daemon = DaemonProcess(home).start()
        try:
            async with open_soak_connection(daemon.socket_path) as connection:
                await per_turn(connection, home, arguments.turns, daemon.pid)
                await per_delta(connection, home, arguments.chunks)
        finally:
            daemon.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=500, help="turns to time")
    parser.add_argument("--chunks", type=int, default=2_000, help="deltas in the streamed step")
    parser.add_argument(
        "--vs",
        type=Path,
        metavar="CHECKOUT",
        help="compare turn by turn with the daemon of another checkout (module docstring)",
    )
    trio.run(main, parser.parse_args())
