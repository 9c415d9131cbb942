"""``robotactl status``'s quick path (`robotactl.entry`): what it imports, what it prints, and
when it steps aside for the click CLI.

The module set is read with ``python -X importtime`` (every module the process imported, in
order), minus what the interpreter and ``runpy`` import on their own in the same environment,
so an editable install's import hook or a site customisation does not count against it.
"""

from __future__ import annotations

import contextlib
import io
import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stdout
from datetime import UTC, datetime
from pathlib import Path

import pytest

from robotactl import entry
from robotactl.entry import quick_status, status_request_options
from robotactl.render import Output
from robotactl.status_view import status_rows

from .conftest import PROCESS_TIMEOUT, REPO, RunningDaemon, child_environment
from .ctl_helpers import sock

#: Every module a one-shot ``robotactl status`` may import beyond the interpreter's own: the
#: quick path, `_socket`, stdlib `json` (with the `re` it compiles its scanner with) and
#: `datetime`. No click, msgspec, typing, pathlib, socket, trio or daemon code.
ALLOWED_MODULES = frozenset(
    {
        "robotactl",
        "robotactl.entry",
        "robotactl.render",
        "robotactl.status_view",
        "robotactl.terminal_text",
        "protocol",
        "protocol.socket_path",
        "_socket",
        "json",
        "json.decoder",
        "json.scanner",
        "json.encoder",
        "_json",
        "datetime",
        "_datetime",
        "math",
        "collections.abc",
        # what `re` brings when the interpreter has not loaded it yet (a non-editable install)
        "re",
        "re._constants",
        "re._parser",
        "re._casefix",
        "re._compiler",
        "_sre",
        "copyreg",
        "enum",
        "functools",
        "_functools",
        "collections",
        "_collections",
        "keyword",
        "operator",
        "_operator",
        "reprlib",
        "itertools",
        "types",
    }
)
#: Modules the quick path exists to avoid; any of them loaded means it was bypassed.
FORBIDDEN_TOP_LEVEL = ("click", "msgspec", "typing", "pathlib", "socket", "trio", "robotad")


def imported_modules(*args: str) -> set[str]:
    """The modules ``python -X importtime ARGS`` imported, from its report on stderr."""
    completed = subprocess.run(
        [sys.executable, "-X", "importtime", *args],
        capture_output=True,
        text=True,
        env=child_environment(),
        cwd=REPO,
        timeout=PROCESS_TIMEOUT,
        check=True,
    )
    modules = set()
    for line in completed.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            name = line.rsplit("|", 1)[1].strip()
            if name != "imported package":
                modules.add(name)
    return modules


def test_one_shot_status_imports_only_what_it_uses(robotad: RunningDaemon) -> None:
    baseline = imported_modules("-c", "import runpy")
    loaded = imported_modules("-m", "robotactl", *sock(robotad), "status")
    extra = loaded - baseline
    assert "robotactl.entry" in extra
    assert extra <= ALLOWED_MODULES, sorted(extra - ALLOWED_MODULES)
    top_levels = {name.split(".")[0] for name in extra}
    assert not top_levels & set(FORBIDDEN_TOP_LEVEL)


def test_quick_path_prints_what_the_click_command_prints(robotad: RunningDaemon) -> None:
    def run(entry: str, *args: str) -> str:
        completed = subprocess.run(
            [sys.executable, "-c", f"from {entry} import main; main()", *sock(robotad), *args],
            capture_output=True,
            text=True,
            env=child_environment(),
            cwd=REPO,
            timeout=PROCESS_TIMEOUT,
            check=True,
        )
        return completed.stdout

    def without_uptime(text: str) -> list[str]:
        # the uptime value may tick between the two runs; its row's key and place must match
        return [line.split()[0] if line.startswith("uptime") else line for line in text.split("\n")]

    quick = run("robotactl.entry", "status")
    full = run("robotactl.console", "status")
    assert without_uptime(quick) == without_uptime(full)
    assert "pid" in quick
    quick_json = run("robotactl.entry", "--json", "status")
    assert quick_json == run("robotactl.console", "--json", "status")


# -- stepping aside ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "parsed"),
    [
        (["status"], (None, False)),
        (["--socket", "/s", "status"], ("/s", False)),
        (["--socket=/s", "--json", "--no-autostart", "status"], ("/s", True)),
        (["--no-autostart", "--json", "status"], (None, True)),
    ],
)
def test_plain_status_forms_take_the_quick_path(
    argv: list[str], parsed: tuple[str | None, bool]
) -> None:
    assert status_request_options(argv) == parsed


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["ls"],
        ["status", "--help"],
        ["--help", "status"],
        ["status", "extra"],
        ["--json", "--json", "status"],
        ["--socket", "status"],
        ["--socket=", "status"],
        ["--socket", "/a", "--socket", "/b", "status"],
        ["--version", "status"],
    ],
)
def test_other_argument_lists_go_to_click(argv: list[str]) -> None:
    assert status_request_options(argv) is None


@pytest.mark.parametrize("value", ["maybe", "enabled", "2"])
def test_a_variable_click_refuses_goes_to_click(
    value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``ROBOTA_NO_AUTOSTART=maybe robotactl status`` printed the status while a daemon
    served and exited 2 ("not a valid boolean") when none did, as every other command
    always does: the quick path never read the variable. It now steps aside for click."""
    monkeypatch.setenv("ROBOTA_NO_AUTOSTART", value)
    assert status_request_options(["status"]) is None
    monkeypatch.setenv("ROBOTA_NO_AUTOSTART", " Yes ")
    assert status_request_options(["status"]) == (None, False)


@contextmanager
def one_reply_server(tmp_path: Path, reply: bytes) -> Iterator[Path]:
    """A socket whose one connection gets `reply` once a request line has arrived."""
    path = tmp_path / "fake.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(1)
    listener.settimeout(PROCESS_TIMEOUT)

    def answer() -> None:
        with contextlib.suppress(OSError), listener.accept()[0] as connection:
            connection.settimeout(PROCESS_TIMEOUT)
            received = b""
            while b"\n" not in received:
                received += connection.recv(4096)
            connection.sendall(reply)

    thread = threading.Thread(target=answer)
    thread.start()
    try:
        yield path
    finally:
        thread.join(PROCESS_TIMEOUT)
        listener.close()


def quick(argv: list[str]) -> tuple[bool, str]:
    out = io.StringIO()
    with redirect_stdout(out):
        answered = quick_status(argv)
    return answered, out.getvalue()


GOOD_RESULT = {"version": "9", "pid": 7, "socketPath": "/s", "stateDir": "/d", "sessions": {}}


def test_a_plain_success_is_printed(tmp_path: Path) -> None:
    reply = json.dumps({"jsonrpc": "2.0", "id": 1, "result": GOOD_RESULT}).encode() + b"\n"
    with one_reply_server(tmp_path, reply) as path:
        answered, printed = quick(["--socket", str(path), "--json", "status"])
    assert answered
    assert json.loads(printed) == GOOD_RESULT


def test_a_control_character_in_a_value_is_shown_as_the_click_table_shows_it(
    tmp_path: Path,
) -> None:
    """A state folder whose name carries ``ESC [2J`` cleared the screen of whoever ran
    ``robotactl status``; both paths now show it as ``^[[2J``, and alike."""
    result = {**GOOD_RESULT, "stateDir": "/d\x1b[2J\u202e"}
    reply = json.dumps({"jsonrpc": "2.0", "id": 1, "result": result}).encode() + b"\n"
    with one_reply_server(tmp_path, reply) as path:
        answered, printed = quick(["--socket", str(path), "status"])
    assert answered
    assert "/d^[[2J<U+202E>" in printed
    assert "\x1b" not in printed
    assert "\u202e" not in printed
    table = io.StringIO()
    with redirect_stdout(table):
        Output().table(status_rows(result, now=datetime.now(UTC)))
    assert printed == table.getvalue()


@pytest.mark.parametrize(
    "reply",
    [
        {"jsonrpc": "2.0", "id": 1, "error": {"code": -32603, "message": "internal error"}},
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "too large"}},
        {"jsonrpc": "2.0", "method": "session/event", "params": {}},
        {"jsonrpc": "2.0", "id": 2, "result": GOOD_RESULT},
        {"jsonrpc": "2.0", "id": True, "result": GOOD_RESULT},
        {"jsonrpc": "1.0", "id": 1, "result": GOOD_RESULT},
        {"jsonrpc": "2.0", "id": 1, "result": [1]},
        [{"jsonrpc": "2.0", "id": 1, "result": GOOD_RESULT}],
    ],
)
def test_anything_but_a_plain_success_goes_to_click(tmp_path: Path, reply: object) -> None:
    with one_reply_server(tmp_path, json.dumps(reply).encode() + b"\n") as path:
        assert quick(["--socket", str(path), "status"]) == (False, "")


def test_bytes_that_are_not_json_go_to_click(tmp_path: Path) -> None:
    with one_reply_server(tmp_path, b"not json\n") as path:
        assert quick(["--socket", str(path), "status"]) == (False, "")


def test_nobody_listening_goes_to_click(tmp_path: Path) -> None:
    assert quick(["--socket", str(tmp_path / "none.sock"), "status"]) == (False, "")


def test_a_daemon_that_never_answers_is_handed_over_and_given_up_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A socket that accepts and never replies: the quick path waits a second, then the full
    command asks again, and asks daemon/status on a third connection before it gives up. It
    counts the quick path's second (status took twice the time it named when it did not)."""
    path = tmp_path / "hung.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(8)
    held: list[socket.socket] = []

    def accept_and_ignore() -> None:
        with contextlib.suppress(OSError):  # the listener shut down
            while True:
                held.append(listener.accept()[0])

    thread = threading.Thread(target=accept_and_ignore)
    thread.start()
    monkeypatch.setattr(entry, "waited", 0.0)
    monkeypatch.setenv("ROBOTA_ANSWER_TIMEOUT", "0.5")
    monkeypatch.setattr(
        sys, "argv", ["robotactl", "--no-autostart", "--socket", str(path), "status"]
    )
    try:
        with pytest.raises(SystemExit) as exited:
            entry.main()
    finally:
        listener.shutdown(socket.SHUT_RDWR)
        thread.join(PROCESS_TIMEOUT)
        for connection in held:
            connection.close()
        listener.close()
    assert exited.value.code == 1
    assert entry.waited == entry._WAIT
    assert len(held) == 3
    assert "did not answer daemon/status within 0.5 s" in capsys.readouterr().err
