"""What a session with a vendor SDK provider costs to create, against a scripted one.

Run: ``.venv/bin/python bench/session_create.py [--rounds N]``. Prints medians; asserts
nothing; opens no connection beyond robotad's socket (the SDK providers point at a loopback
port nothing listens on, and creating a session sends no request).

One robotad, run as users run it (without the test suite's event check), with two providers
configured: ``local`` (the ``openai`` kind) and ``claude`` (the ``anthropic`` kind, a key
given). Each round creates and closes one session of each kind and one ``scripted`` session,
in turn, on one connection; the first round (the SDKs' imports) is left out. The scripted
session is the floor: the same session minus any SDK client. The figures are the medians of
``session/create``'s round trip and each SDK kind's excess over the floor. Before the daemon
pooled its SDK clients (`robotad.providers.clients`), every create built a new client on
the event loop: about 40 ms of CPU for its SSL context and CA bundle.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.daemon_helpers import DaemonHome, running_daemon

CONFIG = """
[providers.local]
kind = "openai"
base_url = "http://127.0.0.1:9/v1"

[providers.claude]
kind = "anthropic"
base_url = "http://127.0.0.1:9"
api_key_env = "BENCH_ANTHROPIC_KEY"
"""
KINDS = ("scripted", "local", "claude")


async def measure(socket: Path, cwd: str, rounds: int) -> dict[str, list[float]]:
    from protocol.client import open_connection

    times: dict[str, list[float]] = {kind: [] for kind in KINDS}
    async with open_connection(socket) as peer:
        for round_number in range(rounds + 1):
            for kind in KINDS:
                started = time.perf_counter()
                info = await peer.request("session/create", {"cwd": cwd, "provider": kind})
                elapsed = time.perf_counter() - started
                await peer.request("session/close", {"sessionId": info["sessionId"]})
                if round_number > 0:
                    times[kind].append(elapsed)
    return times


def report(times: dict[str, list[float]]) -> None:
    floor = statistics.median(times["scripted"]) * 1e3
    print(f"session/create, median of {len(times['scripted'])} rounds:")
    print(f"  scripted (the floor): {floor:.2f} ms")
    for kind, label in (("local", "openai"), ("claude", "anthropic")):
        median = statistics.median(times[kind]) * 1e3
        excess = median - floor
        print(f"  {label}: {median:.2f} ms ({median / floor:.2f}x the floor, +{excess:.2f} ms)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-create-") as folder:
        root = Path(folder)
        home = DaemonHome(root / "daemon", check_events=False)
        home.write_config(CONFIG)
        environment = home.environment
        home.environment = lambda: {**environment(), "BENCH_ANTHROPIC_KEY": "sk-bench"}  # type: ignore[method-assign]
        (root / "work").mkdir()
        with running_daemon(home, "--log-level", "warning") as daemon:
            times = trio.run(measure, daemon.socket_path, str(root / "work"), args.rounds)
    report(times)


if __name__ == "__main__":
    main()
