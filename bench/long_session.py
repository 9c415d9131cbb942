"""What a long session costs its user, and every other session, against a short one.

Run: ``.venv/bin/python bench/long_session.py [--messages N] [--rounds N] [--checkout DIR]``.
Prints figures; asserts nothing.

One daemon holds two stored sessions written with the storage API before it starts: a long
one of `--messages` messages (rounds of a prompt, a Read call, its result and an answer;
every tenth result 20 KB, the others 200 bytes, so the record runs to megabytes) and a short
one of the same rounds, 20 messages (the floor, measured in the same run and the same
rounds). Automatic compaction is off in both. Operations alternate between the two, round
after round, and each figure is the median over the rounds:

- a turn (``session/run`` with the scripted provider's echo: its save included) and the
  daemon's CPU for it (``/proc/<pid>/stat``);
- how long the event loop is blocked meanwhile, as another session's client meets it: a
  second connection sends ``daemon/status`` back to back for as long as the operation runs,
  and the figure is the slowest of those round trips (the floor: the slowest during the short
  session's same operation);
- ``session/get``, ``session/list``, ``session/history`` (the last 50 messages, and all of
  them), ``session/context``, ``session/log``, ``session/export``, ``session/fork`` (the fork
  deleted after), ``session/close`` and ``session/open`` (unload and load), and
  ``session/compact`` of a fork (so the long session stays long);
- the daemon's RSS with only the short session loaded, and with the long one loaded too.

``--checkout DIR`` runs the daemon from another checkout (e.g. ``git archive main | tar -x -C
/tmp/base``), for figures before a change.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from protocol.shapes import Message, ToolCall
from robotad.storage.record import SessionRecord
from robotad.storage.store import FileSessionStore
from tests.system.daemon_process import DaemonHome, DaemonProcess, daemon_home
from tests.system.scale_workload import scripted_record
from tests.system.soak_client import SoakConnection, open_soak_connection

T0 = datetime(2025, 1, 1, tzinfo=UTC)
BIG_EVERY = 10
BIG_BYTES = 20_000
SMALL_BYTES = 200
SHORT_MESSAGES = 20


def history(count: int) -> list[Message]:
    """`count` messages in rounds of four: prompt, a Read call, its result, an answer."""
    messages: list[Message] = []
    for index in range(count):
        round_number, step = divmod(index, 4)
        stamp = T0 + timedelta(seconds=index)
        call_id = f"call-{round_number}"
        if step == 0:
            message = Message(f"m-{index}", "user", f"prompt {round_number}", "complete", stamp)
        elif step == 1:
            message = Message(f"m-{index}", "assistant", None, "complete", stamp)
            message.tool_calls = [ToolCall(call_id, "Read", {"file_path": f"/src/f{index}.py"})]
        elif step == 2:
            size = BIG_BYTES if round_number % BIG_EVERY == 0 else SMALL_BYTES
            message = Message(f"m-{index}", "tool", "x" * size, "complete", stamp)
            message.tool_call_id = call_id
            message.name = "Read"
            message.metadata = {"ok": True}
        else:
            message = Message(
                f"m-{index}", "assistant", f"answer {round_number}", "complete", stamp
            )
        messages.append(message)
    while messages and (messages[-1].role != "assistant" or messages[-1].tool_calls):
        messages.pop()  # end on a plain answer: no open round
    return messages


def record(session_id: str, cwd: str, count: int) -> SessionRecord:
    return scripted_record(session_id, cwd, history(count), T0, turn_count=count // 4)


class Probe:
    """Round trips of ``daemon/status`` on a connection of their own, back to back, kept with
    the moment each ended, so an operation's slowest can be picked out."""

    def __init__(self, connection: SoakConnection) -> None:
        self.connection = connection
        self.samples: list[tuple[float, float]] = []  # (end, seconds)

    async def run(self) -> None:
        while True:
            started = time.perf_counter()
            await self.connection.call("daemon/status", {})
            ended = time.perf_counter()
            self.samples.append((ended, ended - started))

    def slowest(self, since: float, until: float) -> float:
        """The slowest round trip that ended within [since, until + its own length]: one
        that began during the operation."""
        within = [s for end, s in self.samples if since < end and end - s <= until]
        return max(within, default=0.0)


def cpu_of(pid: int) -> float:
    """User + system CPU seconds the process `pid` has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Figures:
    def __init__(self) -> None:
        self.seconds: dict[tuple[str, str], list[float]] = {}
        self.blocked: dict[tuple[str, str], list[float]] = {}
        self.cpu: dict[tuple[str, str], list[float]] = {}

    def add(self, op: str, side: str, seconds: float, blocked: float, cpu: float) -> None:
        self.seconds.setdefault((op, side), []).append(seconds)
        self.blocked.setdefault((op, side), []).append(blocked)
        self.cpu.setdefault((op, side), []).append(cpu)


async def measure(
    figures: Figures,
    probe: Probe,
    pid: int,
    op: str,
    side: str,
    action: Callable[[], Awaitable[Any]],
) -> None:
    await trio.sleep(0.02)  # let the probe run once between operations
    cpu = cpu_of(pid)
    started = time.perf_counter()
    await action()
    ended = time.perf_counter()
    cpu = cpu_of(pid) - cpu
    await trio.sleep(0.01)  # the round trip in flight at the end lands
    figures.add(op, side, ended - started, probe.slowest(started, ended), cpu)


def operations(
    connection: SoakConnection, session_id: str, total: int
) -> list[tuple[str, Callable[[], Awaitable[Any]]]]:
    ref = {"sessionId": session_id}
    fork_id = f"{session_id}-fork"

    async def fork() -> None:
        await connection.call("session/fork", {**ref, "newSessionId": fork_id})

    async def drop_fork() -> None:
        await connection.call("session/close", {"sessionId": fork_id})
        await connection.call("session/delete", {"sessionId": fork_id})

    async def compact_fork() -> None:
        await connection.call("session/compact", {"sessionId": fork_id})

    return [
        ("turn", lambda: connection.call("session/run", {**ref, "prompt": "one more"})),
        ("get", lambda: connection.call("session/get", ref)),
        ("list", lambda: connection.call("session/list", {})),
        (
            "history last 50",
            lambda: connection.call(
                "session/history", {**ref, "offset": max(total - 50, 0), "limit": 50}
            ),
        ),
        ("history all", lambda: connection.call("session/history", ref)),
        ("context", lambda: connection.call("session/context", ref)),
        ("log", lambda: connection.call("session/log", ref)),
        ("export", lambda: connection.call("session/export", ref)),
        ("fork", fork),
        ("compact (a fork)", compact_fork),
        ("fork close+delete", drop_fork),
        ("close (unload)", lambda: connection.call("session/close", ref)),
        ("open (load)", lambda: connection.call("session/open", ref)),
    ]


async def bench(home: DaemonHome, messages: int, rounds: int) -> None:
    store = FileSessionStore(home.state_dir)
    sides = {"short": SHORT_MESSAGES, "long": messages}
    for side, count in sides.items():
        store.create(record(side, str(home.workspace(side)), count))
    size = store.path_for("long").stat().st_size
    daemon = DaemonProcess(home).start()
    figures = Figures()
    try:
        async with (
            open_soak_connection(daemon.socket_path) as connection,
            open_soak_connection(daemon.socket_path) as other,
            trio.open_nursery() as nursery,
        ):
            await connection.call("session/open", {"sessionId": "short"})
            rss_short = daemon.rss_kib()
            await connection.call("session/open", {"sessionId": "long"})
            rss_long = daemon.rss_kib()
            probe = Probe(other)
            nursery.start_soon(probe.run)
            idle_started = time.perf_counter()
            await trio.sleep(0.5)
            idle = probe.slowest(idle_started, time.perf_counter())
            for round_number in range(rounds):
                order = ("short", "long") if round_number % 2 == 0 else ("long", "short")
                for side in order:
                    for op, action in operations(connection, side, sides[side]):
                        await measure(figures, probe, daemon.pid, op, side, action)
                    sides[side] += 2  # the turn added a prompt and an answer
            nursery.cancel_scope.cancel()
    finally:
        daemon.stop()
    report(figures, messages, size, rounds, idle, rss_short, rss_long)


def report(
    figures: Figures,
    messages: int,
    size: int,
    rounds: int,
    idle: float,
    rss_short: int,
    rss_long: int,
) -> None:
    med = statistics.median
    print(
        f"long session: {messages:,} messages, record {size / 1e6:.1f} MB; short: "
        f"{SHORT_MESSAGES} messages; medians of {rounds} rounds, alternating"
    )
    print(f"daemon/status slowest round trip while idle: {idle * 1e3:.2f} ms")
    print(
        f"  {'operation':<18}{'short':>9}{'long':>10}{'×':>8}   "
        f"{'loop blocked short':>18}{'long':>9}{'×':>8}   {'CPU long':>9}"
    )
    for (op, side), times in figures.seconds.items():
        if side != "long":
            continue
        short = med(figures.seconds[(op, "short")])
        long = med(times)
        blocked_short = med(figures.blocked[(op, "short")])
        blocked_long = med(figures.blocked[(op, "long")])
        cpu_long = med(figures.cpu[(op, "long")])
        print(
            f"  {op:<18}{short * 1e3:>7.2f}ms{long * 1e3:>8.2f}ms{long / short:>7.1f}×   "
            f"{blocked_short * 1e3:>16.2f}ms{blocked_long * 1e3:>7.2f}ms"
            f"{blocked_long / max(blocked_short, 1e-9):>7.1f}×   {cpu_long * 1e3:>7.0f}ms"
        )
    print(
        f"RSS: {rss_short / 1024:.1f} MiB with the short session loaded, "
        f"{rss_long / 1024:.1f} MiB with the long one too "
        f"(+{(rss_long - rss_short) / 1024:.1f} MiB)"
    )


async def main(arguments: argparse.Namespace) -> None:
    extra = {} if arguments.checkout is None else {"PYTHONPATH": str(arguments.checkout)}
    with daemon_home(extra) as home:
        await bench(home, arguments.messages, arguments.rounds)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=20_000, help="the long session's")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of every operation")
    parser.add_argument("--checkout", type=Path, help="run the daemon from this checkout")
    trio.run(main, parser.parse_args())
