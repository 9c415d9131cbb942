"""robotactl start-up: wall time of one-shot commands from a fresh process, against a live daemon.

Run: ``.venv/bin/python bench/ctl_startup.py [--runs N]``. Prints medians; asserts nothing.

Each figure is the median wall time of N subprocess runs (after one warm-up run that also
fills the bytecode caches) against one robotad started here on a private temporary socket and
state directory:

- ``python -c pass``: the interpreter's own start-up, the floor for any Python client;
- ``socat``: the same ``daemon/status`` request written by hand (skipped without socat);
- ``robotactl status`` and ``robotactl ls``: the blocking, trio-free path;
- the trio path: the ``status`` command's work done through `run_with_daemon` (a trio peer),
  as every command did before the blocking client, for comparison.
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
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
REQUEST = b'{"jsonrpc":"2.0","id":1,"method":"daemon/status"}\n'

#: ``status`` as it ran before the blocking client: trio.run around a JsonRpcPeer.
TRIO_STATUS = """
import sys
from datetime import UTC, datetime
from robotactl.cli import ClientOptions, run_with_daemon
from robotactl.commands.daemon import status_rows

async def ask(peer):
    return await peer.request("daemon/status", {})

options = ClientOptions(socket=sys.argv[1], autostart=False)
options.output.table(status_rows(run_with_daemon(options, ask), now=datetime.now(UTC)))
"""


def isolated_environment(base: Path) -> dict[str, str]:
    """This checkout importable; every XDG folder and robota override inside `base`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROBOTA_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    for name in ("XDG_STATE_HOME", "XDG_CONFIG_HOME", "XDG_RUNTIME_DIR", "XDG_CACHE_HOME"):
        folder = base / name.lower()
        folder.mkdir(mode=0o700)
        env[name] = str(folder)
    return env


@contextlib.contextmanager
def robotad(socket_path: Path, env: dict[str, str]) -> Iterator[None]:
    """A daemon serving at `socket_path` (it reports readiness on a pipe) for the block."""
    read_end, write_end = os.pipe()
    argv = [sys.executable, "-m", "robotad", "--socket", str(socket_path)]
    process = subprocess.Popen(
        [*argv, "--ready-fd", str(write_end), "--log-level", "warning"],
        pass_fds=(write_end,),
        env=env,
        stdin=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    os.close(write_end)
    with os.fdopen(read_end, "rb") as ready:
        if not ready.read(1):
            process.kill()
            raise SystemExit("robotad did not start")
    try:
        yield
    finally:
        process.terminate()
        process.wait(30)


def median_ms(
    command: list[str], runs: int, env: dict[str, str], stdin: bytes | None = None
) -> float:
    """Median wall time of `command` in milliseconds, after one warm-up run."""
    times = []
    for index in range(runs + 1):
        started = time.perf_counter()
        subprocess.run(command, input=stdin, check=True, capture_output=True, env=env, timeout=60)
        if index:
            times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21, help="runs per figure (default 21)")
    runs = parser.parse_args().runs

    base = Path(tempfile.mkdtemp(prefix="ctlb-", dir="/tmp"))
    try:
        env = isolated_environment(base)
        socket_path = base / "run" / "robotad.sock"
        ctl = [sys.executable, "-m", "robotactl", "--socket", str(socket_path), "--no-autostart"]
        with robotad(socket_path, env):
            print(
                f"one request from a fresh process, median of {runs} runs ({os.cpu_count()} cores):"
            )
            bare = median_ms([sys.executable, "-c", "pass"], runs, env)
            print(f"  python -c pass                  {bare:7.1f} ms   (interpreter start-up)")
            if shutil.which("socat") is None:
                print("  socat                           skipped: socat is not installed")
            else:
                socat = ["socat", "-", f"UNIX-CONNECT:{socket_path}"]
                theirs = median_ms(socat, runs, env, stdin=REQUEST)
                print(f"  socat                           {theirs:7.1f} ms")
            status = median_ms([*ctl, "status"], runs, env)
            print(f"  robotactl status (blocking)     {status:7.1f} ms")
            listing = median_ms([*ctl, "ls"], runs, env)
            print(f"  robotactl ls (blocking)         {listing:7.1f} ms")
            old = median_ms([sys.executable, "-c", TRIO_STATUS, str(socket_path)], runs, env)
            print(f"  status through trio (old path)  {old:7.1f} ms")
            print(
                f"  blocking saves {old - status:.1f} ms per command "
                f"({old / status:.1f} × faster); {status - bare:.1f} ms above python -c pass"
            )
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
