"""robotactl's session commands against a real robotad: each command's human output, its
``--json`` output decoded by the protocol Structs, its failures, and ``-s`` defaulting."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from protocol.methods import (
    AbortResult,
    CloseResult,
    CompactResult,
    DaemonStatus,
    DeleteResult,
    ExportResult,
    HistoryResult,
    LogResult,
    PermissionRules,
    SearchResult,
    SessionList,
    SetPermissionModeResult,
)
from protocol.shapes import ContextState, SessionInfo, TurnCompleted
from robotactl.exit_codes import ExitCode

from .conftest import PROCESS_TIMEOUT, Ctl, RunningDaemon, child_environment
from .ctl_helpers import decoded, new_session, sock


def ran(ctl: Ctl, daemon: RunningDaemon, session_id: str, prompt: str) -> TurnCompleted:
    return decoded(ctl(*sock(daemon), "--json", "run", "-s", session_id, prompt), TurnCompleted)


def state_dir(ctl: Ctl, daemon: RunningDaemon) -> Path:
    return Path(decoded(ctl(*sock(daemon), "--json", "status"), DaemonStatus).state_dir)


# -- new -----------------------------------------------------------------------------------------


def test_new_prints_only_the_id_and_json_is_the_session_info(
    ctl: Ctl, robotad: RunningDaemon, work: Path
) -> None:
    session_id = new_session(ctl, robotad, work)
    info = decoded(ctl(*sock(robotad), "--json", "show", "-s", session_id), HistoryResult)
    assert info.total == 0
    result = ctl(
        *sock(robotad),
        "--json",
        "new",
        "--cwd",
        str(work),
        "--id",
        "chosen-1",
        "--mode",
        "plan",
        "--system",
        "Be brief.",
        "--allow",
        "Read",
    )
    created = decoded(result, SessionInfo)
    assert (created.session_id, created.cwd, created.permission_mode) == (
        "chosen-1",
        str(work),
        "plan",
    )
    assert created.provider == "scripted"
    assert result.stderr == ""


def test_new_defaults_to_the_current_directory(
    ctl: Ctl, robotad: RunningDaemon, work: Path
) -> None:
    result = ctl(*sock(robotad), "--json", "new", cwd=work)
    assert decoded(result, SessionInfo).cwd == str(work)


def test_new_refuses_every_malformed_rule_at_once(
    ctl: Ctl, robotad: RunningDaemon, work: Path
) -> None:
    result = ctl(
        *sock(robotad), "new", "--cwd", str(work), "--allow", "Read(", "--deny", "Bash(:*)"
    )
    # A bad option is a usage error (exit 2) like any other, each pattern named (issue 14).
    assert result.returncode == ExitCode.USAGE
    assert "--allow ($.permissions.allow[0])" in result.stderr
    assert "--deny ($.permissions.deny[0])" in result.stderr
    assert result.stdout == ""


def test_new_refuses_an_argument_pattern_on_an_mcp_tool_saying_what_to_write(
    ctl: Ctl, robotad: RunningDaemon, work: Path
) -> None:
    """Decision 73: ``--deny 'mcp__files__write(/etc/**)'`` would deny nothing (an MCP tool has
    no argument a pattern could match); it is a usage error naming the option and the fix."""
    result = ctl(*sock(robotad), "new", "--cwd", str(work), "--deny", "mcp__files__write(/etc/**)")
    assert result.returncode == ExitCode.USAGE
    assert "--deny ($.permissions.deny[0]): MCP tools take no argument pattern" in result.stderr
    assert "write 'mcp__files__write' for every call of that tool" in result.stderr
    assert result.stdout == ""


def test_new_and_rule_refuse_an_mcp_name_in_another_case_saying_what_to_write(
    ctl: Ctl, robotad: RunningDaemon, work: Path
) -> None:
    """Decision 81: ``--allow Mcp__files`` would allow nothing (every MCP tool's name starts
    with ``mcp__`` itself); ``new`` and ``rule`` refuse it as a usage error naming the option
    and the name to write, and add nothing."""
    result = ctl(*sock(robotad), "new", "--cwd", str(work), "--allow", "Mcp__files")
    assert result.returncode == ExitCode.USAGE
    assert (
        "--allow ($.permissions.allow[0]): MCP tools are named with 'mcp__' in lower case"
        in result.stderr
    )
    assert "write 'mcp__files' for every tool of that server" in result.stderr
    assert result.stdout == ""
    session_id = new_session(ctl, robotad, work)
    typed = ctl(*sock(robotad), "rule", "-s", session_id, "deny", "MCP__files__write")
    assert typed.returncode == ExitCode.USAGE
    assert "PATTERN ($.rule): MCP tools are named with 'mcp__' in lower case" in typed.stderr
    assert "write 'mcp__files__write' for every call of that tool" in typed.stderr
    listed = decoded(
        ctl(*sock(robotad), "--json", "rule", "-s", session_id, "deny", "mcp__files__write"),
        PermissionRules,
    )
    assert listed.deny == ["mcp__files__write"]


def test_new_with_a_taken_id_says_what_to_do(ctl: Ctl, robotad: RunningDaemon, work: Path) -> None:
    new_session(ctl, robotad, work, None, "--id", "taken")
    result = ctl(*sock(robotad), "new", "--cwd", str(work), "--id", "taken")
    assert result.returncode == ExitCode.ERROR
    assert "error -32010" in result.stderr
    assert "hint:" in result.stderr
    assert "robotactl rm" in result.stderr


# -- ls ------------------------------------------------------------------------------------------


def test_ls_lists_sessions_newest_first_damaged_ones_too(
    ctl: Ctl, robotad: RunningDaemon, work: Path
) -> None:
    """G-006: `ls` lists a damaged record as corrupt instead of hiding it."""
    first = new_session(ctl, robotad, work, [{"text": "ok"}])
    second = new_session(ctl, robotad, work)
    ran(ctl, robotad, first, "make the first one newest")
    sessions = state_dir(ctl, robotad) / "sessions"
    (sessions / "broken.json").write_text('{"schemaVersion": 1, "record": {"id": 5}}')
    listing = decoded(ctl(*sock(robotad), "--json", "ls"), SessionList)
    by_id = {entry.session_id: entry for entry in listing.sessions}
    assert listing.sessions[0].session_id == first
    assert by_id["broken"].status == "corrupt"
    assert by_id[first].message_count == 2
    table = ctl(*sock(robotad), "ls", NO_COLOR="1")
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split() == ["ID", "TITLE", "CWD", "UPDATED", "MSGS", "STATE"]
    rows = {line.split()[0]: line for line in lines[1:]}
    assert set(rows) == {first, second, "broken"}
    assert rows["broken"].rstrip().endswith("corrupt")
    assert str(work) in rows[second] or "~" in rows[second]


def test_ls_with_no_sessions_says_so(ctl: Ctl, robotad: RunningDaemon) -> None:
    result = ctl(*sock(robotad), "ls")
    assert result.returncode == 0
    assert result.stdout == ""
    assert "robotactl new" in result.stderr
    assert decoded(ctl(*sock(robotad), "--json", "ls"), SessionList).sessions == []


# -- show, fork ----------------------------------------------------------------------------------


def test_show_renders_the_history_readably(ctl: Ctl, robotad: RunningDaemon, work: Path) -> None:
    session_id = new_session(ctl, robotad, work, [{"text": "General Kenobi."}])
    ran(ctl, robotad, session_id, "Hello there")
    result = ctl(*sock(robotad), "show", "-s", session_id, NO_COLOR="1")
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert text.startswith(f"session {session_id}")
    assert "2 messages · 1 turn ·" in text
    assert "\nuser  " in text
    assert "\n  Hello there\n" in text
    assert "\nassistant  " in text
    assert "\n  General Kenobi.\n" in text
    history = decoded(ctl(*sock(robotad), "--json", "show", "-s", session_id), HistoryResult)
    assert [m.role for m in history.messages] == ["user", "assistant"]
    assert history.messages[0].id in text  # ids are shown, for fork --at
    last = ctl(*sock(robotad), "show", "-s", session_id, "--limit", "1", NO_COLOR="1")
    assert "(the last 1 of 2 messages)" in last.stdout
    assert "Hello there" not in last.stdout
    page = decoded(
        ctl(*sock(robotad), "--json", "show", "-s", session_id, "-n", "1"), HistoryResult
    )
    assert (page.total, [m.role for m in page.messages]) == (2, ["assistant"])


def test_fork_prints_the_new_id_and_the_fork_is_marked(
    ctl: Ctl, robotad: RunningDaemon, work: Path
) -> None:
    source = new_session(ctl, robotad, work, [{"text": "one"}, {"text": "two"}])
    ran(ctl, robotad, source, "first")
    ran(ctl, robotad, source, "second")
    history = decoded(ctl(*sock(robotad), "--json", "show", "-s", source), HistoryResult)
    cut = history.messages[1].id  # the first reply
    result = ctl(*sock(robotad), "fork", "-s", source, "--at", cut, "--id", "branch")
    assert (result.returncode, result.stdout) == (0, "branch\n"), result.stderr
    forked = decoded(ctl(*sock(robotad), "--json", "show", "-s", "branch"), HistoryResult)
    assert [m.id for m in forked.messages] == [m.id for m in history.messages[:2]]
    shown = ctl(*sock(robotad), "show", "-s", "branch", NO_COLOR="1").stdout
    assert f"forked from {source} at {cut}" in shown
    assert f"↳ from {source}" in ctl(*sock(robotad), "ls", NO_COLOR="1").stdout
    info = decoded(ctl(*sock(robotad), "--json", "fork", "-s", source), SessionInfo)
    assert info.message_count == 4


def test_fork_at_an_unknown_message_fails_with_a_hint(
    ctl: Ctl, robotad: RunningDaemon, work: Path
) -> None:
    source = new_session(ctl, robotad, work)
    result = ctl(*sock(robotad), "fork", "-s", source, "--at", "m-nope")
    assert result.returncode == ExitCode.ERROR
    assert "error -32002" in result.stderr
    assert f"robotactl show -s {source}" in result.stderr


# -- close, rm -----------------------------------------------------------------------------------


def test_close_then_rm_and_rm_refuses_a_loaded_session(
    ctl: Ctl, robotad: RunningDaemon, work: Path
) -> None:
    session_id = new_session(ctl, robotad, work)
    refused = ctl(*sock(robotad), "rm", session_id)
    assert refused.returncode == ExitCode.ERROR
    assert "error -32014" in refused.stderr
    assert "robotactl close" in refused.stderr
    closed = ctl(*sock(robotad), "close", "-s", session_id)
    assert (closed.returncode, closed.stdout) == (0, f"closed {session_id}\n")
    removed = ctl(*sock(robotad), "rm", session_id)
    assert (removed.returncode, removed.stdout) == (0, f"deleted {session_id}\n")
    listing = decoded(ctl(*sock(robotad), "--json", "ls"), SessionList)
    assert session_id not in {entry.session_id for entry in listing.sessions}
    gone = ctl(*sock(robotad), "show", "-s", session_id)
    assert gone.returncode == ExitCode.ERROR
    assert "error -32002" in gone.stderr


def test_rm_force_closes_first_and_json_results_decode(
    ctl: Ctl, robotad: RunningDaemon, work: Path
) -> None:
    first, second = new_session(ctl, robotad, work), new_session(ctl, robotad, work)
    assert decoded(ctl(*sock(robotad), "--json", "rm", "--force", first), DeleteResult).deleted
    assert decoded(ctl(*sock(robotad), "--json", "close", "-s", second), CloseResult).closed
    # rm names its session with -s like every other command (issue 14), or positionally.
    assert decoded(ctl(*sock(robotad), "--json", "rm", "-s", second), DeleteResult).deleted


# -- export, import ------------------------------------------------------------------------------


def test_export_to_a_private_file_and_import_it_back(
    ctl: Ctl, robotad: RunningDaemon, work: Path, tmp_path: Path
) -> None:
    source = new_session(ctl, robotad, work, [{"text": "kept"}])
    ran(ctl, robotad, source, "remember this")
    target = tmp_path / "session.json"
    exported = ctl(*sock(robotad), "export", "-s", source, "-o", str(target))
    assert exported.returncode == 0, exported.stderr
    assert exported.stdout == ""
    assert str(target) in exported.stderr
    assert target.stat().st_mode & 0o777 == 0o600
    artifact = json.loads(target.read_text())
    assert list(artifact) == ["schemaVersion", "kind", "exportedAt", "record"]
    imported = ctl(*sock(robotad), "import", str(target), "--id", "copy")
    assert (imported.returncode, imported.stdout) == (0, "copy\n"), imported.stderr
    original = decoded(ctl(*sock(robotad), "--json", "show", "-s", source), HistoryResult)
    copy = decoded(ctl(*sock(robotad), "--json", "show", "-s", "copy"), HistoryResult)
    assert copy.messages == original.messages


def test_export_json_is_the_result_and_import_takes_it(
    ctl: Ctl, robotad: RunningDaemon, work: Path, tmp_path: Path
) -> None:
    source = new_session(ctl, robotad, work)
    result = ctl(*sock(robotad), "--json", "export", "-s", source, "--redact")
    decoded(result, ExportResult)
    wrapped = tmp_path / "wrapped.json"
    wrapped.write_text(result.stdout)
    info = decoded(ctl(*sock(robotad), "--json", "import", str(wrapped), "--id", "w2"), SessionInfo)
    assert info.session_id == "w2"
    # Plain `export` prints the bare artifact: the file format itself, read from stdin here.
    bare = ctl(*sock(robotad), "export", "-s", source)
    assert json.loads(bare.stdout)["kind"] == "robota.session"
    again = ctl(*sock(robotad), "import", "-", "--id", "w3", input=bare.stdout)
    assert again.stdout == "w3\n", again.stderr


def test_a_defective_artifact_is_refused_with_located_issues(
    ctl: Ctl, robotad: RunningDaemon, tmp_path: Path
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"schemaVersion": 1, "kind": "robota.session", "exportedAt": "x"}))
    result = ctl(*sock(robotad), "import", str(bad))
    assert result.returncode == ExitCode.ERROR
    assert "error -32602" in result.stderr
    assert "$.artifact" in result.stderr


# -- history, log --------------------------------------------------------------------------------


def test_history_searches_prompts(ctl: Ctl, robotad: RunningDaemon, work: Path) -> None:
    session_id = new_session(ctl, robotad, work)
    ran(ctl, robotad, session_id, "find the needle")
    ran(ctl, robotad, session_id, "something else")
    found = decoded(ctl(*sock(robotad), "--json", "history", "needle"), SearchResult)
    assert [(e.prompt, e.session_id) for e in found.entries] == [("find the needle", session_id)]
    table = ctl(*sock(robotad), "history", "--cwd", str(work), "--limit", "5", NO_COLOR="1")
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split() == ["WHEN", "SESSION", "PROMPT"]
    assert "something else" in lines[1]
    assert "find the needle" in lines[2]
    none = ctl(*sock(robotad), "history", "no such prompt anywhere")
    assert (none.returncode, none.stdout) == (0, "")
    assert "no prompts found" in none.stderr
    # `-n 0` asks for none (as `head -n 0`): saying none was found would be false.
    zero = ctl(*sock(robotad), "history", "needle", "-n", "0")
    assert (zero.returncode, zero.stdout, zero.stderr) == (0, "", "")


def test_log_reports_a_complete_log_and_exits_1_on_a_damaged_one(
    ctl: Ctl, robotad: RunningDaemon, work: Path
) -> None:
    session_id = new_session(ctl, robotad, work)
    ran(ctl, robotad, session_id, "log this")
    good = ctl(*sock(robotad), "log", "-s", session_id)
    assert good.returncode == 0, good.stderr
    assert good.stdout.startswith(f"log of {session_id}: ")
    assert "complete" in good.stdout
    report = decoded(ctl(*sock(robotad), "--json", "log", "-s", session_id), LogResult)
    assert report.complete
    assert report.entries > 0
    log_file = state_dir(ctl, robotad) / "logs" / f"{session_id}.jsonl"
    with open(log_file, "a") as handle:
        handle.write("{this is not a log line\n")
    bad = ctl(*sock(robotad), "log", "-s", session_id)
    assert bad.returncode == ExitCode.ERROR
    assert "INCOMPLETE" in bad.stdout
    bad_json = ctl(*sock(robotad), "--json", "log", "-s", session_id)
    assert bad_json.returncode == ExitCode.ERROR
    assert not json.loads(bad_json.stdout)["complete"]


def test_log_counts_every_problem_when_the_daemon_lists_only_the_first(
    ctl: Ctl, robotad: RunningDaemon, work: Path
) -> None:
    """A log of 1,200 bad lines: the daemon lists the first 1,000 and says 200 more; the
    header says 1,200, not the 1,001 problems it was sent."""
    session_id = new_session(ctl, robotad, work)
    ran(ctl, robotad, session_id, "log this")
    log_file = state_dir(ctl, robotad) / "logs" / f"{session_id}.jsonl"
    with open(log_file, "a") as handle:
        handle.write("{this is not a log line\n" * 1200)
    bad = ctl(*sock(robotad), "log", "-s", session_id)
    assert bad.returncode == ExitCode.ERROR, bad.stderr
    lines = bad.stdout.splitlines()
    assert lines[0].endswith(", INCOMPLETE, 1200 problems, the first 1000 listed"), lines[0]
    assert lines[-1] == "  200 more problems not listed"
    assert len(lines) == 1 + 1000 + 1


# -- context, compact, mode, rule, abort ---------------------------------------------------------


def test_context_and_compact(ctl: Ctl, robotad: RunningDaemon, work: Path) -> None:
    session_id = new_session(ctl, robotad, work, [{"text": "a reply"}, {"summary": "S."}])
    nothing = ctl(*sock(robotad), "compact", "-s", session_id)
    assert nothing.returncode == 0, nothing.stderr
    assert nothing.stdout.startswith("nothing to compact")
    ran(ctl, robotad, session_id, "some history to summarise")
    state = decoded(ctl(*sock(robotad), "--json", "context", "-s", session_id), ContextState)
    assert state.used_tokens > 0
    human = ctl(*sock(robotad), "context", "-s", session_id)
    assert "tokens (" in human.stdout
    assert "% used" in human.stdout
    result = decoded(
        ctl(*sock(robotad), "--json", "compact", "-s", session_id, "--instructions", "short"),
        CompactResult,
    )
    assert result.compacted


def test_mode_shows_sets_and_explains_a_refusal(
    ctl: Ctl, robotad: RunningDaemon, work: Path
) -> None:
    session_id = new_session(ctl, robotad, work)
    assert ctl(*sock(robotad), "mode", "-s", session_id).stdout == "default\n"
    assert ctl(*sock(robotad), "mode", "-s", session_id, "acceptEdits").stdout == "acceptEdits\n"
    shown = decoded(
        ctl(*sock(robotad), "--json", "mode", "-s", session_id), SetPermissionModeResult
    )
    assert shown.mode == "acceptEdits"
    refused = ctl(*sock(robotad), "mode", "-s", session_id, "auto")
    assert refused.returncode == ExitCode.ERROR
    assert "error -32013" in refused.stderr
    assert "classifier" in refused.stderr


def test_rule_adds_and_lists_rules(ctl: Ctl, robotad: RunningDaemon, work: Path) -> None:
    session_id = new_session(ctl, robotad, work)
    added = ctl(*sock(robotad), "rule", "-s", session_id, "allow", "Write(src/**)", NO_COLOR="1")
    assert added.returncode == 0, added.stderr
    rows = dict(line.split(None, 1) for line in added.stdout.splitlines())
    assert "Write(src/**)" in rows["allow"]
    rules = decoded(
        ctl(*sock(robotad), "--json", "rule", "-s", session_id, "deny", "Bash(rm:*)", "--project"),
        PermissionRules,
    )
    assert "Bash(rm:*)" in rules.deny
    assert "Write(src/**)" in rules.allow
    bad = ctl(*sock(robotad), "rule", "-s", session_id, "ask", "Read(")
    assert bad.returncode == ExitCode.USAGE  # a malformed pattern typed is a usage error
    assert "PATTERN ($.rule)" in bad.stderr


def test_abort_with_nothing_running(ctl: Ctl, robotad: RunningDaemon, work: Path) -> None:
    session_id = new_session(ctl, robotad, work)
    result = ctl(*sock(robotad), "abort", "-s", session_id)
    assert (result.returncode, result.stdout) == (0, f"nothing is running in {session_id}\n")
    assert not decoded(
        ctl(*sock(robotad), "--json", "abort", "-s", session_id), AbortResult
    ).aborted


# -- -s defaulting -------------------------------------------------------------------------------


def test_session_defaults_to_the_newest_one_of_the_current_directory(
    ctl: Ctl, robotad: RunningDaemon, tmp_path: Path
) -> None:
    here, elsewhere = tmp_path / "here", tmp_path / "elsewhere"
    here.mkdir()
    elsewhere.mkdir()
    older = new_session(ctl, robotad, here.resolve(), [{"text": "older"}])
    newer = new_session(ctl, robotad, here.resolve(), [{"text": "newer"}])
    other = new_session(ctl, robotad, elsewhere.resolve())
    shown = ctl(*sock(robotad), "--json", "mode", cwd=here)
    assert shown.returncode == 0, shown.stderr
    run = ctl(*sock(robotad), "run", "hello", cwd=here)
    assert (run.returncode, run.stdout) == (0, "newer\n"), run.stderr
    listing = decoded(ctl(*sock(robotad), "--json", "ls"), SessionList)
    counts = {entry.session_id: entry.message_count for entry in listing.sessions}
    assert counts == {older: 0, newer: 2, other: 0}
    # A session named in ROBOTA_SESSION wins over the directory's.
    env_run = ctl(*sock(robotad), "run", "hi", cwd=here, ROBOTA_SESSION=older)
    assert env_run.stdout == "older\n", env_run.stderr


def test_a_session_robota_session_names_that_does_not_exist_says_where_it_came_from(
    ctl: Ctl, robotad: RunningDaemon, work: Path
) -> None:
    stale = "0" * 32  # a full id: used as given, so robotad's own -32002 answers
    from_env = ctl(*sock(robotad), "show", ROBOTA_SESSION=stale, NO_COLOR="1")
    assert from_env.returncode == ExitCode.ERROR
    assert "error -32002" in from_env.stderr
    assert "hint: the id came from ROBOTA_SESSION: unset it" in from_env.stderr
    # Named with -s, the same id is the person's own: the usual hint, whatever the variable.
    typed = ctl(*sock(robotad), "show", "-s", stale, ROBOTA_SESSION=stale, NO_COLOR="1")
    assert typed.returncode == ExitCode.ERROR
    assert "ROBOTA_SESSION" not in typed.stderr
    assert "hint: `robotactl ls` lists the sessions" in typed.stderr
    as_json = ctl(*sock(robotad), "--json", "show", ROBOTA_SESSION=stale)
    assert "ROBOTA_SESSION" in json.loads(as_json.stderr)["hint"]


def test_no_session_in_this_directory_is_a_clear_error(
    ctl: Ctl, robotad: RunningDaemon, tmp_path: Path
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    result = ctl(*sock(robotad), "show", cwd=empty)
    assert result.returncode == ExitCode.ERROR
    assert f"no session works in {os.path.realpath(empty)}" in result.stderr
    assert "robotactl new" in result.stderr


def test_export_to_dash_prints_and_to_a_missing_folder_fails_naming_it(
    ctl: Ctl, robotad: RunningDaemon, work: Path, tmp_path: Path
) -> None:
    """``-o -`` wrote a file named ``-``; a folder that does not exist gave a traceback."""
    source = new_session(ctl, robotad, work, [{"text": "kept"}])
    printed = ctl(*sock(robotad), "export", "-s", source, "-o", "-", cwd=tmp_path)
    assert printed.returncode == 0, printed.stderr
    assert json.loads(printed.stdout)["record"]["id"] == source
    assert not (tmp_path / "-").exists()
    target = tmp_path / "missing" / "x.json"
    failed = ctl(*sock(robotad), "export", "-s", source, "-o", str(target))
    assert failed.returncode == 1
    assert f"robotactl: cannot write {target}: No such file or directory" in failed.stderr
    assert "Traceback" not in failed.stderr


def test_text_that_is_not_utf8_and_an_output_that_fails_are_said_in_a_line(
    robotad: RunningDaemon, work: Path
) -> None:
    env = child_environment()
    bad = subprocess.run(
        [sys.executable, "-m", "robotactl", *sock(robotad), "run", "-s", "x", b"caf\xe9"],
        capture_output=True,
        env=env,
        timeout=PROCESS_TIMEOUT,
        check=False,
    )
    assert bad.returncode == 2
    assert b"argument 6" in bad.stderr  # --socket PATH run -s x ARG
    assert b"is not valid UTF-8 text" in bad.stderr
    assert b"Traceback" not in bad.stderr
    with open("/dev/full", "w") as full:
        for args in (["--json", "ls"], ["--json", "status"], ["status"]):
            refused = subprocess.run(
                [sys.executable, "-m", "robotactl", *sock(robotad), *args],
                stdout=full,
                stderr=subprocess.PIPE,
                env=env,
                timeout=PROCESS_TIMEOUT,
                check=False,
            )
            assert refused.returncode == 1, args
            assert b"cannot write the output: No space left on device" in refused.stderr, args
            assert b"Traceback" not in refused.stderr


def test_a_script_step_of_the_wrong_type_is_a_usage_error_naming_the_option(
    ctl: Ctl, robotad: RunningDaemon, work: Path, tmp_path: Path
) -> None:
    """robotad refuses the step (-32602 at $.script[0].text); for the person it is their
    --script, like a malformed JSON file is: exit 2, not 1."""
    script = tmp_path / "bad-script.json"
    script.write_text(json.dumps([{"text": 5}]))
    result = ctl(*sock(robotad), "new", "--cwd", str(work), "--script", str(script))
    assert result.returncode == ExitCode.USAGE, result.stderr
    assert "--script ($.script[0].text)" in result.stderr


def test_show_reads_a_long_history_a_page_at_a_time(
    ctl: Ctl, robotad: RunningDaemon, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long session's history may be more than one wire message carries: ``show`` asks
    for it a page at a time and shows it whole (``--limit`` and ``--json`` alike)."""
    from click.testing import CliRunner

    from protocol.blocking_client import BlockingClient
    from robotactl.cli import cli
    from robotactl.commands import show as show_module

    work = tmp_path / "w"
    work.mkdir()
    session_id = new_session(ctl, robotad, work, [{"text": f"answer {n}"} for n in range(5)])
    for n in range(5):
        assert ctl(*sock(robotad), "run", "-s", session_id, f"question {n}").returncode == 0
    pages: list[object] = []
    real_request = BlockingClient.request

    def request(self: BlockingClient, method: str, params: object = None, **kw: object) -> object:
        if method == "session/history":
            pages.append(params)
        return real_request(self, method, params, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(BlockingClient, "request", request)
    monkeypatch.setattr(show_module, "HISTORY_PAGE", 3)
    runner = CliRunner()
    full = runner.invoke(cli, [*sock(robotad), "--json", "show", "-s", session_id])
    assert full.exit_code == 0, full.output
    history = msgspec.json.decode(full.stdout.encode(), type=HistoryResult)
    assert history.total == len(history.messages) == 10
    assert [m.content for m in history.messages if m.role == "user"] == [
        f"question {n}" for n in range(5)
    ]
    assert len(pages) == 4  # 3 + 3 + 3 + 1
    pages.clear()
    shown = runner.invoke(cli, [*sock(robotad), "show", "-s", session_id, "--limit", "7"])
    assert shown.exit_code == 0, shown.output
    assert "(the last 7 of 10 messages)" in shown.stdout
    assert "answer 1" in shown.stdout  # the last 7: answer 1 … answer 4
    assert "question 1" not in shown.stdout
    assert len(pages) == 3  # 3 + 3 + 1


def test_a_history_page_too_big_for_one_reply_says_how_to_read_it() -> None:
    """A page whose reply is over the wire's 16 MiB: a message a person can act on (fewer
    with --limit, or one message at a time), never the framing error alone."""
    import click

    from protocol.blocking_client import MalformedResponse
    from robotactl.commands import show as show_module

    class TooBig:
        def request(self, method: str, params: object = None, **kw: object) -> object:
            raise MalformedResponse(
                "the reply breaks the framing: frame larger than 16777216 bytes"
            )

    with pytest.raises(click.ClickException) as refused:
        show_module._history_from(TooBig(), "s1", 0, None)  # type: ignore[arg-type]
    message = refused.value.format_message()
    assert message.startswith("messages 0–499 of session s1 are more than one reply")
    assert "--limit N" in message
    assert '"offset": 0, "limit": 1' in message
