"""What a model or other people's data puts in front of the person at the terminal: escape
sequences, lone carriage returns, C1 and bidi controls are shown (``^[``, ``^M``,
``<U+202E>``), never sent — in `robotactl.terminal_text` itself, in every writer robotactl and
its chat print through, and end to end through ``run``, an approval prompt, ``show`` and
``ls`` against a real robotad on the scripted provider."""

from __future__ import annotations

import itertools
import json
import re
import sys
import unicodedata
from pathlib import Path
from typing import Any

import msgspec
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.events import (
    HookFailure,
    PermissionDecided,
    TextDelta,
    ToolFinished,
    ToolStarted,
    TurnFinished,
)
from protocol.methods import LogProblem, LogResult
from protocol.shapes import TurnCompleted
from robotactl.chat.follower import EventFollower
from robotactl.chat.render import Renderer
from robotactl.chat.state import ChatState, ToolCallRecord
from robotactl.chat.status import status_line
from robotactl.cli import cli
from robotactl.commands.records import log_lines
from robotactl.exit_codes import ExitCode
from robotactl.formatting import format_arguments, format_call, home_relative, shorten
from robotactl.render import Output, format_rpc_error
from robotactl.terminal_text import VisibleStream, json_safe, visible, visible_exactly
from robotactl.turn_stream import TurnView

from .conftest import Ctl, RunningDaemon
from .ctl_helpers import Terminal, decoded, new_session, sock
from .test_ctl_chat_units import RecordingScreen, info

#: Every character a terminal may act on that robotactl must never send from a model: C0 but
#: newline and tab, DEL, C1, and the bidi controls (marks, embeddings, overrides, isolates).
UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
#: robotactl's and rich's own colour codes (SGR), the only escape sequences they may write.
SGR = re.compile(r"\x1b\[[0-9;]*m")

#: A reply a fetched page could have talked a model into: write the clipboard (OSC 52), set
#: the title, clear the screen, overwrite a line with a lone CR, reverse a line (U+202E), a
#: C1 CSI; and CRLF line ends, which are plain newlines.
HOSTILE = (
    "Copied.\x1b]52;c;cm0gLXJmIH4=\x07 Titled\x1b]0;pwned\x07 Cleared\x1b[2J"
    " fake\rreal\r\nline two \u202eevil\u202c \x9b31m\r\n"
)
#: What robotactl shows of it.
HOSTILE_SHOWN = (
    "Copied.^[]52;c;cm0gLXJmIH4=^G Titled^[]0;pwned^G Cleared^[[2J"
    " fake^Mreal\nline two <U+202E>evil<U+202C> <U+009B>31m\n"
)


def assert_nothing_raw(text: str) -> None:
    """`text` (colour codes aside) holds no control a terminal would act on, and no lone CR."""
    unsafe = UNSAFE.findall(SGR.sub("", text).replace("\r\n", "\n"))
    assert not unsafe, (unsafe, text)


# -- the function ------------------------------------------------------------------------------


def test_each_kind_of_control_is_shown_in_one_readable_form() -> None:
    assert visible(HOSTILE) == HOSTILE_SHOWN
    assert visible("\x00\x08\x7f\x1b\x9b\u061c\u200e\u200f\u202a\u2066\u2069") == (
        "^@^H^?^[<U+009B><U+061C><U+200E><U+200F><U+202A><U+2066><U+2069>"
    )
    assert visible("a\r\nb\rc\r") == "a\nb^Mc^M"
    assert visible("tab\tand\nnewline, ünïcödé ✓ 表") == "tab\tand\nnewline, ünïcödé ✓ 表"


@settings(max_examples=500, deadline=None)
@given(st.text())
def test_nothing_a_terminal_acts_on_survives(text: str) -> None:
    shown = visible(text)
    assert not UNSAFE.search(shown), shown
    assert "\r" not in shown
    assert visible(shown) == shown  # made visible twice is made visible once


@settings(max_examples=300, deadline=None)
@given(st.text(st.characters(blacklist_categories=("Cc", "Cf", "Cs")) | st.sampled_from("\n\t")))
def test_printable_text_newlines_and_tabs_pass_unchanged(text: str) -> None:
    assert visible(text) == text


@settings(max_examples=500, deadline=None)
@given(st.text(st.sampled_from("ab\r\n\x1b[]\u202e\x9b")), st.lists(st.integers(0, 40)))
def test_a_stream_cut_anywhere_shows_what_the_whole_text_shows(text: str, cuts: list[int]) -> None:
    """A CRLF cut between two deltas is still one newline; an escape sequence cut in two is
    shown as it is whole, never passed through."""
    stream = VisibleStream()
    points = sorted({0, len(text), *(cut for cut in cuts if cut < len(text))})
    pieces = [text[start:end] for start, end in itertools.pairwise(points)]
    assert "".join(stream.feed(piece) for piece in pieces) + stream.end() == visible(text)


#: Characters that draw nothing or pass for a space, one of each kind: a zero-width space,
#: joiner and non-joiner, a word joiner, a soft hyphen, a no-break and an ideographic space,
#: a variation selector, a tag character, a BOM, a Hangul filler, a line separator.
INVISIBLE = "\u200b\u200d\u200c\u2060\u00ad\u00a0\u3000\ufe0f\U000e0041\ufeff\u3164\u2028"


def test_what_a_person_approves_shows_every_character_that_draws_nothing() -> None:
    """``curl exa​mple.com`` (a zero-width space inside) looked like the host it does not
    name, ``rm a b`` (a no-break space) like two files; a tool call's arguments now show
    them. A reply keeps them: an emoji's joiners are part of how it reads."""
    assert visible_exactly("curl exa\u200bmple.com; rm a\u00a0b") == (
        "curl exa<U+200B>mple.com; rm a<U+00A0>b"
    )
    assert visible_exactly(INVISIBLE) == "".join(f"<U+{ord(c):04X}>" for c in INVISIBLE)
    assert visible_exactly("\x1b\u202e ok ünï 表\t\n") == "^[<U+202E> ok ünï 表\t\n"
    family = "\U0001f468\u200d\U0001f469\u200d\U0001f467 caf\u00e9\u00a0!"
    assert visible(family) == family
    assert format_call("Bash", {"command": "curl exa\u200bmple.com"}) == (
        'Bash(command="curl exa<U+200B>mple.com")'
    )
    assert format_arguments({"content": "x\u2060y\nz\n", "k\u200b": "a\u00a0b"}) == [
        "content:",
        "  | x<U+2060>y",
        "  | z",
        'k<U+200B>: "a<U+00A0>b"',
    ]
    long = "x" * 3000 + "; rm -rf ~"
    assert format_arguments({"command": long, "content": long}) == [
        f'command: "{long}"',
        f'content: "{long[:1997]}…" (3010 characters in all)',
    ]
    assert format_arguments({"command": long + "\nls"})[-1] == "  | ls"
    edit = {"file_path": "/a\u200b", "old_string": "key", "new_string": "k\u200bey"}
    shown = Renderer(color=False, width=lambda: 120).approval("Edit", edit, "why\u00a0")
    for part in ("/a<U+200B>", "+k<U+200B>ey", "why<U+00A0>"):
        assert part in shown, shown


def test_the_invisible_set_holds_every_format_character_and_odd_space_python_knows() -> None:
    """The set is written out (robotactl's quick path cannot pay for walking `unicodedata`):
    every format character, separator and space but U+0020 of the Unicode version this
    Python knows is in it, and nothing printable is."""
    missed = [
        f"U+{code:04X}"
        for code in range(sys.maxunicode + 1)
        if unicodedata.category(chr(code)) in ("Cf", "Zs", "Zl", "Zp")
        and code != 0x20
        and visible_exactly(chr(code)) == chr(code)
    ]
    assert not missed, (unicodedata.unidata_version, missed)
    for text in ("plain ascii ~!@#", "ünïcödé", "表 ✓ é", "\U0001f468"):
        assert visible_exactly(text) == text


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_shown_exactly_once_is_shown_exactly(text: str) -> None:
    shown = visible_exactly(text)
    assert visible_exactly(shown) == shown
    assert not UNSAFE.search(shown)


# -- robotactl's writers -----------------------------------------------------------------------


def test_formatted_values_are_made_visible() -> None:
    """JSON escaped ESC already; DEL, C1 and the bidi override went out as they were, so an
    argument could read backwards."""
    call = format_call("Ba\x1bsh", {"command": "echo \u202eevil", "n": "\x7f\x9b"})
    assert call == 'Ba^[sh(command="echo <U+202E>evil", n="^?<U+009B>")'
    assert shorten("title\x1b]0;x\x07\u2066", 40) == "title^[]0;x^G<U+2066>"
    assert format_arguments({"content": "a\rb\r\nc\u202e\n", "k\x1b": 1}) == [
        "content:",
        "  | a^Mb",
        "  | c<U+202E>",
        "k^[: 1",
    ]
    assert home_relative("/h/src/\x1b[2J\u202e", home="/h") == "~/src/^[[2J<U+202E>"
    assert format_rpc_error(
        -32602, "bad \x1b[2J", {"issues": [{"path": "$.x", "message": "\u202e"}]}
    ) == ("error -32602: bad ^[[2J\n  $.x: <U+202E>")


def test_output_shows_controls_and_keeps_its_own_colours(
    capsys: pytest.CaptureFixture[str],
) -> None:
    output = Output(color=True)
    output.side("tool \x1b[2J\u202e", "red")
    output.error("robotad said \x1b]52;c;eA==\x07")
    output.table([("state dir", "/d\x1b[2J")])
    output.columns(("ID", "TITLE"), [("s1", "t\u202eitle\r")])
    captured = capsys.readouterr()
    assert "\x1b[31mtool ^[[2J<U+202E>\x1b[0m" in captured.err
    assert "\x1b[31;1mrobotactl:\x1b[0m robotad said ^[]52;c;eA==^G" in captured.err
    assert "\x1b[2mstate dir\x1b[0m  /d^[[2J" in captured.out
    assert "s1  t<U+202E>itle^M" in captured.out
    assert_nothing_raw(captured.out + captured.err)


def event(cls: Any, **members: Any) -> Any:
    return cls(session_id="s1", seq=1, turn_id="t1", **members)


def test_a_streamed_reply_and_the_turns_activity_are_made_visible(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A reply streamed one character a delta: the CRLF split between two deltas is one
    newline, each split escape sequence is shown, a lone CR at the end is ``^M``; tool names,
    arguments, previews, reasons and hook failures on stderr likewise."""
    view = TurnView(Output(color=False), show_text=True)
    for character in HOSTILE:
        view.event(event(TextDelta, text=character))
    view.event(event(TextDelta, text="end\r"))
    for item in (
        event(PermissionDecided, call_id="c1", tool="Bash", decision="deny", reason="no\x1b[2J"),
        event(ToolStarted, call_id="c2", tool="mcp__x__\u202eq", arguments={"a": "\x9b"}),
        event(ToolFinished, call_id="c2", tool="mcp__x__q", ok=False, preview="boom\x1b]0;t\x07"),
        event(TurnFinished, status="completed", hook_failures=[HookFailure("Stop", "x\x1b[2J")]),
    ):
        view.event(item)
    captured = capsys.readouterr()
    assert captured.out == HOSTILE_SHOWN + "end^M\n"
    assert captured.err.splitlines() == [
        "  Bash: denied — no^[[2J",
        '→ mcp__x__<U+202E>q(a="<U+009B>")',
        "  mcp__x__q ✗ boom^[]0;t^G",
        "hook Stop failed: x^[[2J",
    ]


def test_the_waiting_line_shows_a_tools_name_visibly() -> None:
    import io

    from robotactl.waiting import WaitingLine

    stream = io.StringIO()
    WaitingLine(stream, styled=False).draw(3, "mcp__evil__\x1b[2J\u202e")
    assert "waiting for mcp__evil__^[[2J<U+202E>… 3s" in stream.getvalue()
    assert_nothing_raw(stream.getvalue().replace("\r", ""))


# -- end to end: robotactl against robotad ------------------------------------------------------


def test_run_shows_a_hostile_reply_visibly_and_json_keeps_it_exact(
    ctl: Ctl, robotad: RunningDaemon, work: Path
) -> None:
    """A reply streamed a character a delta, with a tool call whose path and result carry
    controls, and a provider error quoting them: nothing of it reaches the terminal raw. With
    --json stdout is JSON holding the reply exact, its controls escaped (JSON escapes C0;
    robotactl escapes DEL, C1 and bidi controls too, which JSON let through raw)."""
    read = {"name": "Read", "arguments": {"file_path": str(work / "n\x1b[2Jo\u202ene.txt")}}
    script = [
        {"text": "Reading.", "toolCalls": [read]},
        {"text": HOSTILE, "chunks": len(HOSTILE)},
    ]
    session_id = new_session(ctl, robotad, work, script)
    result = ctl(*sock(robotad), "run", "-s", session_id, "go")
    assert result.returncode == ExitCode.COMPLETED, result.stderr
    assert result.stdout == "Reading.\n" + HOSTILE_SHOWN
    assert "o<U+202E>ne.txt" in result.stderr
    assert_nothing_raw(result.stdout + result.stderr)

    session_id = new_session(ctl, robotad, work, [{"text": HOSTILE}])
    as_json = ctl(*sock(robotad), "--json", "run", "-s", session_id, "go")
    assert decoded(as_json, TurnCompleted).response == HOSTILE
    assert_nothing_raw(as_json.stdout)  # DEL, C1 and bidi controls escaped as JSON's \uXXXX

    failing = new_session(ctl, robotad, work, [{"error": "rate limited\x1b]52;c;eA==\x07\u202e"}])
    failed = ctl(*sock(robotad), "run", "-s", failing, "go")
    assert failed.returncode == ExitCode.ERROR
    assert "rate limited^[]52;c;eA==^G<U+202E>" in failed.stderr
    assert_nothing_raw(failed.stdout + failed.stderr)


def test_an_approval_prompt_shows_a_bidi_override_in_a_command(
    ctl: Ctl, robotad: RunningDaemon, work: Path
) -> None:
    """``ls ‮txt.exe`` read as ``ls exe.txt`` in the y/N prompt (U+202E reverses what follows
    it); the prompt and the listing for a later answer now show ``<U+202E>``, and a no-break
    space that made one argument look like two ``<U+00A0>``."""
    command = "ls \u202etxt.exe \x9b2J\x7f a\u00a0b"
    bash = {"name": "Bash", "arguments": {"command": command}}
    script = [{"text": "Listing.", "toolCalls": [bash]}, {"text": "No\x1b[2J."}]
    session_id = new_session(ctl, robotad, work, script)
    terminal = Terminal([*sock(robotad), "run", "-s", session_id, "list"], cwd=work, NO_COLOR="1")
    try:
        terminal.expect("Allow Bash? [y/N]")
        terminal.send("n\n")
        status = terminal.finish()
    finally:
        terminal.kill()
    assert status == ExitCode.COMPLETED, terminal.output
    assert 'command: "ls <U+202E>txt.exe <U+009B>2J^? a<U+00A0>b"' in terminal.output
    assert "No^[[2J." in terminal.output
    assert_nothing_raw(terminal.output)

    session_id = new_session(ctl, robotad, work, script)
    waiting = ctl(*sock(robotad), "run", "-s", session_id, "list")
    assert waiting.returncode == ExitCode.WAITING, waiting.stderr
    assert 'Bash(command="ls <U+202E>txt.exe <U+009B>2J^? a<U+00A0>b")' in waiting.stdout
    assert_nothing_raw(waiting.stdout + waiting.stderr)
    shown = ctl(*sock(robotad), "show", "-s", session_id)
    assert 'Bash(command="ls <U+202E>txt.exe <U+009B>2J^? a<U+00A0>b")' in shown.stdout
    assert_nothing_raw(shown.stdout + shown.stderr)


def test_show_and_ls_make_titles_prompts_and_history_visible(
    ctl: Ctl, robotad: RunningDaemon, work: Path
) -> None:
    """A session's first prompt titles it in ``ls``; an imported record brings its own title
    and cwd; ``show`` prints every message whole. Each could set the window title, clear the
    screen or reverse a line; now each is shown."""
    call = {"name": "Read", "arguments": {"file_path": "\x1b[2J\u202e"}}
    script = [{"text": "Reading.", "toolCalls": [call]}, {"text": HOSTILE}]
    session_id = new_session(ctl, robotad, work, script)
    prompt = "fix\x1b]0;pwned\x07 \u202eit"
    assert ctl(*sock(robotad), "run", "-s", session_id, prompt).returncode == 0

    shown = ctl(*sock(robotad), "show", "-s", session_id)
    assert shown.returncode == 0, shown.stderr
    assert "  fix^[]0;pwned^G <U+202E>it" in shown.stdout
    assert "  Copied.^[]52;c;cm0gLXJmIH4=^G" in shown.stdout
    assert "  line two <U+202E>evil<U+202C> <U+009B>31m" in shown.stdout
    assert 'Read(file_path="\\u001b[2J<U+202E>")' in shown.stdout
    assert_nothing_raw(shown.stdout + shown.stderr)

    exported = ctl(*sock(robotad), "export", "-s", session_id)
    artifact: dict[str, Any] = json.loads(exported.stdout)
    artifact["record"]["title"] = "Title\x1b]52;c;eA==\x07\u202eevil"
    hostile_cwd = work / "w\x1b[2J\u2066"  # a folder someone else named
    hostile_cwd.mkdir()
    artifact["record"]["cwd"] = str(hostile_cwd)
    path = work.parent / "artifact.json"
    path.write_text(json.dumps(artifact))
    imported = ctl(*sock(robotad), "import", "--id", "imported", str(path))
    assert imported.returncode == 0, imported.stderr

    listed = ctl(*sock(robotad), "ls")
    assert listed.returncode == 0, listed.stderr
    assert "fix^[]0;pwned^G <U+202E>it" in listed.stdout
    assert "Title^[]52;c;eA==^G<U+202E>evil" in listed.stdout
    assert "w^[[2J<U+2066>" in listed.stdout
    assert_nothing_raw(listed.stdout + listed.stderr)
    header = ctl(*sock(robotad), "show", "-s", "imported").stdout.splitlines()[0]
    assert "w^[[2J<U+2066>" in header
    listing = msgspec.json.decode(ctl(*sock(robotad), "--json", "ls").stdout)
    titles = {entry.get("title") for entry in listing["sessions"]}
    assert "Title\x1b]52;c;eA==\x07\u202eevil" in titles  # --json keeps the data exact


def test_log_problems_and_mcp_servers_words_are_made_visible(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``robotactl log`` quotes what it could not replay; ``robotactl mcp`` a server's name,
    tools and last error (its own words). Each printed a control as it was."""
    report = LogResult(entries=1, complete=False, problems=[LogProblem("bad \x1b[2J", line=2)])
    assert log_lines("s1", report)[1] == "  line 2: bad ^[[2J"
    servers = {
        "servers": [
            {
                "name": "ev\x1b[2Jil",
                "scope": "global",
                "status": "failed",
                "tools": ["mcp__x__a\u202eb"],
                "error": "crashed\x1b]52;c;eA==\x07",
            }
        ]
    }
    monkeypatch.setattr("robotactl.commands.mcp.call_daemon", lambda options, ask: servers)
    result = CliRunner().invoke(cli, ["mcp", "--tools"])
    assert result.exit_code == 0, result.output
    assert "crashed^[]52;c;eA==^G" in result.output
    assert "ev^[[2Jil (1 tool):\n  mcp__x__a<U+202E>b\n" in result.output
    assert_nothing_raw(result.output)


# -- the chat ----------------------------------------------------------------------------------


def test_rich_renders_nothing_of_a_model_raw() -> None:
    """rich drops BEL, BS, VT, FF and CR but sends ESC, C1, DEL and bidi controls as they are:
    a reply cleared the chat's screen, a tool's arguments read backwards in an approval."""
    renderer = Renderer(color=True, width=lambda: 120)
    call = ToolCallRecord("c\x1b1", "Bash\u202e", {"command": "ls \u202eevil"}, ok=True)
    call.preview = "out\x1b[2J"
    call.decision = "allow"
    rendered = [
        renderer.markdown(HOSTILE + "\n```\n" + HOSTILE + "```\n`" + HOSTILE.strip() + "`"),
        renderer.approval("Bash", {"command": "echo \u202e; rm x"}, "why\x1b]0;t\x07"),
        renderer.approval(
            "Edit", {"file_path": "/a\x1b", "old_string": "a\rb", "new_string": "\x9b"}, "r"
        ),
        renderer.tool_line(call),
        renderer.tool_detail(call),
        renderer.prompt_echo("from \x1b[2J another"),
        renderer.notice("n\u2066"),
        renderer.error("e\x9b"),
        renderer.line("l\x7f"),
    ]
    for text in rendered:
        assert_nothing_raw(text)
    assert "^[[2J" in rendered[0]
    assert "<U+202E>" in rendered[1]
    assert "a^Mb" in rendered[2]


def test_the_live_area_and_the_status_line_get_the_reply_made_visible() -> None:
    """prompt_toolkit shows C0 and C1 controls as ``^[``/``<9b>`` itself but draws a bidi
    override as it is; the live text is made visible as it streams, the split CRLF once."""
    state = ChatState(info=info(model="gpt\u202eevil\x1b[2J"))
    screen = RecordingScreen()
    follower = EventFollower(state, screen, Renderer(color=False, width=lambda: 80))
    for character in "a\r\nb\u202ec\x1b[2J\r":
        follower.apply(TextDelta(info().session_id, 1, "t", character))
    assert state.live_text == "a\nb<U+202E>c^[[2J"
    follower.flush_text()
    assert "b<U+202E>c^[[2J^M" in screen.lines[-1]
    line = status_line(state, 200)
    assert "gpt<U+202E>evil^[[2J" in line
    assert_nothing_raw(line)


@settings(max_examples=200, deadline=None)
@given(st.recursive(st.text(), lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner)))
def test_json_safe_escapes_what_a_terminal_obeys_and_changes_no_value(value: Any) -> None:
    """`--json` output is JSON a script reads exactly, and printed on a terminal nothing in it
    is obeyed: C0 JSON escapes itself, DEL, C1 and bidi controls `json_safe` escapes."""
    encoded = json_safe(json.dumps(value, indent=2, ensure_ascii=False))
    assert json.loads(encoded) == value
    assert not UNSAFE.search(encoded.replace("\n", ""))
