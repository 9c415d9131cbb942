"""``robotactl chat`` driven in a real pseudo-terminal (tmux) against a real robotad on the
scripted provider.

One daemon serves the module (its state in a private temp home); each test works in its own
directory and makes its own sessions, so the tests do not see each other's sessions by
default. The screen is read with ``capture-pane`` and every wait is bounded.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from protocol.blocking_client import open_blocking_connection
from tests.robotad_process import RobotadProcess, start_robotad, stop_robotad

from .chat_tmux import ChatTerminal, require_tmux
from .conftest import PROCESS_TIMEOUT, REPO, child_environment

SGR = re.compile(r"\x1b\[[0-9;:]*m")


class Env:
    """The module's daemon, its isolated environment and a scratch folder."""

    def __init__(self, daemon: RobotadProcess, env: dict[str, str], root: Path) -> None:
        self.daemon = daemon
        self.env = env
        self.root = root
        self.terminals: list[ChatTerminal] = []

    def call(self, method: str, params: dict[str, Any]) -> Any:
        with open_blocking_connection(self.daemon.socket_path, timeout=PROCESS_TIMEOUT) as client:
            return client.request(method, params)

    def workspace(self, name: str) -> Path:
        path = self.root / "ws" / name
        path.mkdir(parents=True)
        return path

    def session(self, cwd: Path, script: list[dict[str, Any]] | None = None, **extra: Any) -> str:
        params: dict[str, Any] = {"cwd": str(cwd), "provider": "scripted", **extra}
        if script is not None:
            params["script"] = script
        return str(self.call("session/create", params)["sessionId"])

    def chat(self, cwd: Path, *args: str, width: int = 100, **env: str) -> ChatTerminal:
        terminal = ChatTerminal(
            self.root,
            self.daemon.socket_path,
            list(args),
            env={**self.env, **env},
            cwd=cwd,
            width=width,
        )
        self.terminals.append(terminal)
        return terminal

    def ctl(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self.python("-m", "robotactl", "--socket", str(self.daemon.socket_path), *args)

    def python(self, *args: str) -> subprocess.CompletedProcess[str]:
        """This Python with `args` in the module's environment (bounded)."""
        return subprocess.run(
            [sys.executable, *args],
            capture_output=True,
            text=True,
            env=self.env,
            cwd=REPO,
            timeout=PROCESS_TIMEOUT,
            check=False,
        )

    def attached(
        self, name: str, script: list[dict[str, Any]] | None = None, *, width: int = 100
    ) -> tuple[Path, str, ChatTerminal]:
        """A new workspace `name`, a session in it (on `script`) and a chat attached to that
        session, ready for input."""
        ws = self.workspace(name)
        sid = self.session(ws, script)
        term = self.chat(ws, "-s", sid, width=width)
        term.ready()
        return ws, sid, term

    def history(self, session_id: str) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = self.call("session/history", {"sessionId": session_id})[
            "messages"
        ]
        return messages

    def wait_idle(self, session_id: str) -> dict[str, Any]:
        """The session's info once no turn runs in it (bounded)."""
        deadline = time.monotonic() + PROCESS_TIMEOUT
        while True:
            info: dict[str, Any] = self.call("session/get", {"sessionId": session_id})
            if not info["running"] or time.monotonic() > deadline:
                return info
            time.sleep(0.05)


@pytest.fixture(scope="module")
def chat_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    require_tmux()
    root = tmp_path_factory.mktemp("chat")
    sock = tmp_path_factory.mktemp("csock")
    sock.chmod(0o700)
    home = root / "home"
    variables: dict[str, str] = {"HOME": str(home), "TERM": "xterm-256color"}
    for name in ("config", "state", "data", "cache", "run"):
        (home / name).mkdir(parents=True, mode=0o700)
        variables[f"XDG_{name.upper()}_HOME" if name != "run" else "XDG_RUNTIME_DIR"] = str(
            home / name
        )
    env = child_environment(**variables)
    for name in (
        "ROBOTA_SOCKET",
        "ROBOTA_STATE_DIR",
        "ROBOTA_CONFIG",
        "ROBOTA_SESSION",
        "NO_COLOR",
    ):
        env.pop(name, None)
    daemon = start_robotad(sock / "robotad.sock", root / "robotad.log", env=env)
    try:
        yield Env(daemon, env, root)
    finally:
        stop_robotad(daemon)


@pytest.fixture
def chat(chat_env: Env) -> Iterator[Env]:
    """The module's environment; the test's terminals are closed afterwards."""
    try:
        yield chat_env
    finally:
        for terminal in chat_env.terminals:
            terminal.close()
        chat_env.terminals.clear()


def write_step(name: str, text: str = "Writing.") -> dict[str, Any]:
    call = {"name": "Write", "arguments": {"file_path": name, "content": f"{name}\n"}}
    return {"text": text, "toolCalls": [call]}


def test_a_streamed_reply_is_shown_live_then_rendered_as_markdown(chat: Env) -> None:
    reply = "# Plan\n\nThe **answer** is `42`.\n\n```python\nprint(42)\n```\n"
    _ws, _sid, term = chat.attached("stream", [{"text": reply, "chunks": 8, "delayMs": 400}])
    term.send("what is it?")
    # While it streams, the text is shown as it comes (not yet rendered).
    term.wait_for("# Plan", "the raw text streaming into the live area")
    screen = term.wait_for(lambda s: "print(42)" in s and "```" not in s and "# Plan" not in s)
    assert "The answer is 42." in screen
    assert "**" not in screen
    assert "› what is it?" in screen


def test_approvals_answered_once_always_and_no(chat: Env) -> None:
    script = [
        write_step("a.txt"),
        {"text": "one done"},
        write_step("b.txt"),
        write_step("b.txt", "Again."),
        {"text": "two done"},
        write_step("c.txt"),
        {"text": "three done"},
    ]
    ws, sid, term = chat.attached("approvals", script)
    term.send("first")
    term.wait_for(f"Allow Write {ws}/a.txt?")
    term.wait_for("+a.txt")  # the Write is shown as a diff
    term.type("y")
    term.wait_for(lambda s: "one done" in s and "✓ Write a.txt — Created" in s)
    assert (ws / "a.txt").read_text() == "a.txt\n"
    term.send("/last")
    term.wait_for("result (ok):")

    term.idle()
    term.send("second")
    term.wait_for(f"Allow Write {ws}/b.txt?")
    term.type("a")
    term.wait_for(
        lambda s: "two done" in s and s.split("› second", 1)[-1].count("✓ Write") == 2,
        "the identical second Write running unasked",
    )
    after = term.idle().split("› second", 1)[1]
    assert after.count("approval needed") == 1
    assert after.count("✓ Write") == 2
    assert "allowed for this session: Write(" in after
    rules = chat.call("session/get", {"sessionId": sid})
    assert rules["pending"] is None

    term.idle()
    term.send("third")
    term.wait_for(f"Allow Write {ws}/c.txt?")
    term.type("n")
    screen = term.wait_for("three done")
    assert f"denied: Write {ws}/c.txt" in screen.split("› third", 1)[1]
    assert not (ws / "c.txt").exists()


def test_an_approval_answered_elsewhere_leaves_the_prompt(chat: Env) -> None:
    ws, sid, term = chat.attached("elsewhere", [write_step("d.txt"), {"text": "elsewhere done"}])
    term.send("go")
    term.wait_for("Allow Write")
    result = chat.ctl("approve", "-s", sid)
    assert result.returncode == 0, result.stderr
    screen = term.wait_for(lambda s: "elsewhere done" in s and "approved elsewhere: Write" in s)
    assert "Allow Write" not in screen
    assert (ws / "d.txt").exists()


def test_ctrl_c_during_a_slow_step_aborts_the_turn_once(chat: Env) -> None:
    _ws, sid, term = chat.attached(
        "abort", [{"text": "a very slow reply indeed", "chunks": 5, "delayMs": 4000}]
    )
    term.send("take your time")
    term.wait_for("thinking")
    # A prompt sent while the turn runs is refused and kept in the input line …
    term.send("too early")
    term.wait_for(lambda s: "prompt is kept" in s and "› too early" in s.rstrip().splitlines()[-2])
    term.keys("C-c")  # … which the first Ctrl-C clears
    term.wait_for(lambda s: s.rstrip().splitlines()[-2].rstrip() == "›", "the cleared input")
    term.keys("C-c")
    screen = term.wait_for("turn aborted")
    assert screen.count("aborting the turn") == 1
    assert "[exit" not in screen  # one Ctrl-C aborts; it does not leave
    assert chat.wait_idle(sid)["running"] is False
    term.idle()
    term.send("still here?")
    term.wait_for("echo: still here?")


def test_ctrl_c_twice_leaves_and_the_abort_goes_through(chat: Env) -> None:
    _ws, sid, term = chat.attached("twice", [{"text": "slow", "chunks": 5, "delayMs": 4000}])
    term.send("go slowly")
    term.wait_for("thinking")
    term.keys("C-c")
    term.wait_for("aborting the turn")
    term.keys("C-c")
    assert term.wait_exit() == 0
    assert chat.wait_idle(sid)["running"] is False
    history = chat.history(sid)
    assert not any(m["role"] == "assistant" and m["state"] == "complete" for m in history)


def test_up_recalls_the_last_prompt_of_another_session(chat: Env) -> None:
    ws = chat.workspace("history")
    first = chat.chat(ws, "--new")
    first.ready()
    first.send("remember the lighthouse")
    first.wait_for("echo: remember the lighthouse")
    first.keys("C-d")
    assert first.wait_exit() == 0

    second = chat.chat(ws, "--new")
    second.ready()
    second.keys("Up")
    second.wait_for(lambda s: s.rstrip().splitlines()[-2:][0].endswith("› remember the lighthouse"))


def test_ctrl_r_searches_the_prompt_history(chat: Env) -> None:
    _ws, _sid, term = chat.attached("search")
    for prompt in ("paint the fence", "walk the dog", "feed the cat"):
        term.send(prompt)
        term.wait_for(f"echo: {prompt}")
        term.idle()
    term.keys("C-r")
    term.type("fence")
    term.wait_for(
        lambda s: (
            [line.rstrip() for line in s.rstrip().splitlines()[-3:-1]]
            == ["› paint the fence", "I-search backward: fence"]
        ),
        "the search finding the prompt",
    )
    term.keys("Enter")
    term.keys("Enter")
    screen = term.wait_for(lambda s: s.count("echo: paint the fence") == 2)
    assert screen.count("› paint the fence") == 2


def test_slash_mode_compact_fork_and_sessions(chat: Env) -> None:
    _ws, sid, term = chat.attached("slash")
    term.send("hello")
    term.wait_for("echo: hello")
    term.idle()

    term.send("/mode plan")
    term.wait_for("permission mode: plan")
    assert chat.call("session/get", {"sessionId": sid})["permissionMode"] == "plan"

    term.send("/compact keep the greeting")
    term.wait_for("compacted:")

    term.send("/fork")
    screen = term.wait_for(f"forked {sid} → ")
    forked = screen.split(f"forked {sid} → ", 1)[1].split()[0]
    listing = chat.call("session/list", {})["sessions"]
    assert any(s["sessionId"] == forked and s.get("forkedFrom") == sid for s in listing)
    term.wait_for(lambda s: s.rstrip().splitlines()[-1].startswith(forked))

    term.send("/sessions")
    screen = term.wait_for("switch to which?")
    number = next(
        line.split()[0]
        for line in screen.splitlines()
        if line.strip() and line.split()[-1:] != [] and f" {sid} " in f" {line} "
        and line.strip()[0].isdigit()
    )  # fmt: skip
    term.send(number)
    term.wait_for(lambda s: s.rstrip().splitlines()[-1].startswith(sid))


def test_ctrl_d_leaves_a_running_turn_running(chat: Env) -> None:
    reply = "finished while you were away"
    ws, sid, term = chat.attached("leave", [{"text": reply, "chunks": 3, "delayMs": 700}])
    term.send("work on it")
    term.wait_for("thinking")
    term.keys("C-d")
    assert term.wait_exit() == 0
    assert "the turn goes on in robotad" in term.screen()
    info = chat.wait_idle(sid)
    assert info["running"] is False
    history = chat.history(sid)
    assert history[-1]["role"] == "assistant"
    assert history[-1]["content"] == reply
    assert history[-1]["state"] == "complete"

    again = chat.chat(ws, "-s", sid)
    screen = again.wait_for(reply, "what happened meanwhile")
    assert "› work on it" in screen


def test_ctrl_d_at_an_approval_says_it_waits(chat: Env) -> None:
    """Leaving with a request waiting said nothing (a running turn is said to go on): the
    person was not told the session now waits for them."""
    ws, sid, term = chat.attached("leave-waiting", [write_step("w.txt")])
    term.send("write")
    term.wait_for(f"Allow Write {ws}/w.txt?")
    term.keys("C-d")
    assert term.wait_exit() == 0
    assert f"an approval waits unanswered; `robotactl chat -s {sid}`" in term.screen()
    assert chat.call("session/get", {"sessionId": sid})["pending"] is not None


def test_chat_takes_a_unique_prefix_of_a_session_id(chat: Env) -> None:
    """Decision 84: ``chat -s`` names a session by a unique prefix of its id, as every other
    command does; a prefix of several is the same error (exit 1)."""
    ws = chat.workspace("prefix")
    for name in ("prefix-chat-one", "prefix-chat-two"):
        chat.session(ws, sessionId=name)
    term = chat.chat(ws, "-s", "prefix-chat-o")
    term.wait_for("session prefix-chat-one in")
    term.ready()
    term.keys("C-d")
    assert term.wait_exit() == 0
    ambiguous = chat.chat(ws, "-s", "prefix-chat-")
    assert ambiguous.wait_exit() == 1
    assert '"prefix-chat-" names 2 sessions' in ambiguous.screen()


def test_no_color_output_has_no_escape_codes(chat: Env) -> None:
    ws = chat.workspace("nocolor")
    reply = "Some **bold** and `code`:\n\n```python\nx = 1\n```\n"
    script = [{"text": reply}]
    coloured = chat.chat(ws, "-s", chat.session(ws, script))
    coloured.ready()
    coloured.send("show me")
    coloured.wait_for(lambda s: "x = 1" in s and "```" not in s, "the rendered reply")
    coloured.idle()
    assert SGR.search(coloured.screen(escapes=True)), "colour expected without NO_COLOR"

    plain = chat.chat(ws, "-s", chat.session(ws, script), NO_COLOR="1")
    plain.ready()
    plain.send("show me")
    plain.wait_for(lambda s: "x = 1" in s and "```" not in s, "the rendered reply")
    plain.idle()
    screen = plain.screen(escapes=True)
    assert "\x1b" not in screen, screen


def test_a_reply_and_an_approval_show_control_characters_instead_of_obeying_them(
    chat: Env,
) -> None:
    """rich sent a reply's escape sequences to the terminal: ``ESC[2J`` cleared the chat's
    screen, OSC 52 wrote the clipboard; a bidi override made the command asked about read as
    another (``ls txt.exe`` reversed). The reply, streamed a character a delta, and the
    approval now show them as ``^[`` and ``<U+202E>``."""
    reply = "Look:\x1b]52;c;eA==\x07 then\x1b[2J here \u202eevil\u202c\r\nend\r\n"
    bash = {"name": "Bash", "arguments": {"command": "ls \u202etxt.exe"}}
    script = [{"text": reply, "chunks": len(reply)}, {"text": "Listing.", "toolCalls": [bash]}]
    _ws, _sid, term = chat.attached("controls", [*script, {"text": "not listed"}])
    term.send("show me")
    term.wait_for("^[[2J here", "the reply, shown")
    term.idle()
    term.send("list it")
    screen = term.wait_for("Allow Bash ls <U+202E>txt.exe?", "the question, shown")
    assert 'command: "ls <U+202E>txt.exe"' in screen
    term.type("n")
    screen = term.wait_for("not listed")
    assert "Look:^[]52;c;eA==^G then^[[2J here <U+202E>evil<U+202C>" in screen
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]", screen)


def test_a_terminal_40_columns_wide(chat: Env) -> None:
    words = " ".join(f"word{i}" for i in range(30))
    slow = {"text": "slow", "chunks": 5, "delayMs": 4000}
    script = [slow, {"text": words, "chunks": 4, "delayMs": 100}]
    _ws, _sid, term = chat.attached("narrow", script, width=40)
    # While the model works the status line keeps the session, the mode and the time. The
    # slow reply works until the Ctrl-C: a running state seen only while a short reply
    # streamed could be over before a loaded machine's next look at the screen.
    term.send("take your time")
    term.wait_for(lambda s: any("default · thinking" in line for line in s.splitlines()))
    term.keys("C-c")
    term.wait_for("turn aborted")
    term.idle()
    term.send("talk")

    def finished(screen: str) -> bool:
        status = screen.rstrip().splitlines()[-1]
        return "word29" in screen and "default" in status and "thinking" not in status

    lines = term.wait_for(finished, "the finished reply").rstrip().splitlines()
    text = " ".join(lines)
    assert all(f"word{i}" in text.split() for i in range(30))  # wrapped, never cut
    assert all(len(line) <= 40 for line in lines)


def test_a_terminal_20_columns_wide_shows_the_whole_question_and_wide_text(chat: Env) -> None:
    """At 20 columns the approval's keys were cut to ``y once · a always ·`` (``n no``
    lost), and a streaming line of CJK text, wrapped by characters, lost its second half."""
    cjk = "漢字かな交じり文と絵文字、終わり"  # 16 characters, 32 columns
    # Two chunks of 18 characters: the CJK line (and its paragraph break), then the rest.
    slow = {"text": f"{cjk}\n\n{'x' * 18}", "chunks": 2, "delayMs": 2000}
    _ws, _sid, term = chat.attached("twenty", [slow, write_step("n.txt")], width=20)
    term.send("wide")
    # The line's end is on the screen while it streams (wrapped onto a second row), not only
    # once the finished reply is printed after the second chunk.
    screen = term.wait_for(lambda s: "終わり" in s or "x" * 18 in s, "the CJK line's end")
    assert "x" * 18 not in screen
    term.wait_for("x" * 18)
    term.idle()
    term.send("write")
    screen = term.wait_for("Allow Write")
    term.wait_for("n no", "the question's last key")
    term.type("n")
    term.wait_for("denied: Write")


def test_one_shot_commands_never_import_the_chat_libraries(chat: Env) -> None:
    def imported(*args: str) -> str:
        result = chat.python("-X", "importtime", *args)
        assert result.returncode == 0, result.stderr
        return " ".join(line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines())

    heavy = re.compile(r"\b(prompt_toolkit|rich)\b")
    sock = str(chat.daemon.socket_path)
    assert not heavy.search(imported("-m", "robotactl", "--socket", sock, "status"))
    assert not heavy.search(imported("-m", "robotactl", "--help"))
    assert heavy.search(imported("-c", "import robotactl.chat.host"))  # the check sees them


def test_chat_refuses_without_a_terminal(chat: Env) -> None:
    result = chat.ctl("chat", "--new")
    assert result.returncode == 1
    assert "needs a terminal" in result.stderr


def test_export_writes_the_artifact(chat: Env) -> None:
    ws, _sid, term = chat.attached("export")
    term.send("/export out.json")
    term.wait_for("exported")
    artifact = json.loads((ws / "out.json").read_text())
    assert artifact["kind"] == "robota.session"


def test_another_clients_turn_shows_live(chat: Env) -> None:
    _ws, sid, term = chat.attached("two")
    result = chat.ctl("run", "-s", sid, "from afar")
    assert result.returncode == 0, result.stderr
    term.wait_for(lambda s: "echo: from afar" in s and "» from afar  (another client)" in s)


def test_multi_line_input_and_bracketed_paste(chat: Env) -> None:
    _ws, sid, term = chat.attached("lines")
    term.type("one \\")
    term.keys("Enter")
    term.type("two")
    term.keys("M-Enter")
    term.type("three")
    term.keys("Enter")
    term.wait_for("echo: one", "the reply to the three lines")
    term.idle()
    term.paste("pasted\nlines")
    term.keys("Enter")
    term.wait_for("echo: pasted", "the reply to the paste")
    chat.wait_idle(sid)
    history = chat.history(sid)
    prompts = [message["content"] for message in history if message["role"] == "user"]
    assert prompts == ["one \ntwo\nthree", "pasted\nlines"]


def test_the_input_line_shows_bidi_controls_and_invisible_characters_it_will_send(
    chat: Env,
) -> None:
    """prompt_toolkit drew a pasted right-to-left override as it is, so the input line read
    ``rm exe.txt`` while ``rm \u202etxt.exe`` was to be sent, and a zero-width space hid
    between two letters. The input line shows them by code point; the prompt goes as typed."""
    _ws, sid, term = chat.attached("hidden")
    term.paste("rm \u202etxt.exe\u202c and\u200bmore")
    screen = term.wait_for("and<U+200B>more", "the pasted line, shown")
    assert "rm <U+202E>txt.exe<U+202C> and<U+200B>more" in screen
    assert not re.search("[\u202a-\u202e\u200b]", screen)
    term.keys("Enter")
    term.wait_for("echo: rm", "the reply to the paste")
    chat.wait_idle(sid)
    prompts = [m["content"] for m in chat.history(sid) if m["role"] == "user"]
    assert prompts == ["rm \u202etxt.exe\u202c and\u200bmore"]


def test_more_slash_commands(chat: Env) -> None:
    ws, sid, term = chat.attached("more")
    term.send("/help")
    term.wait_for("/export FILE")
    term.send("hi")
    term.wait_for("echo: hi")
    term.idle()
    term.send("/context")
    term.wait_for("% used)")
    term.send("/allow Bash(ls:*)")
    term.wait_for("allow rules: Bash(ls:*)")
    term.send("/deny Read(/etc/**)")
    term.wait_for("deny rules: Read(/etc/**)")
    term.send("/history 2")
    term.wait_for("] assistant")
    term.send("/frobnicate")
    term.wait_for("unknown command /frobnicate")
    term.send("/model other-model")
    term.wait_for(lambda s: "other-model" in s.rstrip().splitlines()[-1])
    # The note comes before the new session exists; its banner comes once it is attached.
    term.wait_for(lambda s: s.count(f"in {ws}") == 2)
    newest = chat.call("session/list", {})["sessions"][0]["sessionId"]
    assert newest != sid
    assert chat.call("session/get", {"sessionId": newest})["model"] == "other-model"
    term.send("/new")
    term.wait_for(lambda s: s.count(f"in {ws}") == 3)
    term.send("/quit")
    assert term.wait_exit() == 0


def test_a_line_that_is_not_utf8_is_refused_and_the_chat_goes_on(chat: Env) -> None:
    """Bytes a terminal sends that are not UTF-8 never reach robotad (which takes UTF-8 only)
    and never end the chat: the line is refused with a notice and put back, the bad bytes
    shown as U+FFFD, and the next prompt runs."""
    ws = chat.workspace("bytes")
    sid = chat.session(ws)
    term = chat.chat(ws, "-s", sid)
    term.ready()
    term.type("bad ")
    term.keys("-H", "ff", "fe")
    term.type(" end")
    term.keys("Enter")
    screen = term.wait_for("not UTF-8 text", "the refusal")
    assert "Traceback" not in screen
    term.wait_for(lambda s: s.rstrip().splitlines()[-2].rstrip() == "› bad \ufffd\ufffd end")
    assert chat.call("session/get", {"sessionId": sid})["messageCount"] == 0
    term.keys("C-u")
    term.send("still here")
    term.wait_for("echo: still here")


def test_after_an_abort_other_keys_disarm_the_leaving_ctrl_c(chat: Env) -> None:
    """Ctrl-C aborts and arms leaving; typing something (even text a Ctrl-C then clears)
    disarms it, so a later Ctrl-C on the empty prompt warns first instead of leaving."""
    ws = chat.workspace("disarm")
    sid = chat.session(ws, [{"text": "slow", "chunks": 5, "delayMs": 4000}])
    term = chat.chat(ws, "-s", sid)
    term.ready()
    term.send("go slowly")
    term.wait_for("thinking")
    term.keys("C-c")
    term.wait_for("turn aborted")
    term.idle()
    term.type("a prompt I changed my mind about")
    term.wait_for("› a prompt I changed my mind about")
    term.keys("C-c")  # clears the input
    term.wait_for(lambda s: s.rstrip().splitlines()[-2].rstrip() == "›", "the cleared input")
    term.keys("C-c")
    screen = term.wait_for("^C (again, or Ctrl-D, to leave)")
    assert "[exit" not in screen
    term.keys("C-c")
    assert term.wait_exit() == 0


def test_a_denied_call_is_shown_kept_for_last_and_in_history_with_its_arguments(
    chat: Env,
) -> None:
    ws = chat.workspace("denied")
    sid = chat.session(ws, [write_step("no.txt"), {"text": "not written"}])
    term = chat.chat(ws, "-s", sid)
    term.ready()
    term.send("write it")
    screen = term.wait_for(f"Allow Write {ws}/no.txt?")
    assert screen.count("y once · a always · n no") == 1  # the question, not a second hint
    term.type("n")
    screen = term.wait_for("not written")
    assert "✗ Write no.txt — denied: Write was denied by the user" in screen
    term.idle()
    term.send("/last")
    screen = term.wait_for("result (failed):")
    assert "no tool call yet" not in screen
    detail = screen.split("not written", 1)[1]
    assert "permission: deny" in detail
    assert f'file_path: "{ws}/no.txt"' in detail
    term.send("/history 4")
    shown = "✗ Write no.txt — Write was denied by the user"
    screen = term.wait_for(lambda s: shown in s.split("result (failed):", 1)[1])
    assert "] assistant" in screen.split("result (failed):", 1)[1]


def test_a_call_a_rule_denies_is_shown_with_its_arguments(chat: Env) -> None:
    """No event carries the arguments of a call denied before anyone was asked (a deny rule,
    a hook): the chat showed ``✗ Write()`` and ``/last`` listed no argument. They come from
    the history now."""
    ws = chat.workspace("rule-denied")
    script = [write_step("no.txt"), {"text": "refused"}]
    sid = chat.session(ws, script, permissions={"deny": ["Write"]})
    term = chat.chat(ws, "-s", sid)
    term.ready()
    term.send("write it")
    screen = term.wait_for("refused")
    assert "✗ Write no.txt — denied: denied by rule Write" in screen
    term.idle()
    term.send("/last")
    detail = term.wait_for("result (failed):").split("refused", 1)[1]
    assert 'file_path: "no.txt"' in detail
    assert "permission: deny" in detail


def test_sessions_lists_this_directory_first_and_others_with_their_cwd(chat: Env) -> None:
    ws = chat.workspace("listing")
    other = chat.workspace("elsewhere-listing")
    mine = chat.session(ws)
    theirs = chat.session(other)  # newer, but of another directory
    term = chat.chat(ws, "-s", mine, width=240)
    term.ready()
    term.send("/sessions")
    screen = term.wait_for("switch to which?")
    rows = [line for line in screen.splitlines() if re.match(r"[* ] *\d+ [0-9a-f]{32} ", line)]
    assert rows[0].startswith(f"*  1 {mine} ")
    assert " in /" not in rows[0]  # this directory's: no cwd
    row = next(line for line in rows if theirs in line)
    assert row.rstrip().endswith(f"in {other}")


def test_the_last_turn_of_a_compacted_session_is_not_its_summary(chat: Env) -> None:
    ws = chat.workspace("compacted")
    sid = chat.session(ws)
    assert chat.call("session/run", {"sessionId": sid, "prompt": "remember the mango"})
    assert chat.call("session/compact", {"sessionId": sid})["compacted"] is True
    term = chat.chat(ws, "-s", sid)
    screen = term.ready()
    summary = next(line for line in screen.splitlines() if "compacted history" in line)
    assert summary.startswith("⋯ compacted history, summarised:")
    assert summary.rstrip().endswith("…")  # cut to the terminal's width, not wrapped
    assert not any(line.startswith("› ") for line in screen.splitlines())


def test_a_line_that_picks_no_session_after_sessions_goes_on_as_typed(chat: Env) -> None:
    """After ``/sessions``, a number or an id switches; a prompt or a command typed instead
    is not taken for a session id (refused, and the prompt lost): it is sent as usual."""
    _ws, sid, term = chat.attached("not-a-pick")
    term.send("/sessions")
    term.wait_for("switch to which?")
    term.send("summarise the design")
    screen = term.wait_for("echo: summarise the design")
    assert "error" not in screen.split("switch to which?", 1)[1]
    term.idle()
    term.send("/sessions")
    term.wait_for(lambda s: s.count("switch to which?") == 2)
    term.send("/context")
    # Its answer, not the status line's "% of": the count below is read once it is handled.
    term.wait_for(lambda s: "% used)" in s.rsplit("switch to which?", 1)[1])
    assert chat.call("session/get", {"sessionId": sid})["messageCount"] == 2


def test_sessions_takes_a_prefix_of_an_id_and_says_when_a_number_is_past_the_list(
    chat: Env,
) -> None:
    """``/sessions ID`` took only a whole id (``chat -s`` takes a unique prefix), and a
    number past the list was looked up as an id: ``no session 99999``, as if it were one."""
    ws, _sid, term = chat.attached("sessions-prefix")
    other = chat.session(ws)
    term.send("/sessions 99999")
    screen = term.wait_for("no session 99999: /sessions lists ")
    assert "error -32002" not in screen
    term.send(f"/sessions {other[:12]}")
    term.wait_for(f"session {other} in {ws}")


def test_a_command_stays_in_the_scrollback_above_what_it_printed(chat: Env) -> None:
    """A command vanished once sent (a prompt stays, as ``› text``): a few commands' errors
    then stood one under the other, none saying which command it answered."""
    _ws, _sid, term = chat.attached("echoed")
    term.send("/mode bogus")
    term.wait_for("invalid params")
    term.send("/frob")
    screen = term.wait_for("unknown command /frob")
    lines = [line.rstrip() for line in screen.splitlines()]
    mode = lines.index("› /mode bogus")
    frob = lines.index("› /frob")
    assert mode < frob
    assert any("$.mode" in line for line in lines[mode:frob])
    assert lines[frob + 1] == "unknown command /frob (/help lists them)"
