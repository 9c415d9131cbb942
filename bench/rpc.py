"""RPC figures: the daemon's JSON-RPC path against a raw trio server on the same socket type.

Run: ``.venv/bin/python bench/rpc.py [--requests N] [--rounds N] [--profile]``. Prints figures;
asserts nothing.

The floor (issue targets, measured first): a plain blocking Unix-socket client — no trio, no
JSON parsing — against robotad and against a trio server that answers each line with a canned
``daemon/status`` reply (the least any trio server can do per request). Each figure is the
median of several rounds' ratios, so load from elsewhere on a shared machine falls on both
alike:

- ``daemon/status`` round trip p50 on one connection each, one request at a time, the two
  servers' requests interleaved one by one (target ≤ 1.5× the floor). With two CPUs or more
  the client runs on one CPU and both servers on another: on a virtual machine a server woken
  on the client's CPU answers in ~25 µs and one woken on another CPU in ~65 µs, and where the
  scheduler happens to put each server otherwise decides a round (ratios from 0.4 to 2.7 over
  the same code); so placed, both pay the same wake-up. The same figure with free placement,
  the servers taking turns round by round as earlier sessions measured it, is printed beside
  it;
- aggregate req/s with 20 connections from 4 processes, one request outstanding per
  connection, free placement (target ≥ 0.6× the floor).

Then the older figures, measured with an in-process trio client (whose own cost is added to
both sides, so its ratios look closer to 1 than the server's cost is):

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

#: A trio server on a Unix socket whose `answer(data)` gives the bytes to send back for each
#: chunk received (`{answer}` below is filled in with one).
SERVER_TEMPLATE = r"""
import os, sys, trio
REPLY = (b'{{"jsonrpc":"2.0","id":1,"result":{{"version":"0.1.0","protocolVersion":1,'
         b'"pid":1,"startedAt":"2026-01-01T00:00:00Z","socketPath":"/run/robotad.sock",'
         b'"stateDir":"/state","sessions":{{"loaded":0,"running":0,"waiting":0}}}}}}\n')
def answer(data):
    return {answer}
async def serve(stream):
    try:
        while data := await stream.receive_some(65536):
            await stream.send_all(answer(data))
    except trio.BrokenResourceError:
        pass
async def main(path, ready_fd):
    sock = trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM)
    await sock.bind(path)
    sock.listen(128)
    os.write(ready_fd, b"\n")
    os.close(ready_fd)
    await trio.serve_listeners(serve, [trio.SocketListener(sock)])
trio.run(main, sys.argv[1], int(sys.argv[2]))
"""
#: Answers every request line with one canned daemon/status reply: the floor.
CANNED_SERVER = SERVER_TEMPLATE.format(answer='REPLY * data.count(b"\\n")')
#: Echoes what it receives.
ECHO_SERVER = SERVER_TEMPLATE.format(answer="data")

#: One process of the aggregate figure: `connections` sockets, one request outstanding on
#: each, driven with `selectors` from `start` (a time.time()) for `seconds`; prints replies.
LOAD_WORKER = r"""
import selectors, socket, sys, time
path, connections = sys.argv[1], int(sys.argv[2])
start, seconds = float(sys.argv[3]), float(sys.argv[4])
REQUEST = b'{"jsonrpc":"2.0","id":1,"method":"daemon/status"}\n'
selector = selectors.DefaultSelector()
buffers = {}
for _ in range(connections):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(path)
    sock.sendall(REQUEST)
    sock.recv(65536)
    selector.register(sock, selectors.EVENT_READ)
    buffers[sock] = b""
time.sleep(max(0.0, start - time.time()))
for sock in buffers:
    sock.sendall(REQUEST)
done = 0
stop = time.time() + seconds
while time.time() < stop:
    for key, _ in selector.select(1.0):
        sock = key.fileobj
        data = buffers[sock] + sock.recv(65536)
        replies = data.count(b"\n")
        buffers[sock] = data[data.rindex(b"\n") + 1 :] if replies else data
        for _ in range(replies):
            done += 1
            sock.sendall(REQUEST)
print(done)
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


# -- measuring: the blocking client against the floor -------------------------------------


def blocking_p50(path: str, count: int) -> float:
    """p50 in µs of `count` sequential daemon/status round trips by a plain blocking client
    on one connection (after 200 unmeasured ones)."""
    import socket

    samples: list[int] = []
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(path)
        for index in range(count + 200):
            started = time.perf_counter_ns()
            sock.sendall(REQUEST)
            reply = sock.recv(65536)
            while not reply.endswith(b"\n"):
                reply += sock.recv(65536)
            if index >= 200:
                samples.append(time.perf_counter_ns() - started)
    return statistics.median(samples) / 1000


def cpu_seconds(pid: int) -> float:
    """User + system CPU time `pid` has used so far (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def aggregate_rate(
    path: str, pid: int, processes: int, connections: int, seconds: float
) -> tuple[float, float]:
    """Replies per second to `connections` connections spread over `processes` processes,
    one request outstanding on each, over `seconds`; and the server's (`pid`) CPU time per
    reply in µs, a figure other load on the machine barely moves."""
    start = time.time() + 0.5
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", LOAD_WORKER, path, str(share), str(start), str(seconds)],
            stdout=subprocess.PIPE,
        )
        for share in split(connections, processes)
    ]
    time.sleep(max(0.0, start - time.time()))
    cpu_before = cpu_seconds(pid)
    total = 0
    for worker in workers:
        out, _ = worker.communicate(timeout=seconds + 60)
        total += int(out)
    cpu = cpu_seconds(pid) - cpu_before
    return total / seconds, cpu / max(total, 1) * 1e6


def split(total: int, parts: int) -> list[int]:
    return [total // parts + (1 if index < total % parts else 0) for index in range(parts)]


def interleaved_p50(paths: tuple[str, str], count: int) -> tuple[float, float]:
    """p50 in µs of `count` ``daemon/status`` round trips to each of two servers, on one
    connection each, the two servers' requests interleaved one by one (which goes first
    alternates), after 200 unmeasured ones each: both see the same moments of the machine."""
    import socket

    def round_trip(sock: socket.socket) -> int:
        started = time.perf_counter_ns()
        sock.sendall(REQUEST)
        reply = sock.recv(65536)
        while not reply.endswith(b"\n"):
            reply += sock.recv(65536)
        return time.perf_counter_ns() - started

    with contextlib.ExitStack() as stack:
        sockets = []
        for path in paths:
            sock = stack.enter_context(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
            sock.connect(path)
            sockets.append(sock)
        samples: tuple[list[int], list[int]] = ([], [])
        for index in range(count + 200):
            order = (0, 1) if index % 2 == 0 else (1, 0)
            for side in order:
                took = round_trip(sockets[side])
                if index >= 200:
                    samples[side].append(took)
    return statistics.median(samples[0]) / 1000, statistics.median(samples[1]) / 1000


@contextlib.contextmanager
def placed(servers: tuple[int, ...]) -> Iterator[bool]:
    """With two CPUs or more this process may run on, this process on the first and every
    thread of each server pid on the second (threads a server starts later inherit it), for
    the block; yields whether it did. This process's CPUs are given back afterwards."""
    if not hasattr(os, "sched_setaffinity"):
        yield False
        return
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2:
        yield False
        return
    os.sched_setaffinity(0, {allowed[0]})
    try:
        for pid in servers:
            for thread in os.listdir(f"/proc/{pid}/task"):
                with contextlib.suppress(ProcessLookupError):
                    os.sched_setaffinity(int(thread), {allowed[1]})
        yield True
    finally:
        os.sched_setaffinity(0, allowed)
        for pid in servers:
            for thread in os.listdir(f"/proc/{pid}/task"):
                with contextlib.suppress(ProcessLookupError):
                    os.sched_setaffinity(int(thread), allowed)


def floor_figures(
    robotad: tuple[str, int], floor: tuple[str, int], count: int, rounds: int
) -> None:
    """The issue's figures: robotad against the canned-reply floor, per round (module doc).
    Each server is given as (socket path, pid)."""
    latencies: list[tuple[float, float]] = []
    free: list[tuple[float, float]] = []
    rates: list[tuple[float, float]] = []
    cpu: list[tuple[float, float]] = []
    with placed((robotad[1], floor[1])) as pinned:
        for _ in range(rounds):
            latencies.append(interleaved_p50((robotad[0], floor[0]), count))
    for round_number in range(rounds):
        pair = [robotad, floor] if round_number % 2 == 0 else [floor, robotad]
        p50 = {server: blocking_p50(server[0], count) for server in pair}
        free.append((p50[robotad], p50[floor]))
        rate = {server: aggregate_rate(*server, 4, 20, 2.0) for server in pair}
        rates.append((rate[robotad][0], rate[floor][0]))
        cpu.append((rate[robotad][1], rate[floor][1]))

    def summary(pairs: list[tuple[float, float]]) -> tuple[float, float, float, float, float]:
        ratios = sorted(ours / floor for ours, floor in pairs)
        ours = statistics.median(p[0] for p in pairs)
        floor = statistics.median(p[1] for p in pairs)
        return ours, floor, statistics.median(ratios), ratios[0], ratios[-1]

    print(f"blocking client vs the canned-reply trio floor ({rounds} rounds):")
    ours, floor, ratio, low, high = summary(latencies)
    where = "client and servers on two CPUs" if pinned else "one CPU: free placement"
    print(
        f"  daemon/status p50, one connection, interleaved ({where}): robotad {ours:6.1f} µs"
        f"   floor {floor:6.1f} µs   ratio {ratio:4.2f} × ({low:.2f}–{high:.2f})"
        "   (target ≤ 1.5 ×)"
    )
    ours, floor, ratio, low, high = summary(free)
    print(
        f"  the same, free placement, the servers taking turns: robotad {ours:6.1f} µs   "
        f"floor {floor:6.1f} µs   ratio {ratio:4.2f} × ({low:.2f}–{high:.2f})"
    )
    ours, floor, ratio, low, high = summary(rates)
    print(
        f"  aggregate, 20 connections from 4 processes: robotad {ours:8,.0f} req/s   floor "
        f"{floor:8,.0f} req/s   ratio {ratio:4.2f} × ({low:.2f}–{high:.2f})   (target ≥ 0.6 ×)"
    )
    ours, floor, ratio, low, high = summary(cpu)
    print(
        f"  server CPU per request under that load: robotad {ours:5.1f} µs   floor "
        f"{floor:5.1f} µs   ratio {ratio:4.2f} × ({low:.2f}–{high:.2f})"
    )


# -- measuring: the in-process trio client ---------------------------------------------------


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
    parser.add_argument("--rounds", type=int, default=5, help="alternating floor rounds")
    parser.add_argument("--floor-only", action="store_true", help="only the floor figures")
    parser.add_argument("--profile", action="store_true", help="profile an in-process daemon")
    args = parser.parse_args()
    count = args.requests

    base = Path(tempfile.mkdtemp(prefix="rpcb-", dir="/tmp"))
    try:
        robotad_sock = str(base / "run" / "robotad.sock")
        echo_sock = str(base / "echo.sock")
        floor_sock = str(base / "floor.sock")

        def robotad_cmd(fd: int) -> list[str]:
            options = ["--socket", robotad_sock, "--ready-fd", str(fd), "--log-level", "warning"]
            return [sys.executable, "-m", "robotad", *options]

        def echo_cmd(fd: int) -> list[str]:
            return [sys.executable, "-c", ECHO_SERVER, echo_sock, str(fd)]

        def floor_cmd(fd: int) -> list[str]:
            return [sys.executable, "-c", CANNED_SERVER, floor_sock, str(fd)]

        with server_process(robotad_cmd) as ours, server_process(floor_cmd) as floor:
            floor_figures(
                (robotad_sock, ours.pid), (floor_sock, floor.pid), min(count, 5_000), args.rounds
            )
        if args.floor_only:
            return
        with server_process(robotad_cmd), server_process(echo_cmd):
            print(f"trio client: daemon/status round trips on one connection ({count} requests):")
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
