"""RPC figures: the daemon's JSON-RPC path against a raw trio echo server on the same socket type.

Run: ``.venv/bin/python bench/rpc.py [--requests N] [--profile]``. Prints figures; asserts nothing.

- round-trip latency p50/p99 of ``daemon/status`` on one connection, robotad vs echo, as ratios
  (issue target: within 1.5× of echo);
- aggregate throughput with 1 and 20 concurrent clients, each with one request outstanding,
  robotad vs echo (issue target: ≥ 15,000 req/s with 20 clients);
- ``robotactl status`` wall time vs ``socat`` sending the same request (skipped, saying why,
  when robotactl or socat is not there).

Both servers run as separate processes started the same way; the clients share this process,
so the echo figures are also the ceiling of the measuring client. ``--profile`` runs a second
daemon in-process under cProfile during a latency run and prints where its time goes.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import trio

REPO = Path(__file__).resolve().parents[1]
REQUEST = b'{"jsonrpc":"2.0","id":1,"method":"daemon/status"}\n'

ECHO_SERVER = r"""
import os, sys, trio
async def echo(stream):
    try:
        while data := await stream.receive_some(65536):
            await stream.send_all(data)
    except trio.BrokenResourceError:
        pass
async def main(path, ready_fd):
    sock = trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM)
    await sock.bind(path)
    sock.listen(128)
    os.write(ready_fd, b"\n")
    os.close(ready_fd)
    await trio.serve_listeners(echo, [trio.SocketListener(sock)])
trio.run(main, sys.argv[1], int(sys.argv[2]))
"""


def env_with_repo() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


@contextlib.contextmanager
def server_process(command: Callable[[int], list[str]]) -> Iterator[subprocess.Popen[bytes]]:
    """Start a server that writes one byte on the fd it is given once it listens."""
    read_end, write_end = os.pipe()
    process = subprocess.Popen(
        command(write_end), pass_fds=(write_end,), env=env_with_repo(), stderr=subprocess.DEVNULL
    )
    os.close(write_end)
    with os.fdopen(read_end, "rb") as ready:
        if ready.read(1) != b"\n":
            process.kill()
            raise SystemExit(f"server did not start: {command(write_end)}")
    try:
        yield process
    finally:
        process.terminate()
        process.wait(10)


# -- measuring ------------------------------------------------------------------------------


async def round_trips(path: str, count: int, latencies: list[int] | None = None) -> None:
    """`count` sequential request/reply round trips on one connection (one line each way)."""
    stream = await trio.open_unix_socket(path)
    buffer = b""
    async with stream:
        for _ in range(count):
            started = time.perf_counter_ns()
            await stream.send_all(REQUEST)
            while b"\n" not in buffer:
                buffer += await stream.receive_some(65536)
            buffer = buffer[buffer.index(b"\n") + 1 :]
            if latencies is not None:
                latencies.append(time.perf_counter_ns() - started)


async def latency(path: str, count: int) -> tuple[float, float]:
    await round_trips(path, 200)  # warm up both ends
    samples: list[int] = []
    await round_trips(path, count, samples)
    samples.sort()
    p50 = samples[len(samples) // 2] / 1000
    p99 = samples[int(len(samples) * 0.99)] / 1000
    return p50, p99


async def throughput(path: str, clients: int, per_client: int) -> float:
    await round_trips(path, 100)
    started = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for _ in range(clients):
            nursery.start_soon(round_trips, path, per_client)
    return clients * per_client / (time.perf_counter() - started)


def wall_times(command: list[str], runs: int, stdin: bytes | None = None) -> list[float]:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(
            command, input=stdin, check=True, capture_output=True, env=env_with_repo(), timeout=30
        )
        times.append(time.perf_counter() - started)
    return times


# -- the report -----------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20_000, help="round trips per figure")
    parser.add_argument("--profile", action="store_true", help="profile an in-process daemon")
    args = parser.parse_args()
    count = args.requests

    base = Path(tempfile.mkdtemp(prefix="rpcb-", dir="/tmp"))
    try:
        robotad_sock = str(base / "run" / "robotad.sock")
        echo_sock = str(base / "echo.sock")

        def robotad_cmd(fd: int) -> list[str]:
            options = ["--socket", robotad_sock, "--ready-fd", str(fd), "--log-level", "warning"]
            return [sys.executable, "-m", "robotad", *options]

        def echo_cmd(fd: int) -> list[str]:
            return [sys.executable, "-c", ECHO_SERVER, echo_sock, str(fd)]

        with server_process(robotad_cmd), server_process(echo_cmd):
            print(f"daemon/status round trips on one connection ({count} requests):")
            ours = trio.run(latency, robotad_sock, count)
            echo = trio.run(latency, echo_sock, count)
            print(f"  robotad  p50 {ours[0]:7.1f} µs   p99 {ours[1]:7.1f} µs")
            print(f"  echo     p50 {echo[0]:7.1f} µs   p99 {echo[1]:7.1f} µs")
            print(
                f"  ratio    p50 {ours[0] / echo[0]:7.2f} ×    p99 {ours[1] / echo[1]:7.2f} ×"
                "   (target ≤ 1.5 ×)"
            )
            print("aggregate throughput, one request outstanding per client:")
            for clients in (1, 20):
                per_client = max(100, count // clients)
                ours_rate = trio.run(throughput, robotad_sock, clients, per_client)
                echo_rate = trio.run(throughput, echo_sock, clients, per_client)
                target = "   (target ≥ 15,000 req/s)" if clients == 20 else ""
                print(
                    f"  {clients:2d} client(s): robotad {ours_rate:9,.0f} req/s   "
                    f"echo {echo_rate:9,.0f} req/s   ratio {ours_rate / echo_rate:5.2f}{target}"
                )
            cli_comparison(robotad_sock)
        stage_costs()
        if args.profile:
            profile_in_process(base, count)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def cli_comparison(socket_path: str) -> None:
    print("one status request from a fresh process (median of 15 runs):")
    if shutil.which("socat") is None:
        print("  skipped: socat is not installed")
        return
    try:
        import robotactl.cli
    except ImportError as exc:
        print(f"  skipped: robotactl is not importable ({exc})")
        return
    robotactl = [sys.executable, "-m", "robotactl", "--socket", socket_path, "status"]
    socat = ["socat", "-", f"UNIX-CONNECT:{socket_path}"]
    try:
        ours = statistics.median(wall_times(robotactl, 15))
    except subprocess.CalledProcessError as exc:
        print(f"  skipped: robotactl status failed ({exc.stderr.decode().strip()[:200]})")
        return
    theirs = statistics.median(wall_times(socat, 15, stdin=REQUEST))
    bare = statistics.median(wall_times([sys.executable, "-c", "pass"], 15))
    print(f"  robotactl status {ours * 1000:7.1f} ms")
    print(f"  socat            {theirs * 1000:7.1f} ms   ratio {ours / theirs:5.1f} ×")
    print(f"  (python -c pass  {bare * 1000:7.1f} ms: the interpreter's own start-up)")


def stage_costs(rounds: int = 50_000) -> None:
    """Per-request CPU of each stage a daemon/status request passes through, in isolation."""
    import timeit

    from protocol import jsonrpc
    from protocol.framing import FrameDecoder, encode_frame
    from protocol.peer import _decode_params
    from protocol.shapes import utc_now
    from robotad.server.app import StandaloneApplication
    from robotad.server.daemon_methods import DaemonInfo, register_daemon_methods

    app = StandaloneApplication()
    info = DaemonInfo("0", os.getpid(), utc_now(), "/run/x.sock", Path("/state"))
    register_daemon_methods(app.router, info, app, lambda grace: None)
    route = app.router.get("daemon/status")
    assert route is not None
    body = REQUEST.rstrip(b"\n")
    decoder = FrameDecoder()

    def call_handler() -> object:
        coroutine = route.handler(None, None)  # type: ignore[arg-type]
        try:
            coroutine.send(None)
        except StopIteration as done:
            return done.value
        raise RuntimeError("daemon/status suspended")

    result = call_handler()
    reply = jsonrpc.encode_result(1, result)
    stages: list[tuple[str, Callable[[], object]]] = [
        ("frame decode (NDJSON)", lambda: decoder.feed(REQUEST)),
        ("JSON-RPC classify", lambda: jsonrpc.parse_frame(body)),
        ("params decode", lambda: _decode_params(route, None)),
        ("handler", call_handler),
        ("result encode", lambda: jsonrpc.encode_result(1, result)),
        ("frame encode", lambda: encode_frame(reply, "ndjson")),
    ]
    print("per-request CPU by stage (sans-I/O, in isolation):")
    for name, stage in stages:
        micros = timeit.timeit(stage, number=rounds) / rounds * 1e6
        print(f"  {name:24s} {micros:6.2f} µs")

    async def write_path() -> None:
        lock = trio.StrictFIFOLock()
        started = time.perf_counter()
        for _ in range(rounds):
            async with lock:
                with trio.CancelScope(shield=True):
                    pass
        locked = (time.perf_counter() - started) / rounds * 1e6
        started = time.perf_counter()
        for _ in range(rounds):
            await trio.lowlevel.checkpoint()
        checkpoint = (time.perf_counter() - started) / rounds * 1e6
        print(f"  {'write lock + shield':24s} {locked:6.2f} µs   (the peer's one-writer rule)")
        print(f"  {'one trio checkpoint':24s} {checkpoint:6.2f} µs")

    trio.run(write_path)


def profile_in_process(base: Path, count: int) -> None:
    """Serve in this process under cProfile while a client thread drives it; print the top."""
    import cProfile
    import pstats
    import socket
    import threading

    from robotad.server.lifecycle import DaemonSettings, serve_daemon

    socket_path = base / "prof" / "robotad.sock"
    serving = threading.Event()
    profiler = cProfile.Profile()

    def client() -> None:
        serving.wait()
        trio.run(round_trips, str(socket_path), count)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.connect(str(socket_path))
            sock.sendall(b'{"jsonrpc":"2.0","id":1,"method":"daemon/shutdown"}\n')
            sock.recv(4096)

    async def serve() -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(
                lambda task_status: serve_daemon(
                    DaemonSettings(socket=socket_path), environ={}, task_status=task_status
                )
            )
            serving.set()

    thread = threading.Thread(target=client)
    thread.start()
    profiler.enable()
    trio.run(serve)  # signals need the main thread: the daemon runs here, the client there
    profiler.disable()
    thread.join()
    print(f"in-process daemon profile ({count} status requests), by own time:")
    pstats.Stats(profiler).sort_stats("tottime").print_stats(18)


if __name__ == "__main__":
    main()
