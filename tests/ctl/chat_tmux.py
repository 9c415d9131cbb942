"""``robotactl chat`` in a real pseudo-terminal: a private tmux server per terminal.

`ChatTerminal` starts ``python -m robotactl --socket S chat ARGS`` in a detached tmux session
of the given size (its own server socket, no user configuration), types with ``send-keys``
and reads the screen with ``capture-pane`` (scrollback included). `wait_for` polls the screen
under a deadline (`PROCESS_TIMEOUT`) — never a fixed sleep — and fails with the screen as it
was. When robotactl exits, the pane prints ``[exit N]`` and stays, so the status can be read.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from .conftest import PROCESS_TIMEOUT, REPO

__all__ = ["ChatTerminal", "require_tmux"]

#: Seconds between two looks at the screen while waiting.
POLL = 0.05


def require_tmux() -> str:
    """tmux's path; the test skips (saying why) where it is missing — CI installs it."""
    path = shutil.which("tmux")
    if path is None:
        pytest.skip("tmux is not installed (.ci/run installs it)")
    return path


class ChatTerminal:
    """One robotactl chat in a tmux pane `width` × `height`."""

    def __init__(
        self,
        directory: Path,
        socket_path: Path,
        args: list[str],
        *,
        env: dict[str, str],
        cwd: Path,
        width: int = 100,
        height: int = 40,
    ) -> None:
        self.tmux = require_tmux()
        self.server = directory / f"tmux-{time.monotonic_ns()}.sock"
        self.env = env
        argv = [sys.executable, "-m", "robotactl", "--socket", str(socket_path), "chat", *args]
        command = f'{shlex.join(argv)}; echo "[exit $?]"; sleep {int(PROCESS_TIMEOUT) * 4}'
        self._tmux(
            "new-session", "-d", "-s", "chat", "-x", str(width), "-y", str(height),
            "-c", str(cwd), command,
        )  # fmt: skip
        self._tmux("set-option", "-t", "chat", "history-limit", "5000")

    def _tmux(self, *args: str) -> str:
        result = subprocess.run(
            [self.tmux, "-S", str(self.server), "-f", "/dev/null", *args],
            capture_output=True,
            text=True,
            env={**self.env, "PYTHONPATH": str(REPO)},
            timeout=PROCESS_TIMEOUT,
            check=False,
        )
        if result.returncode != 0:
            raise AssertionError(f"tmux {args[0]} failed: {result.stderr}")
        return result.stdout

    def screen(self, *, escapes: bool = False) -> str:
        """The pane's text, scrollback included (with SGR escapes when `escapes`)."""
        extra = ["-e"] if escapes else []
        return self._tmux("capture-pane", "-p", "-t", "chat", "-S", "-5000", *extra)

    def wait_for(self, wanted: str | Callable[[str], bool], what: str = "") -> str:
        """The screen once it contains `wanted` (or `wanted(screen)` holds)."""
        check = wanted if callable(wanted) else (lambda screen: wanted in screen)
        deadline = time.monotonic() + PROCESS_TIMEOUT
        screen = self.screen()
        while not check(screen):
            if time.monotonic() > deadline:
                raise AssertionError(f"{what or wanted!r} never appeared on:\n{screen}")
            time.sleep(POLL)
            screen = self.screen()
        return screen

    def ready(self) -> str:
        """The screen once the prompt and its status line are drawn."""
        return self.wait_for(
            lambda s: any(line.rstrip() == "›" for line in s.splitlines()) and " · " in s,
            "the prompt",
        )

    def idle(self) -> str:
        """The screen once no turn runs (the status line says so) and the input is empty."""

        def idle(screen: str) -> bool:
            lines = screen.rstrip().splitlines()
            return (
                len(lines) >= 2
                and lines[-2].rstrip() == "›"
                and " · " in lines[-1]
                and "thinking" not in lines[-1]
                and "aborting" not in lines[-1]
            )

        return self.wait_for(idle, "an idle prompt")

    def type(self, text: str) -> None:
        """Type `text` literally (no key names)."""
        self._tmux("send-keys", "-t", "chat", "-l", text)

    def keys(self, *keys: str) -> None:
        """Press keys by tmux name: ``Enter``, ``C-c``, ``Up``, ``M-Enter``…"""
        self._tmux("send-keys", "-t", "chat", *keys)

    def paste(self, text: str) -> None:
        """Paste `text` as a terminal does (bracketed, when the program asked for it)."""
        self._tmux("set-buffer", text)
        self._tmux("paste-buffer", "-p", "-t", "chat")

    def send(self, text: str) -> None:
        """Type `text` and press Enter."""
        self.type(text)
        self.keys("Enter")

    def wait_exit(self) -> int:
        """robotactl's exit status once it has exited."""
        screen = self.wait_for(lambda s: "[exit " in s, "the chat's exit")
        return int(screen.split("[exit ", 1)[1].split("]", 1)[0])

    def close(self) -> None:
        subprocess.run(
            [self.tmux, "-S", str(self.server), "kill-server"],
            capture_output=True,
            timeout=PROCESS_TIMEOUT,
            check=False,
        )
