"""How far robotad's turn is from the least any trio server does for one.

Run: ``.venv/bin/python bench/turn_skeleton.py [--turns N]``. Prints figures; asserts nothing.

`bench/turns.py` compares a turn with the fsync floor alone. This adds the other bound: a
skeleton trio server (below, ~40 lines, no session logic) that for each ``session/run`` line
does only what a durable turn must — save a record of a 50-turn session's size as robotad
does (a temporary file written and fsynced in a worker thread, renamed, its folder fsynced),
then send six event frames and the reply. One blocking client (no trio, no JSON parsing
beyond finding the reply and ``turn_finished``) times a turn of robotad, then one of the
skeleton, then the fsync floor of `bench/turns.py`, turn after turn, so load from elsewhere
falls on all three alike. Printed: each median, and robotad's and the skeleton's ratios to
the floor; the gap between them is robotad's own work per turn (session, history, log,
events, journal), which is what a target below the skeleton's ratio has to take out.
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from turns import TURNS_PER_SESSION, fsync_floor

from tests.system.daemon_process import DaemonProcess, daemon_home

#: The skeleton: a trio server on a Unix socket (argv[1]) saving into a folder (argv[2]).
SKELETON = r"""
import functools, json, os, sys, trio
import trio.lowlevel as ll
STATE = sys.argv[2]
MESSAGE = b'{"role":"user","content":"' + b"x" * 100 + b'"}'
RECORD = b'{"messages":[' + b",".join([MESSAGE] * 100) + b"]}"
def save():
    temporary = os.path.join(STATE, "s.json.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, RECORD)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(temporary, os.path.join(STATE, "s.json"))
    folder = os.open(STATE, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)
async def in_thread(function):
    token, task = ll.current_trio_token(), ll.current_task()
    ll.start_thread_soon(function, lambda out: token.run_sync_soon(ll.reschedule, task, out))
    return await ll.wait_task_rescheduled(lambda _: ll.Abort.FAILED)
def frame(body):
    return json.dumps({"jsonrpc": "2.0", **body}).encode() + b"\n"
async def turn(stream, request):
    for seq in range(5):
        event = {"sessionId": "s", "seq": seq, "type": "text_delta", "text": "x" * 40}
        await stream.send_all(frame({"method": "session/event", "params": event}))
    await in_thread(save)
    finished = {"sessionId": "s", "seq": 5, "type": "turn_finished", "status": "completed"}
    await stream.send_all(frame({"method": "session/event", "params": finished}))
    await stream.send_all(frame({"id": request["id"], "result": {"status": "completed"}}))
async def serve(stream):
    buffer = b""
    async with trio.open_nursery() as nursery:
        while data := await stream.receive_some(65536):
            buffer += data
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                nursery.start_soon(turn, stream, json.loads(line))
async def main():
    listening = trio.socket.socket(trio.socket.AF_UNIX)
    await listening.bind(sys.argv[1])
    listening.listen(16)
    print("ready", flush=True)
    await trio.serve_listeners(serve, [trio.SocketListener(listening)])
trio.run(main)
"""


class BlockingClient:
    """One connection, one request at a time; `turn` returns once both the reply and the
    turn's ``turn_finished`` event have arrived (they travel separately)."""

    def __init__(self, path: Path) -> None:
        self._socket = socket.socket(socket.AF_UNIX)
        self._socket.connect(str(path))
        self._lines = self._socket.makefile("rb")
        self._id = 0

    def call(self, method: str, params: dict[str, object], *, finished: bool = False) -> None:
        self._id += 1
        request = {"jsonrpc": "2.0", "id": self._id, "method": method, "params": params}
        self._socket.sendall(json.dumps(request).encode() + b"\n")
        replied, ended = False, not finished
        while not (replied and ended):
            line = self._lines.readline()
            if not line:
                raise SystemExit("the server closed the connection")
            message = json.loads(line)
            if message.get("id") == self._id:
                if "error" in message:
                    raise SystemExit(f"{method} failed: {message['error']}")
                replied = True
            elif message.get("params", {}).get("type") == "turn_finished":
                ended = True

    def turn(self, params: dict[str, object]) -> float:
        started = time.perf_counter()
        self.call("session/run", params, finished=True)
        return time.perf_counter() - started

    def close(self) -> None:
        self._lines.close()
        self._socket.close()


def measure(turns: int) -> None:
    with daemon_home() as home, tempfile.TemporaryDirectory(dir=home.root) as scratch:
        folder = Path(scratch)
        (folder / "state").mkdir()
        (folder / "floor").mkdir()
        skeleton = subprocess.Popen(
            [sys.executable, "-c", SKELETON, str(folder / "s.sock"), str(folder / "state")],
            stdout=subprocess.PIPE,
        )
        daemon = DaemonProcess(home).start()
        try:
            if skeleton.stdout is None or skeleton.stdout.readline() != b"ready\n":
                raise SystemExit("the skeleton server did not start")
            robotad = BlockingClient(daemon.socket_path)
            least = BlockingClient(folder / "s.sock")
            cwd = str(home.workspace("skeleton"))
            times: tuple[list[float], list[float], list[float]] = ([], [], [])
            for index in range(turns):
                session_id = f"skeleton-{index // TURNS_PER_SESSION}"
                if index % TURNS_PER_SESSION == 0:
                    robotad.call("session/create", {"cwd": cwd, "sessionId": session_id})
                params = {"sessionId": session_id, "prompt": f"prompt {index}"}
                times[0].append(robotad.turn(params))
                times[1].append(least.turn(params))
                times[2].append(fsync_floor(folder / "floor", index)[0])
            robotad.close()
            least.close()
        finally:
            daemon.stop()
            skeleton.kill()
            skeleton.wait()
    turn, bare, floor = (statistics.median(side) * 1e3 for side in times)
    print(
        f"over {turns} turns, a blocking client: robotad {turn:.2f} ms ({turn / floor:.2f} × the "
        f"fsync floor); the skeleton trio server {bare:.2f} ms ({bare / floor:.2f} ×); the floor "
        f"(4 fsyncs) {floor:.2f} ms. robotad's own work: {turn - bare:.2f} ms a turn"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=600, help="turns to time on each side")
    measure(parser.parse_args().turns)
