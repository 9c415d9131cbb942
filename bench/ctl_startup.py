"""robotactl start-up: wall time of one-shot commands from a fresh process, against a live daemon.

Run: ``.venv/bin/python bench/ctl_startup.py [--runs N]``. Prints medians; asserts nothing.

Each figure is the median wall time of N subprocess runs (after one warm-up run that also
fills the bytecode caches) against one robotad started here on a private temporary socket and
state directory. The commands run from a non-editable install of this checkout in a private
venv built here (``pip install --no-deps``; click, msgspec and trio come from this venv's
site-packages through a ``.pth`` line), as a user's installed ``robotactl`` runs: an editable
install's import hook costs every process, ``python -c pass`` included, and hides the ratio.
The runs of the figures alternate (one of each per round), so load from elsewhere on the
machine falls on all of them alike:

- ``python -c pass`` of that venv: the interpreter's own start-up, the floor for any Python
  client (issue target: ``robotactl status`` ≤ 3× this floor);
- ``socat``: the same ``daemon/status`` request written by hand (skipped without socat);
- ``robotactl status``: the quick path (`robotactl.entry`: no click, no msgspec);
- ``status`` through click: the same command through `robotactl.cli.main` and the blocking
  client, as it ran before the quick path;
- ``robotactl ls``: a one-shot command on the click + blocking-client path;
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

#: ``status`` through the click CLI and the blocking client, as it ran before the quick path.
CLICK_STATUS = "from robotactl.console import main; main()"

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


def installed_copy(base: Path) -> Path:
    """A venv under `base` with this checkout installed non-editable; its bin directory."""
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    purelib = next((venv / "lib").glob("python3*/site-packages"))
    ours = [p for p in sys.path if p.endswith("site-packages")]
    (purelib / "_deps.pth").write_text("\n".join(ours) + "\n")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--target",
            str(purelib),
            str(REPO),
        ],
        check=True,
        capture_output=True,
        cwd=base,
    )
    bin_dir = venv / "bin"
    script = bin_dir / "robotactl"
    script.write_text(
        f"#!{bin_dir / 'python'}\nfrom robotactl.entry import main\nmain()\n", encoding="utf-8"
    )
    script.chmod(0o755)
    return bin_dir


def alternating_medians(
    commands: dict[str, list[str]], runs: int, env: dict[str, str], stdin: bytes
) -> dict[str, float]:
    """Median wall time (ms) of each command, the runs interleaved round by round after one
    warm-up round; `stdin` goes to every command (only socat reads it)."""
    times: dict[str, list[float]] = {name: [] for name in commands}
    for index in range(runs + 1):
        for name, command in commands.items():
            started = time.perf_counter()
            subprocess.run(
                command, input=stdin, check=True, capture_output=True, env=env, timeout=60
            )
            if index:
                times[name].append(time.perf_counter() - started)
    return {name: statistics.median(values) * 1000 for name, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21, help="runs per figure (default 21)")
    runs = parser.parse_args().runs

    base = Path(tempfile.mkdtemp(prefix="ctlb-", dir="/tmp"))
    try:
        env = isolated_environment(base)
        socket_path = base / "run" / "robotad.sock"
        bin_dir = installed_copy(base)
        python = str(bin_dir / "python")
        installed_env = {k: v for k, v in env.items() if k != "PYTHONPATH"}
        options = ["--socket", str(socket_path), "--no-autostart"]
        commands = {
            "python -c pass": [python, "-c", "pass"],
            "robotactl status": [str(bin_dir / "robotactl"), *options, "status"],
            "status through click": [python, "-c", CLICK_STATUS, *options, "status"],
            "robotactl ls": [str(bin_dir / "robotactl"), *options, "ls"],
            "status through trio": [python, "-c", TRIO_STATUS, str(socket_path)],
        }
        if shutil.which("socat") is not None:
            commands["socat"] = ["socat", "-", f"UNIX-CONNECT:{socket_path}"]
        with robotad(socket_path, env):
            figures = alternating_medians(commands, runs, installed_env, REQUEST)
        floor = figures["python -c pass"]
        print(
            f"one request from a fresh process, installed non-editable, median of {runs} "
            f"alternating runs ({os.cpu_count()} cores):"
        )
        for name, millis in figures.items():
            print(f"  {name:22s} {millis:7.1f} ms   {millis / floor:5.2f} × python -c pass")
        if "socat" not in figures:
            print("  socat                  skipped: socat is not installed")
        ratio = figures["robotactl status"] / floor
        print(
            f"robotactl status: {ratio:.2f} × the interpreter's start-up (target ≤ 3 ×: "
            f"{'ok' if ratio <= 3 else 'OVER TARGET'}); through click it was "
            f"{figures['status through click'] / floor:.2f} ×"
        )
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
