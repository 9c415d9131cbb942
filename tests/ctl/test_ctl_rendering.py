"""robotactl's session commands without a daemon: formatting, defaults, hints, turn rendering
and usage errors (exit 2, nothing contacted)."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import msgspec
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.events import (
    ApprovalResolved,
    Compaction,
    HookFailure,
    PermissionDecided,
    TextDelta,
    ToolFinished,
    ToolStarted,
    TurnFinished,
)
from protocol.methods import (
    LogProblem,
    LogResult,
    PermissionRules,
    SearchResult,
    SessionSummary,
)
from protocol.shapes import (
    ApprovalRequest,
    ContextState,
    Message,
    Pending,
    SessionInfo,
    ToolCall,
    TurnWaiting,
)
from robotactl.approvals import report_waiting, responses, waiting_lines
from robotactl.cli import CommandFailed, cli
from robotactl.commands.records import log_lines, write_private
from robotactl.commands.sessions import first_prompts, list_rows, session_state
from robotactl.commands.settings import context_line, rule_rows
from robotactl.commands.show import Fork, header_lines, message_lines
from robotactl.commands.turns import read_prompt, select_requests
from robotactl.exit_codes import ExitCode
from robotactl.formatting import (
    format_arguments,
    format_call,
    format_context,
    format_tokens,
    format_value,
    format_when,
    home_relative,
    shorten,
)
from robotactl.hints import hint_for
from robotactl.render import Output
from robotactl.sessions import pick_session, same_directory
from robotactl.turn_stream import TurnView

NOW = datetime(2025, 3, 4, 12, 0, tzinfo=UTC)


def plain(text: str, *styles: str) -> str:
    return text


# -- formatting ----------------------------------------------------------------------------------


def test_format_call_is_one_line_with_json_values() -> None:
    text = format_call("Write", {"file_path": "/tmp/x", "content": "a\nb"})
    assert text == 'Write(file_path="/tmp/x", content="a\\nb")'
    long = format_call("Write", {"content": "x" * 500})
    assert len(long) < 80
    assert long.endswith('…")')
    assert format_value("a\nb" * 10, 4) == '"a…"'  # no half escape left behind
    assert format_value(list(range(100)), 10) == "[0, 1, 2,…"
    # What permissions are decided on is never cut: the person approves exactly that.
    path = "/a" * 100
    assert format_call("Write", {"file_path": path, "content": "x" * 500}).startswith(
        f'Write(file_path="{path}", content="xxx'
    )
    assert format_call("Bash", {"command": "make " * 50}) == f'Bash(command="{"make " * 50}")'


def test_format_arguments_shows_multiline_text_whole() -> None:
    lines = format_arguments({"file_path": "/w/a.txt", "content": "one\ntwo\n", "n": 3})
    assert lines == ['file_path: "/w/a.txt"', "content:", "  | one", "  | two", "n: 3"]
    cut = format_arguments({"content": "line\n" * 1000}, width=20)
    assert cut[0].startswith("content: (")
    assert "more characters" in cut[0]


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200), st.integers(min_value=0, max_value=120))
def test_shorten_never_exceeds_its_width_nor_spans_lines(text: str, width: int) -> None:
    short = shorten(text, width)
    assert len(short) <= width
    assert "\n" not in short


def test_format_when_is_as_short_as_unambiguous() -> None:
    local_noon = NOW.astimezone()
    assert format_when(NOW.isoformat().replace("+00:00", "Z"), now=NOW) == local_noon.strftime(
        "%H:%M"
    )
    earlier = (NOW - timedelta(days=40)).isoformat()
    assert format_when(earlier, now=NOW) == (NOW - timedelta(days=40)).astimezone().strftime(
        "%b %d %H:%M"
    )
    assert format_when("2019-01-01T00:00:00Z", now=NOW).startswith("201")
    assert format_when("yesterday", now=NOW) == "?"
    assert format_when(None, now=NOW) == "?"


def test_an_instant_with_no_utc_date_shows_as_unreadable() -> None:
    """``robotactl ls`` stopped with an OverflowError traceback, whatever else it listed, when
    one session's ``updatedAt`` had no UTC date (``0001-01-01T00:00:00+01:00``, which an
    import used to take): such an instant shows as ``?``, as any unreadable one does."""
    assert format_when("0001-01-01T00:00:00+01:00", now=NOW) == "?"
    assert format_when("9999-12-31T23:59:59-05:00", now=NOW) == "?"


def test_home_relative_and_tokens() -> None:
    assert home_relative("/home/u/src/x", home="/home/u") == "~/src/x"
    assert home_relative("/home/user2/x", home="/home/u") == "/home/user2/x"
    assert home_relative(None) == "?"
    assert [format_tokens(n) for n in (950, 12_345, 200_000, 1_500_000)] == [
        "950",
        "12.3k",
        "200k",
        "1.5M",
    ]
    assert format_context(12_345, 200_000, 6.17) == "12.3k / 200k tokens (6.17% used)"
    assert context_line(ContextState.of(50, 200)) == "50 / 200 tokens (25.00% used, 75.00% free)"


# -- hints ---------------------------------------------------------------------------------------


def test_hints_name_the_command_that_helps() -> None:
    busy = hint_for(-32001, {"sessionId": "s1", "turnId": "t"})
    assert busy is not None
    assert busy.startswith("a turn is running")
    assert "robotactl abort -s s1" in busy
    compacting = hint_for(-32001, {"sessionId": "s1", "turnId": None})
    assert compacting is not None
    assert compacting.startswith("something is running")
    pending = hint_for(-32005, {"sessionId": "s1", "executionId": "e"})
    assert pending is not None
    assert "robotactl approve -s s1" in pending
    assert "robotactl abandon -s s1" in pending  # the way out, not a circle
    uncertain = hint_for(-32015, {"sessionId": "s1", "executionId": "e", "calls": ["c"]})
    assert uncertain is not None
    assert "robotactl abandon -s s1" in uncertain
    assert "approve" not in uncertain
    full = hint_for(-32016, {"sessionId": "s1", "path": "sessions/s1.json", "reason": "r"})
    assert full is not None
    assert "sessions/s1.json" in full
    assert "no restart" in full
    assert "robotactl ls" in (hint_for(-32002, {"sessionId": "x"}) or "")
    assert "show -s x" in (hint_for(-32002, {"sessionId": "x", "messageId": "m"}) or "")
    assert "classifier" in (hint_for(-32013, {"mode": "auto"}) or "")
    assert "at most 4,096 bytes" in (hint_for(-32600, {"limit": 4096}) or "")
    assert hint_for(-32600, None) is None
    assert hint_for(-32603, None) is None


def test_a_failed_model_call_hints_at_the_provider_table_to_fix() -> None:
    """-32007 is what a new user meets first (no model server running yet, a wrong
    base_url, a key the server refuses) and came with no hint: the way out was only in the
    README's troubleshooting."""

    def hint(reason: str, provider: str = "local") -> str:
        facts = {"sessionId": "s1", "turnId": "t1", "provider": provider, "reason": reason}
        return hint_for(-32007, facts) or ""

    refused = hint("127.0.0.1:11434: connection refused (gave up after 3 attempts)")
    assert refused.startswith("nothing answers at that address: start the model server")
    assert "base_url in [providers.local] of robotad's config.toml" in refused
    assert '[providers."my box"]' in hint("cannot resolve the host name", "my box")
    assert "--idle-timeout" in hint("127.0.0.1:8080: no data for 120 s (idle timeout)")
    assert "api_key_command" in hint("api.example:443: HTTP 401: authentication failed")
    assert "/v1" in hint("h:80: the server answered with text/html, not an event stream: …")
    assert hint("stream error reported by the server") == ""
    assert hint_for(-32007, None) is None


# -- -s defaulting -------------------------------------------------------------------------------


def summary(
    sid: str, cwd: str | None, updated: str | None, status: str = "ok", **extra: Any
) -> SessionSummary:
    fields = {
        "sessionId": sid,
        "cwd": cwd,
        "createdAt": updated,
        "updatedAt": updated,
        "messageCount": 0 if status == "ok" else None,
        "loaded": False,
        "running": False,
        "waiting": False,
        "status": status,
        **extra,
    }
    return msgspec.convert(fields, SessionSummary)


def test_default_session_is_the_newest_healthy_one_of_this_directory(tmp_path: Path) -> None:
    here, elsewhere = tmp_path / "here", tmp_path / "elsewhere"
    here.mkdir()
    elsewhere.mkdir()
    link = tmp_path / "link"
    link.symlink_to(here)
    sessions = [
        summary("newest-elsewhere", str(elsewhere), "2025-03-04T12:00:00.000Z"),
        summary("broken", str(here), "2025-03-04T11:00:00.000Z", status="corrupt"),
        summary("older", str(here), "2025-03-01T09:00:00.000Z"),
        summary("newer-through-link", str(link), "2025-03-02T09:00:00.000Z"),
    ]
    assert pick_session(sessions, str(here)) == "newer-through-link"
    assert pick_session(sessions, str(elsewhere)) == "newest-elsewhere"
    assert pick_session(sessions, str(tmp_path)) is None
    assert same_directory(str(link), str(here))
    assert not same_directory(str(here), str(elsewhere))


# -- ls ------------------------------------------------------------------------------------------


def test_ls_rows_mark_state_damage_and_forks() -> None:
    rows = list_rows(
        [
            summary("a", "/w", "2025-03-04T11:59:00Z", title="Fix the build", running=True),
            summary("b", "/w", "2025-03-04T11:00:00Z", waiting=True, loaded=True),
            summary("c", "/w", "2025-03-04T10:00:00Z", forkedFrom="a", title="try again"),
            summary("d", None, None, status="unsupported"),
        ],
        now=NOW,
    )
    assert [row[0] for row in rows] == ["a", "b", "c", "d"]
    assert [row[-1] for row in rows] == ["running", "waiting", "idle", "unsupported"]
    assert rows[0][1] == "Fix the build"
    assert rows[1][1] == "—"
    assert rows[2][1] == "↳ from a: try again"
    assert rows[3][2:5] == ("?", "?", "?")
    assert session_state(summary("e", "/w", "x", loaded=True)) == "loaded"


def test_untitled_sessions_are_shown_by_their_first_prompt() -> None:
    search = msgspec.convert(
        {
            "entries": [
                {"prompt": "latest", "sessionId": "a", "cwd": "/w", "timestamp": "t3"},
                {"prompt": "other", "sessionId": "b", "cwd": "/w", "timestamp": "t2"},
                {"prompt": "first of a", "sessionId": "a", "cwd": "/w", "timestamp": "t1"},
            ],
            "unreadableLines": 0,
        },
        SearchResult,
    )
    prompts = first_prompts(search)
    assert prompts == {"a": "first of a", "b": "other"}
    rows = list_rows(
        [summary("a", "/w", "x", messageCount=4), summary("b", "/w", "x", title="Titled")],
        now=NOW,
        prompts=prompts,
    )
    assert [row[1] for row in rows] == ["first of a", "Titled"]


def test_a_session_that_kept_no_message_is_not_titled_by_a_lost_prompt() -> None:
    """The prompt history keeps what was sent; a turn refused before its prompt entered the
    session (a full disk, a provider that cannot be reached) left nothing to title."""
    prompts = {"lost": "never answered", "kept": "answered"}
    rows = list_rows(
        [summary("lost", "/w", "x"), summary("kept", "/w", "x", messageCount=2)],
        now=NOW,
        prompts=prompts,
    )
    assert [row[1] for row in rows] == ["—", "answered"]


# -- show ----------------------------------------------------------------------------------------


def info(**changes: Any) -> SessionInfo:
    base = SessionInfo(
        session_id="s1",
        cwd="/w",
        provider="scripted",
        model="demo",
        permission_mode="default",
        created_at="2025-03-04T11:00:00.000Z",
        updated_at="2025-03-04T11:00:00.000Z",
        message_count=4,
        turn_count=1,
        running=False,
        pending=None,
        context=ContextState.of(1000, 32768),
    )
    for key, value in changes.items():
        setattr(base, key, value)
    return base


def test_show_header_marks_forks_and_waiting() -> None:
    request = ApprovalRequest("r1", "e1", "Write", {"file_path": "/w/a"}, "modify needs approval")
    lines = header_lines(info(pending=Pending("e1", [request])), Fork("src", "m-7"), style=plain)
    assert lines[0].startswith("session s1  /w  scripted/demo  mode default")
    assert "4 messages · 1 turn · context 1k / 32.8k tokens" in lines[1]
    assert lines[2] == "waiting for approval (1 request)"
    assert lines[3] == '  r1  Write(file_path="/w/a")'
    assert lines[4] == "forked from src at m-7"
    assert header_lines(info(), None, style=plain)[2:] == []


def test_show_messages_compact_tools_and_keep_text() -> None:
    user = Message.user("write it\nplease")
    assistant = Message.assistant(
        "On it.", [ToolCall("c1", "Write", {"file_path": "/w/a", "content": "x"})]
    )
    result = Message.tool("c1", "Write", "wrote 1 byte\nto /w/a", ok=True)
    failed = Message.tool("c2", "Bash", "exit 1", ok=False)
    cut = Message.assistant("Half", interrupted=True)
    lines = [message_lines(m, style=plain, now=NOW) for m in (user, assistant, result, failed, cut)]
    assert lines[0][0].startswith("user  ")
    assert lines[0][0].endswith(user.id)
    assert lines[0][1:] == ["  write it", "  please"]
    assert lines[1][1:] == ["  On it.", '  → Write(file_path="/w/a", content="x")']
    assert lines[2][0].startswith("tool Write ✓")
    assert lines[2][1:] == ["  wrote 1 byte to /w/a"]
    assert lines[3][0].startswith("tool Bash ✗")
    assert lines[4][0].startswith("assistant (interrupted)")


# -- approvals -----------------------------------------------------------------------------------

REQUESTS = [
    ApprovalRequest("r1", "e1", "Write", {"file_path": "/w/a.txt", "content": "hi"}, "modify"),
    ApprovalRequest("r2", "e1", "Bash", {"command": "make"}, "execute"),
]


def test_waiting_lines_put_the_id_first() -> None:
    assert waiting_lines(REQUESTS) == [
        'r1\tWrite(file_path="/w/a.txt", content="hi")',
        'r2\tBash(command="make")',
    ]


def test_responses_get_fresh_ids() -> None:
    first, second = responses(REQUESTS, True), responses(REQUESTS, True)
    assert [r["requestId"] for r in first] == ["r1", "r2"]
    assert all(r["approved"] is True for r in first)
    assert {r["responseId"] for r in first}.isdisjoint(r["responseId"] for r in second)
    assert all(r["approved"] is False for r in responses(REQUESTS, False))


def test_select_requests_by_id_or_all() -> None:
    assert select_requests(REQUESTS, []) == REQUESTS
    assert select_requests(REQUESTS, ["r2", "r2"]) == [REQUESTS[1]]
    with pytest.raises(CommandFailed, match=r"not pending: nope .*r1, r2"):
        select_requests(REQUESTS, ["nope"])
    with pytest.raises(CommandFailed, match=r"not pending: nope \("):  # named once, not twice
        select_requests(REQUESTS, ["nope", "nope"])


def test_report_waiting_json_is_the_turn_result(capsys: pytest.CaptureFixture[str]) -> None:
    waiting = TurnWaiting("t1", "e1", REQUESTS)
    report_waiting(waiting, "s1", Output(json_mode=True, color=False))
    captured = capsys.readouterr()
    assert msgspec.json.decode(captured.out, type=TurnWaiting) == waiting
    assert captured.err == ""  # under --json, stderr carries an error or nothing


# -- streaming view ------------------------------------------------------------------------------


def event(cls: Any, **members: Any) -> Any:
    return cls(session_id="s1", seq=1, turn_id="t1", **members)


def test_turn_view_streams_text_and_puts_activity_on_its_own_lines(
    capsys: pytest.CaptureFixture[str],
) -> None:
    view = TurnView(Output(color=False), show_text=True)
    for item in (
        event(TextDelta, text="I'll write "),
        event(TextDelta, text="it."),
        event(PermissionDecided, call_id="c1", tool="Write", decision="ask", reason="modify"),
        event(ToolStarted, call_id="c1", tool="Write", arguments={"file_path": "/w/a"}),
        event(ToolFinished, call_id="c1", tool="Write", ok=True, preview="wrote 2 bytes"),
        event(ApprovalResolved, execution_id="e1", request_id="r1", approved=True),
        event(Compaction, trigger="auto", phase="completed"),
        event(TextDelta, text="Done."),
    ):
        view.event(item)
    view.end_line()
    captured = capsys.readouterr()
    assert captured.out == "I'll write it.\nDone.\n"
    assert captured.err.splitlines() == [
        "  Write: needs approval — modify",
        '→ Write(file_path="/w/a")',
        "  Write ✓ wrote 2 bytes",
        "  approved r1",
        "⋯ compaction (auto): completed",
    ]
    assert view.streamed


def test_turn_view_shows_the_hooks_that_failed_in_the_turn(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """An advisory hook that failed never fails the turn; `run` printed nothing of it."""
    view = TurnView(Output(color=False), show_text=True)
    failures = [
        HookFailure("UserPromptSubmit", "hook UserPromptSubmit[0].hooks[0] timed out after 1s"),
        HookFailure("Stop", "hook Stop[0].hooks[0] exited 7"),
    ]
    view.event(event(TextDelta, text="hello again"))
    view.event(event(TurnFinished, status="completed", hook_failures=failures))
    captured = capsys.readouterr()
    assert captured.out == "hello again\n"
    assert captured.err.splitlines() == [
        "hook UserPromptSubmit failed: hook UserPromptSubmit[0].hooks[0] timed out after 1s",
        "hook Stop failed: hook Stop[0].hooks[0] exited 7",
    ]


def test_turn_view_in_json_mode_keeps_stdout_clean(capsys: pytest.CaptureFixture[str]) -> None:
    view = TurnView(Output(json_mode=True, color=False), show_text=False)
    view.event(event(TextDelta, text="hello"))
    view.event(event(TurnFinished, status="failed"))
    view.event(event(ToolStarted, call_id="c1", tool="Read", arguments={"file_path": "/a"}))
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == ""  # stderr carries only an error, as JSON
    assert not view.streamed


@pytest.mark.parametrize("columns", [1, 2, 12, 30])
def test_the_waiting_line_fits_a_narrow_terminal(columns: int) -> None:
    """Drawn wider than the terminal, the line wrapped and each redraw (``\\r``, every 0.2 s)
    left a row behind: a narrow pane filled with ``⠦ waiting for the mo``."""
    import fcntl
    import os
    import struct
    import termios

    from robotactl.waiting import WaitingLine

    master, slave = os.openpty()
    try:
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
        with open(slave, "w", encoding="utf-8", closefd=False) as stream:
            line = WaitingLine(stream, styled=False)
            line.draw(12, "mcp__github__create_pull_request_review")
            line.draw(13, "the model")
            line.clear()
        written = os.read(master, 65536).decode().replace("\r\n", "\n")
    finally:
        os.close(master)
        os.close(slave)
    drawn = [part for part in written.split("\r") if part]
    assert "\n" not in written
    assert all(len(part) < columns for part in drawn), drawn
    if columns >= 12:
        assert drawn[0].startswith("⠋ waiting")
        assert drawn[0].endswith("…")


# -- settings, records ---------------------------------------------------------------------------


def test_rule_rows_and_log_lines() -> None:
    rows = rule_rows(PermissionRules(allow=["Read", "Write(src/**)"], ask=[], deny=["Bash"]))
    assert rows == [("allow", "Read, Write(src/**)"), ("ask", "—"), ("deny", "Bash")]
    report = LogResult(
        entries=7,
        complete=False,
        problems=[LogProblem("bad json", line=3), LogProblem("unknown", event="x")],
    )
    assert log_lines("s1", report) == [
        "log of s1: 7 entries, INCOMPLETE, 2 problems",
        "  line 3: bad json",
        "  (x): unknown",
    ]


def test_the_log_header_counts_the_problems_the_daemon_left_out_of_its_list() -> None:
    """`session/log` lists the first 1,000 problems and then one, without line or event,
    saying how many more there are: the header counts them all, and says how many are
    listed. It counted only the listed ones (1,001 for a log of 1,500 problems)."""
    listed = [LogProblem("not JSON", line=n) for n in range(1, 1001)]
    more = LogResult(5, False, [*listed, LogProblem("500 more problems not listed")])
    lines = log_lines("s1", more)
    assert lines[0] == "log of s1: 5 entries, INCOMPLETE, 1500 problems, the first 1000 listed"
    assert lines[-1] == "  500 more problems not listed"
    one_more = LogResult(5, False, [*listed, LogProblem("1 more problem not listed")])
    assert log_lines("s1", one_more)[0].endswith("INCOMPLETE, 1001 problems, the first 1000 listed")
    # Only a last problem without line or event says so; one quoting such words is counted.
    quoted = LogProblem("7 more problems not listed", line=3, event="x")
    assert log_lines("s1", LogResult(5, False, [quoted]))[0].endswith("INCOMPLETE, 1 problem")
    first = [LogProblem("7 more problems not listed"), listed[0]]
    assert log_lines("s1", LogResult(5, False, first))[0].endswith("INCOMPLETE, 2 problems")


def test_write_private_is_owner_only_and_replaces(tmp_path: Path) -> None:
    target = tmp_path / "a.json"
    target.write_text("old")
    target.chmod(0o644)
    write_private(target, '{"x": 1}\n')
    assert json.loads(target.read_text()) == {"x": 1}
    assert target.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"]


# -- prompts and usage errors --------------------------------------------------------------------


def test_read_prompt_joins_words_or_reads_stdin(monkeypatch: pytest.MonkeyPatch) -> None:
    assert read_prompt(["fix", "the", "build"]) == "fix the build"
    monkeypatch.setattr("sys.stdin", io.StringIO("from stdin\n\n"))
    assert read_prompt(["-"]) == "from stdin"


@pytest.mark.parametrize(
    "args",
    [
        ["run"],  # PROMPT missing
        ["run", "   "],  # empty prompt
        ["new", "--mode", "sideways"],
        ["new", "--cwd", "/no/such/dir"],
        ["mode", "sideways"],
        ["rule", "maybe", "Read"],
        ["rule", "allow"],
        ["show", "--limit", "0"],
        ["history", "--limit", "-1"],
        ["rm"],
        ["import"],
        ["import", "/no/such/file.json"],
        ["fork", "--at"],
        ["approve", "-s"],
    ],
)
def test_usage_errors_exit_2_without_contacting_a_daemon(args: list[str], socket_dir: Path) -> None:
    result = CliRunner().invoke(cli, ["--socket", str(socket_dir / "robotad.sock"), *args])
    assert result.exit_code == ExitCode.USAGE, result.output
    assert not (socket_dir / "robotad.sock").exists()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not valid JSON"),
        ('{"text": "a"}', "expected a JSON array of steps"),
    ],
)
def test_a_bad_script_file_is_a_located_usage_error(
    content: str, message: str, tmp_path: Path, socket_dir: Path
) -> None:
    script = tmp_path / "script.json"
    script.write_text(content)
    result = CliRunner().invoke(
        cli, ["--socket", str(socket_dir / "robotad.sock"), "new", "--script", str(script)]
    )
    assert result.exit_code == ExitCode.USAGE
    assert message in result.output
    assert not (socket_dir / "robotad.sock").exists()


def test_a_bad_import_file_is_a_usage_error(tmp_path: Path, socket_dir: Path) -> None:
    artifact = tmp_path / "a.json"
    artifact.write_text("[1, 2]")
    result = CliRunner().invoke(
        cli, ["--socket", str(socket_dir / "robotad.sock"), "import", str(artifact)]
    )
    assert result.exit_code == ExitCode.USAGE
    assert "expected a JSON object" in result.output
