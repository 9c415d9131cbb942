"""A real ``llama-server`` (llama.cpp) on a loopback port, for the tests and the benchmark.

`start_llama_server` runs the cached binary (see `tests.real.build_deps`) with the SmolLM2 model
on 127.0.0.1 and a free port, stdout and stderr appended to a log file, and returns once
``GET /health`` answers 200 (polled under `START_TIMEOUT`; the test fails with the server's
output when it exits or stays unready). `LlamaServer.stop` terminates it and reaps it,
escalating to SIGKILL. `pause`/`resume` send SIGSTOP/SIGCONT: a stopped server keeps its port
and its accepted connections but answers nothing — the "hung server" case.

Nothing here contacts an address other than 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

__all__ = ["START_TIMEOUT", "LlamaServer", "free_port", "running_servers", "start_llama_server"]

#: Bound on a server's start (model load included) on a busy two-core machine.
START_TIMEOUT = 120.0
_STOP_TIMEOUT = 15.0

#: Every server started and not yet stopped, for a failed test's report (`running_servers`).
_RUNNING: list[LlamaServer] = []


def running_servers() -> list[LlamaServer]:
    """The servers of this process that are running now, oldest first."""
    return list(_RUNNING)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass
class LlamaServer:
    """One running llama-server process."""

    process: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def origin(self) -> str:
        """``http://127.0.0.1:PORT`` (the Anthropic SDK's base URL)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1`` (the OpenAI SDK's base URL)."""
        return f"{self.origin}/v1"

    def healthy(self) -> bool:
        """Whether ``GET /health`` answers 200 now."""
        return _healthy(self.origin)

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def pause(self) -> None:
        """SIGSTOP: the server keeps its port but answers nothing until `resume`."""
        os.kill(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.kill(self.process.pid, signal.SIGCONT)

    def stop(self) -> None:
        """Terminate and reap (a paused server is resumed first so it can exit cleanly)."""
        if self in _RUNNING:
            _RUNNING.remove(self)
        if self.process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            self.resume()
        self.process.terminate()
        try:
            self.process.wait(timeout=_STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=_STOP_TIMEOUT)


def start_llama_server(
    binary: Path, model: Path, log: Path, *extra: str, port: int | None = None
) -> LlamaServer:
    """Start `binary` serving `model` on 127.0.0.1 and return once ``/health`` says ready.

    The command: ``-a smollm2 -c 4096 -np 1 -t 1 --jinja --no-webui``, then `extra` (``-n 16``
    caps every generation, for instance). One thread, not two: llama.cpp's threads meet at a
    barrier after every operation, and on a shared, loaded machine a second thread made
    generation thirty times slower (1.3 against 41 tokens/s measured here); a 135M model
    needs no second one. Raises `RuntimeError`
    with the server's output when it exits or is not ready within `START_TIMEOUT`."""
    port = port or free_port()
    command = [
        str(binary),
        "-m",
        str(model),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "-a",
        "smollm2",
        "-c",
        "4096",
        "-np",
        "1",
        "-t",
        "1",
        "--jinja",
        "--no-webui",
        *extra,
    ]
    with open(log, "ab") as sink:
        process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT
        )
    server = LlamaServer(process, port, log)
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"llama-server exited {process.returncode}:\n{server.output()}")
        if _healthy(server.origin):
            _RUNNING.append(server)
            return server
        time.sleep(0.1)  # polling an external process's readiness; nothing to wait on instead
    server.stop()
    raise RuntimeError(f"llama-server not ready in {START_TIMEOUT:g} s:\n{server.output()}")


def _healthy(origin: str) -> bool:
    try:
        with urllib.request.urlopen(f"{origin}/health", timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False
