"""The README's shell examples, run as written (issue 14: documentation that must work).

Every fenced ``sh``/``bash``/``console`` block of README.md runs, in order, with ``bash -e`` in
one private home (its own HOME, XDG folders and runtime folder; robotad and robotactl of this
checkout on PATH; the daemons it starts stopped at the end). The README source marks the
exceptions in an HTML comment on the line before the fence:

- ``<!-- not run: WHY -->`` — cannot run offline here (needs PyPI, a systemd user manager,
  placeholders for ids); never run, and WHY must be said;
- ``<!-- run: serves -->`` — every line starts a daemon that serves until stopped: each is
  started, must log that it serves (``serving …`` or systemd-socket-activate's ``Listening
  on …``), must answer ``daemon/status`` on its socket with the private state folder (which
  proves the documented environment reaches it), and is then shut down; it must exit 0.

Also: the hook events the README lists are exactly those the configuration accepts.
"""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from robotad.config import HOOK_EVENTS
from tests.robotad_process import PROCESS_TIMEOUT, REPO

README = REPO / "README.md"
_FENCE = re.compile(r"^```(\w*)\s*$")
_MARK = re.compile(r"^<!--\s*(not run|run: serves)\b(.*?)-->\s*$")
_SHELLS = {"sh", "bash", "console"}


@dataclass(frozen=True)
class Block:
    line: int
    text: str
    mark: str | None  # None: run it; "not run"; "run: serves"
    why: str


def shell_blocks(text: str) -> list[Block]:
    """The README's shell blocks with the mark on the line before each (if any)."""
    lines = text.splitlines()
    blocks: list[Block] = []
    index = 0
    while index < len(lines):
        opened = _FENCE.match(lines[index])
        if not opened or not opened.group(1):
            index += 1
            continue
        end = index + 1
        while not lines[end].startswith("```"):
            end += 1
        if opened.group(1) in _SHELLS:
            before = lines[index - 1].strip() if index else ""
            mark = _MARK.match(before)
            blocks.append(
                Block(
                    index + 1,
                    "\n".join(lines[index + 1 : end]),
                    mark.group(1) if mark else None,
                    mark.group(2).lstrip(": ").strip() if mark else "",
                )
            )
        index = end + 1
    return blocks


@pytest.fixture
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """A private environment for the examples; daemons left on its default socket stopped."""
    root = tmp_path_factory.mktemp("readme")
    env = {
        "HOME": str(root / "home"),
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), "/usr/bin", "/bin"]),
        "LANG": "C.UTF-8",
        "NO_COLOR": "1",
        "XDG_RUNTIME_DIR": str(root / "run"),
        "XDG_STATE_HOME": str(root / "home" / ".local" / "state"),
        "XDG_CONFIG_HOME": str(root / "home" / ".config"),
        "XDG_CACHE_HOME": str(root / "home" / ".cache"),
        "XDG_DATA_HOME": str(root / "home" / ".local" / "share"),
    }
    for name in ("HOME", "XDG_RUNTIME_DIR"):
        Path(env[name]).mkdir(mode=0o700)
    try:
        yield env
    finally:
        subprocess.run(
            ["robotactl", "--no-autostart", "shutdown", "--wait", "--grace", "1"],
            env=env,
            capture_output=True,
            timeout=PROCESS_TIMEOUT,
            check=False,
        )


def test_the_readme_marks_what_it_does_not_run() -> None:
    blocks = shell_blocks(README.read_text())
    assert len(blocks) >= 8
    for block in blocks:
        if block.mark == "not run":
            assert block.why, f"README line {block.line}: say why the block is not run"
    assert any(block.mark is None for block in blocks)
    assert any(block.mark == "run: serves" for block in blocks)


def test_the_readme_shell_examples_run_as_written(home: dict[str, str]) -> None:
    if shutil.which("socat") is None or shutil.which("systemd-socket-activate") is None:
        pytest.skip("socat or systemd-socket-activate is missing (.ci/run installs both)")
    for block in shell_blocks(README.read_text()):
        if block.mark == "not run":
            continue
        if block.mark == "run: serves":
            for command in block.text.splitlines():
                if command.strip():
                    _serve_and_stop(command, home, block.line)
            continue
        done = subprocess.run(
            ["bash", "-e", "-c", block.text],
            env=home,
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=PROCESS_TIMEOUT * 2,
            check=False,
        )
        assert done.returncode == 0, (
            f"README line {block.line}:\n{block.text}\n--- stdout\n{done.stdout}\n"
            f"--- stderr\n{done.stderr}"
        )


def _expand(text: str, env: dict[str, str]) -> str:
    return re.sub(r"\$\{?(\w+)\}?", lambda m: env.get(m.group(1), ""), text)


def _socket_of(command: str, env: dict[str, str]) -> Path:
    named = re.search(r'(?:--socket|-l)\s+"?([^"\s]+)"?', command)
    where = named.group(1) if named else "$XDG_RUNTIME_DIR/robota/robotad.sock"
    return Path(_expand(where, env))


def _serve_and_stop(command: str, env: dict[str, str], line: int) -> None:
    """Start `command`, wait for it to serve, check it, shut it down (see the module doc)."""
    process = subprocess.Popen(
        ["bash", "-c", f"exec {command}"],
        env=env,
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    assert process.stdout is not None
    seen = b""
    try:
        deadline = time.monotonic() + PROCESS_TIMEOUT
        while b"serving " not in seen and b"Listening on" not in seen:
            remaining = deadline - time.monotonic()
            readable, _, _ = select.select([process.stdout], [], [], max(0.0, remaining))
            chunk = os.read(process.stdout.fileno(), 65536) if readable else b""
            assert chunk, f"README line {line}: {command!r} never served:\n{seen.decode()}"
            seen += chunk
        socket_path = str(_socket_of(command, env))
        status = subprocess.run(
            ["robotactl", "--no-autostart", "--socket", socket_path, "--json", "status"],
            env=env,
            capture_output=True,
            text=True,
            timeout=PROCESS_TIMEOUT,
            check=False,
        )
        assert status.returncode == 0, f"README line {line}: {status.stderr}"
        state = json.loads(status.stdout)["stateDir"]
        assert state == str(Path(env["XDG_STATE_HOME"]) / "robota"), (line, command)
        subprocess.run(
            ["robotactl", "--no-autostart", "--socket", socket_path, "shutdown"],
            env=env,
            capture_output=True,
            timeout=PROCESS_TIMEOUT,
            check=True,
        )
        assert process.wait(PROCESS_TIMEOUT) == 0, f"README line {line}: {command!r}"
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        process.stdout.close()


def test_the_readme_lists_exactly_the_hook_events_the_config_accepts() -> None:
    text = " ".join(README.read_text().split())
    listed = re.search(r"per event, with a `matcher`.*?\):(.*?)\.", text)
    assert listed is not None
    named = set(re.findall(r"`(\w+)`", listed.group(1)))
    assert named == set(HOOK_EVENTS)


def test_the_error_messages_the_readme_quotes_are_the_ones_printed(tmp_path: Path) -> None:
    """A reader searches for the message on their screen: the README's quotes of a config
    error and of a second daemon's refusal are what robotad prints."""
    from protocol.instance_lock import PREDECESSOR_WAIT
    from protocol.validate import ValidationFailed
    from robotad.config import decode_config
    from robotad.server.lock import AlreadyRunning

    text = README.read_text()
    with pytest.raises(ValidationFailed) as refused:
        decode_config('[providers.local]\nkind = "openai"\nbase_url = 1\n')
    [issue] = refused.value.issues
    assert f"`{issue['path']}: {issue['message']}`" in text
    running = str(AlreadyRunning(tmp_path / "robotad.lock", 4242))
    quoted = running.replace("4242", "N").replace(str(tmp_path), "…")
    assert f"`{quoted}`" in text
    stopping = AlreadyRunning(tmp_path / "robotad.lock", 4242, stopping=True)
    waited = f"{stopping} after {PREDECESSOR_WAIT:g} s of waiting for\n  it to exit"
    assert f"`{waited.replace('4242', 'N').replace(str(tmp_path), '…')}`" in text
