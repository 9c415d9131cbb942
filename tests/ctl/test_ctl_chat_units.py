"""The chat's pure parts: the exact-call rule, slash parsing, the status line, completion,
prompt-history order and the event follower (on a recording screen, no terminal)."""

from __future__ import annotations

import os
import textwrap
import unicodedata
from pathlib import Path

import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st
from prompt_toolkit.buffer import Buffer
from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document
from prompt_toolkit.layout.controls import BufferControl
from prompt_toolkit.layout.processors import Transformation, TransformationInput
from prompt_toolkit.utils import get_cwidth

from protocol.events import (
    ApprovalRequested,
    ApprovalResolved,
    TextDelta,
    ToolStarted,
    TurnFinished,
)
from protocol.methods import HistoryEntry
from protocol.shapes import ApprovalRequest, ContextState, SessionInfo
from robotactl.chat import prompt as prompt_module
from robotactl.chat.approval import exact_call_rule
from robotactl.chat.completion import ChatCompleter
from robotactl.chat.follower import EventFollower
from robotactl.chat.history import ordered_prompts
from robotactl.chat.host import cancel_trio
from robotactl.chat.input_view import SHOWN_STYLE, ShownHidden
from robotactl.chat.prompt import answer_keys, live_lines
from robotactl.chat.render import Renderer
from robotactl.chat.slash import SLASH_COMMANDS, UnknownCommand, help_text, parse_slash, prompt_text
from robotactl.chat.state import ChatState
from robotactl.chat.status import status_line
from robotactl.terminal_text import visible_exactly

SID = "0123456789abcdef0123456789abcdef"


def info(**changes: object) -> SessionInfo:
    base = SessionInfo(
        session_id=SID,
        cwd="/work",
        provider="scripted",
        model="scripted-model",
        permission_mode="default",
        created_at="2026-01-01T00:00:00Z",
        updated_at="2026-01-01T00:00:00Z",
        message_count=0,
        turn_count=0,
        running=False,
        pending=None,
        context=ContextState.of(13_450, 32_768),
    )
    for name, value in changes.items():
        setattr(base, name, value)
    return base


@pytest.mark.parametrize(
    ("tool", "arguments", "rule"),
    [
        ("Write", {"file_path": "/w/a (1).txt", "content": "x"}, "Write(/w/a \\(1\\).txt)"),
        ("Read", {"file_path": "src/*.py"}, "Read(src/\\*.py)"),
        ("Bash", {"command": "git status --short"}, "Bash(git status --short)"),
        ("Glob", {"pattern": "*.py"}, "Glob(/cwd)"),
        ("WebFetch", {"url": "https://docs.example.com/a?b"}, "WebFetch(domain:docs.example.com)"),
        ("mcp__fs__read", {"path": "/x"}, "mcp__fs__read"),
        ("Bash", {"command": "  "}, None),
    ],
)
def test_exact_call_rule(tool: str, arguments: dict[str, object], rule: str | None) -> None:
    assert exact_call_rule(tool, arguments, "/cwd") == rule


def test_slash_parsing() -> None:
    assert parse_slash("hello") is None
    assert parse_slash("//etc/hosts is a file") is None
    assert prompt_text("//etc/hosts") == "/etc/hosts"
    command = parse_slash("/compact keep the API notes ")
    assert command is not None
    assert (command.name, command.argument) == ("compact", "keep the API notes")
    with pytest.raises(UnknownCommand, match="/help"):
        parse_slash("/frobnicate")
    with pytest.raises(UnknownCommand, match="MODE"):
        parse_slash("/mode")


def test_help_lists_every_command_with_its_words_in_one_column() -> None:
    """``/compact [INSTRUCTIONS]summarise…``: the longest synopsis ran into its words."""
    rows = help_text().split("\n\n")[0].splitlines()
    words = [what for _, _, what in SLASH_COMMANDS.values()]
    assert len(rows) == len(words)
    columns = {row.index(what) for row, what in zip(rows, words, strict=True)}
    assert len(columns) == 1
    column = columns.pop()
    assert all(row[column - 2 : column] == "  " for row in rows)


def test_status_line_shows_everything_when_wide() -> None:
    state = ChatState(info=info())
    line = status_line(state, 200)
    assert line == f"{SID} · scripted-model · default · 41% of 32.8k · sandbox off"


def test_status_line_keeps_session_mode_and_turn_when_narrow() -> None:
    state = ChatState(info=info())
    state.turn_started("t1")
    line = status_line(state, 39)
    assert len(line) <= 39
    assert line.startswith(SID[:8])
    assert "default" in line
    assert "thinking" in line


def test_completion_of_commands_modes_and_paths(tmp_path: Path) -> None:
    (tmp_path / "notes.md").write_text("x")
    completer = ChatCompleter(lambda: str(tmp_path))

    def complete(text: str) -> list[str]:
        document = Document(text, len(text))
        return [c.text for c in completer.get_completions(document, CompleteEvent(True))]

    assert complete("/co") == ["/compact", "/context"]
    assert complete("/mode pl") == ["plan"]
    assert complete("read no") == ["tes.md"]


def test_history_puts_this_directory_first_each_prompt_once() -> None:
    def entry(prompt: str, cwd: str) -> HistoryEntry:
        return HistoryEntry(prompt, "s", cwd, "2026-01-01T00:00:00Z")

    here = [entry("b here", "/h"), entry("a here", "/h")]
    everywhere = [entry("c there", "/x"), entry("b here", "/h"), entry("a here", "/h")]
    assert ordered_prompts(here, everywhere) == ["b here", "a here", "c there"]


class RecordingScreen:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def print(self, text: str) -> None:
        self.lines.append(text)

    def refresh(self) -> None:
        pass

    def put_back(self, text: str) -> None:
        self.kept = text

    def input_text(self) -> str:
        return ""

    def leave(self) -> None:
        pass

    def width(self) -> int:
        return 80


def test_follower_streams_then_prints_blocks_and_drops_answered_requests() -> None:
    state = ChatState(info=info())
    screen = RecordingScreen()
    follower = EventFollower(state, screen, Renderer(color=False, width=lambda: 80))
    request = ApprovalRequest("r1", "x1", "Write", {"file_path": "/w/a", "content": "a"}, "asks")
    follower.apply(TextDelta(SID, 1, "t", "Hello **there**"))
    assert state.live_text == "Hello **there**"
    assert not screen.lines
    follower.apply(ToolStarted(SID, 2, "t", "c1", "Write", {"file_path": "/w/a"}))
    assert screen.lines[-1].strip() == "Hello there"
    follower.apply(ApprovalRequested(SID, 3, "t", "x1", [request]))
    assert state.pending == [request]
    follower.apply(ApprovalResolved(SID, 4, "t", "x1", "r1", True))
    assert state.pending == []
    assert "approved elsewhere: Write /w/a" in screen.lines[-1]
    follower.apply(TurnFinished(SID, 5, "t", "aborted"))
    assert not state.running
    assert "turn aborted" in screen.lines[-1]


def test_a_write_over_a_file_shows_what_it_replaces(tmp_path: Path) -> None:
    """The approval of a Write compares it with the file as it is: the lines it would destroy
    show as removed, not as a new file's; a file that cannot be shown (a FIFO, never opened
    to wait on it, or binary) is said to be replaced; a new file is all additions."""
    renderer = Renderer(color=False, width=lambda: 80)
    notes = tmp_path / "notes.txt"
    notes.write_text("IMPORTANT 1\nIMPORTANT 2\n")
    shown = renderer.approval("Write", {"file_path": str(notes), "content": "new\n"}, "asks")
    assert "-IMPORTANT 1" in shown
    assert "-IMPORTANT 2" in shown
    assert "+new" in shown
    assert "@@ -1,2 +1 @@" in shown
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    binary = tmp_path / "blob.bin"
    binary.write_bytes(b"\xff\xfe\x00")
    for path in (fifo, binary):
        shown = renderer.approval("Write", {"file_path": str(path), "content": "x\n"}, "asks")
        assert "(replaces an existing file whose text is not shown)" in shown
        assert "+x" in shown
    fresh = renderer.approval(
        "Write", {"file_path": str(tmp_path / "new.txt"), "content": "y\n"}, "asks"
    )
    assert "@@ -0,0 +1 @@" in fresh
    assert "replaces" not in fresh


def test_cancelling_a_finished_trio_run_hides_nothing() -> None:
    """When trio ended first (its side failed), leaving the prompt cancels nothing and raises
    nothing, so `run_chat` re-raises trio's own failure instead of `trio.RunFinishedError`."""
    kept: list[tuple[trio.lowlevel.TrioToken, trio.CancelScope]] = []

    async def finish() -> None:
        with trio.CancelScope() as scope:
            kept.append((trio.lowlevel.current_trio_token(), scope))

    trio.run(finish)
    token, scope = kept[0]
    cancel_trio(token, scope)
    assert not scope.cancel_called


def test_status_line_drops_the_sandbox_before_the_context() -> None:
    """One part too many for the terminal drops one part: the sandbox went together with the
    context, so an 80-column terminal never showed the context used."""
    state = ChatState(info=info())
    full = status_line(state, 200)
    line = status_line(state, len(full) - 1)
    assert line == f"{SID} · scripted-model · default · 41% of 32.8k"
    assert status_line(state, len(line) - 1) == f"{SID} · scripted-model · default"


def test_the_end_of_a_turn_disarms_leaving_unless_ctrl_c_aborted_it() -> None:
    state = ChatState(info=info())
    state.leave_armed = True  # a Ctrl-C with nothing to abort
    state.turn_started("t1")  # another client's turn …
    state.turn_ended()
    assert not state.leave_armed  # … ended: a Ctrl-C warns again before leaving
    state.turn_started("t2")
    state.leave_armed = state.abort_asked = True  # Ctrl-C aborted this turn
    state.turn_ended()
    assert state.leave_armed  # "Ctrl-C again leaves" still holds


def test_the_live_area_wraps_only_the_end_of_a_long_reply(monkeypatch: pytest.MonkeyPatch) -> None:
    """The live area shows the last lines of the streaming reply, wrapped to the terminal. It
    wrapped the whole reply on every redraw (one per delta), so a long reply made the chat lag
    ever further behind its stream; only the end is wrapped now, and the lines are the same."""
    words = " ".join(f"word{index}" for index in range(40))
    text = "\n".join(f"{index}: {words}" for index in range(2000)) + "\n"
    full: list[str] = []
    for line in text.rstrip("\n").split("\n"):
        full.extend(textwrap.wrap(line, 50) or [""])
    assert live_lines(text, 50, 12) == full[-12:]
    assert live_lines("a\n\nb", 50, 12) == ["a", "", "b"]

    wrapped: list[int] = []
    real_wrap = textwrap.wrap

    def counted(line: str, width: int) -> list[str]:
        wrapped.append(len(line))
        return real_wrap(line, width)

    monkeypatch.setattr(prompt_module.textwrap, "wrap", counted)
    huge = ("x" * 30 + " ") * 40_000 + "the end"  # 1.2 MB on one line
    shown = live_lines(huge, 50, 12)
    assert len(shown) == 12
    assert shown[-1].endswith("the end")
    assert all(len(line) <= 50 for line in shown)
    assert sum(wrapped) <= 2 * 50 * 12 * 2


def test_the_live_area_wraps_wide_characters_by_the_columns_they_take() -> None:
    """A CJK character or an emoji takes two columns: wrapped by characters, a line of them
    was twice as wide as the live area, which cut off its second half."""
    text = "漢字かな交じり文と絵文字🎉 and English words " * 3
    shown = live_lines(text, 20, 12)
    assert all(get_cwidth(line) <= 20 for line in shown)
    assert "".join(shown).replace(" ", "") == text.replace(" ", "")
    assert live_lines("plain words", 20, 12) == ["plain words"]


def test_the_approval_keys_wrap_on_a_narrow_terminal() -> None:
    """``y once · a always · n no`` is 24 columns; the live area cut it (``n no`` lost)."""
    assert answer_keys(80) == "y once · a always · n no"
    assert answer_keys(20) == "y once · a always\nn no"
    assert answer_keys(10) == "y once\na always\nn no"


def _shown(line: str) -> tuple[str, Transformation]:
    """The input line `line` as `ShownHidden` draws it, and the transformation."""
    document = Document(line)
    control = BufferControl(Buffer(document=document))
    transformation = ShownHidden().apply_transformation(
        TransformationInput(control, document, 0, lambda i: i, [("", line)], 80, 1)
    )
    return "".join(fragment[1] for fragment in transformation.fragments), transformation


def test_the_input_line_draws_bidi_controls_and_invisible_characters_by_code_point() -> None:
    drawn, transformation = _shown("a\u202eb\u200bc")
    assert drawn == "a<U+202E>b<U+200B>c"
    # The cursor steps over a drawn code point as over the one character it stands for.
    assert [transformation.source_to_display(i) for i in range(6)] == [0, 1, 9, 10, 18, 19]
    assert [transformation.display_to_source(d) for d in (0, 1, 5, 8, 9, 10, 17, 18, 19)] == [
        0, 1, 1, 1, 2, 3, 3, 4, 5,
    ]  # fmt: skip
    styles = [fragment[0] for fragment in transformation.fragments]
    assert styles.count(f" {SHOWN_STYLE}") == 2


def test_an_input_line_without_hidden_characters_is_drawn_as_it_is() -> None:
    drawn, transformation = _shown("plain \t text ^[ é 👍")
    assert drawn == "plain \t text ^[ é 👍"
    assert transformation.source_to_display(7) == 7


@given(st.text(max_size=40))
def test_the_input_line_shows_what_visible_exactly_shows_of_those_characters(text: str) -> None:
    drawn, _ = _shown(text)
    # C0 and C1 controls are prompt_toolkit's to draw (``^[``); everything else matches.
    expected = "".join(c if unicodedata.category(c) == "Cc" else visible_exactly(c) for c in text)
    assert drawn == expected
