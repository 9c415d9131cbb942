"""Command hooks run for real: /bin/sh children in temp dirs, their input, env and verdicts."""

from __future__ import annotations

import json
import logging
import os
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from robotad.session.errors import InvalidSetting
from robotad.session.hooks.config import parse_hooks_config
from robotad.session.hooks.runner import HookFailure, HookRunner, HookVerdict, model_call_input

LIMIT = 20  # seconds: an absolute bound on every test doing real process I/O


def python_hook(directory: Path, name: str, body: str) -> str:
    """A hook command running `body` as a Python script."""
    script = directory / f"{name}.py"
    script.write_text("import json, os, sys\n" + body)
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}"


def runner(cwd: Path, config: dict[str, Any], **kwargs: Any) -> HookRunner:
    return HookRunner(parse_hooks_config(config), cwd=cwd, session_id="sess-1", **kwargs)


def pre_tool_use(*hooks: dict[str, Any], matcher: str | None = None) -> dict[str, Any]:
    group: dict[str, Any] = {"hooks": list(hooks)}
    if matcher is not None:
        group["matcher"] = matcher
    return {"PreToolUse": [group]}


def command(cmd: str, timeout: float | None = None) -> dict[str, Any]:
    hook: dict[str, Any] = {"type": "command", "command": cmd}
    if timeout is not None:
        hook["timeout"] = timeout
    return hook


RECORDER = """
record = {
    "stdin": json.load(sys.stdin),
    "cwd": os.getcwd(),
    "env": {k: os.environ.get(k) for k in
            ("CLAUDE_PROJECT_DIR", "ROBOTA_PROJECT_DIR", "TRACEPARENT", "TRACESTATE")},
}
with open(sys.argv[0] + ".out", "a") as out:
    out.write(json.dumps(record) + "\\n")
"""


def records(directory: Path, name: str) -> list[dict[str, Any]]:
    lines = (directory / f"{name}.py.out").read_text().splitlines()
    return [json.loads(line) for line in lines]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """The session's cwd, deliberately not the test process's cwd."""
    cwd = tmp_path / "project"
    cwd.mkdir()
    assert Path.cwd() != cwd
    return cwd


async def test_hook_input_env_and_cwd(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """G-103, G-135, G-137: a hook runs in the session's cwd with Claude-Code input fields on
    stdin, the project dir in its env, and TRACEPARENT exactly when one is passed — an
    inherited one is removed."""
    monkeypatch.setenv("TRACEPARENT", "00-" + "a" * 32 + "-" + "b" * 16 + "-01")
    cmd = python_hook(tmp_path, "rec", RECORDER)
    hooks = runner(
        workspace,
        {"PreToolUse": [{"hooks": [command(cmd)]}], "SessionStart": [{"hooks": [command(cmd)]}]},
    )
    traceparent = "00-" + "1" * 32 + "-" + "2" * 16 + "-01"
    with trio.fail_after(LIMIT):
        verdict = await hooks.run_pre_tool_use(
            "Read", {"file_path": f"{workspace}/a"}, tool_use_id="call-1", traceparent=traceparent
        )
        failures = await hooks.run_advisory("SessionStart", {"source": "startup"})
    assert verdict.outcome == "none"
    assert failures == []
    pre, start = records(tmp_path, "rec")
    assert pre["stdin"] == {
        "session_id": "sess-1",
        "cwd": str(workspace),
        "hook_event_name": "PreToolUse",
        "tool_name": "Read",
        "tool_input": {"file_path": f"{workspace}/a"},
        "tool_use_id": "call-1",
    }
    assert pre["cwd"] == str(workspace)
    assert pre["env"]["CLAUDE_PROJECT_DIR"] == pre["env"]["ROBOTA_PROJECT_DIR"] == str(workspace)
    assert pre["env"]["TRACEPARENT"] == traceparent
    assert start["stdin"]["hook_event_name"] == "SessionStart"
    assert start["stdin"]["source"] == "startup"
    assert start["env"]["TRACEPARENT"] is None


async def test_payload_cannot_override_common_fields(workspace: Path, tmp_path: Path) -> None:
    """G-103: the input's session_id, cwd and event name are the runner's, whatever the payload."""
    cmd = python_hook(tmp_path, "rec", RECORDER)
    hooks = runner(workspace, {"Stop": [{"hooks": [command(cmd)]}]})
    with trio.fail_after(LIMIT):
        await hooks.run_advisory("Stop", {"cwd": "/", "session_id": "x", "hook_event_name": "Y"})
    (stop,) = records(tmp_path, "rec")
    assert stop["stdin"] == {
        "session_id": "sess-1",
        "cwd": str(workspace),
        "hook_event_name": "Stop",
    }


@pytest.mark.parametrize(
    ("body", "outcome", "reason"),
    [
        ("sys.stderr.write('not on my watch'); sys.exit(2)", "deny", "not on my watch"),
        (
            "print(json.dumps({'hookSpecificOutput': {'hookEventName': 'PreToolUse',"
            " 'permissionDecision': 'deny', 'permissionDecisionReason': 'no writes'}}))",
            "deny",
            "no writes",
        ),
        (
            "print(json.dumps({'hookSpecificOutput': {'hookEventName': 'PreToolUse',"
            " 'permissionDecision': 'allow', 'permissionDecisionReason': 'fine'}}))",
            "allow",
            "fine",
        ),
        (
            "print(json.dumps({'hookSpecificOutput': {'permissionDecision': 'ask'}}))",
            "ask",
            "decided by hook PreToolUse[0].hooks[0]",
        ),
        ("print(json.dumps({'decision': 'block', 'reason': 'legacy'}))", "deny", "legacy"),
        ("print(json.dumps({'decision': 'approve'}))", "allow", ""),
        ("pass", "none", ""),
        ("print('{}')", "none", ""),
        ("print(json.dumps({'suppressOutput': True}))", "none", ""),
    ],
)
async def test_pre_tool_use_decisions(
    workspace: Path, tmp_path: Path, body: str, outcome: str, reason: str
) -> None:
    """G-140: exit 2 or permissionDecision deny blocks the call; exit 0 with no decision is no
    objection; allow/ask and the legacy decision field are honoured."""
    hooks = runner(workspace, pre_tool_use(command(python_hook(tmp_path, "h", body))))
    with trio.fail_after(LIMIT):
        verdict = await hooks.run_pre_tool_use("Write", {"file_path": "x"})
    assert verdict.outcome == outcome
    if reason:
        assert reason in verdict.reason


@pytest.mark.parametrize(
    ("cmd", "timeout", "reason"),
    [
        ("sleep 30", 0.3, "timed out after 0.3s"),
        ("/nonexistent/interpreter /nonexistent/script.py", None, "exited 127"),
        ("echo oops >&2; exit 1", None, "exited 1: oops"),
        ("echo dying >&2; kill -KILL $$", None, "was killed by signal 9 (SIGKILL): dying"),
        ("echo this is not json", None, "not JSON"),
        ("echo '{\"hookSpecificOutput\": 3}'", None, "malformed output"),
        ("echo '[1, 2]'", None, "not a JSON object"),
        ('echo \'{"hookSpecificOutput": {"permissionDecision": "maybe"}}\'', None, "maybe"),
        ('echo \'{"decision": "perhaps"}\'', None, "perhaps"),
    ],
)
async def test_pre_tool_use_fails_closed(
    workspace: Path, cmd: str, timeout: float | None, reason: str
) -> None:
    """G-139: a PreToolUse hook that times out, cannot run its interpreter, exits non-zero
    (or is killed: that is said, not "exited -9") or prints malformed output denies the call,
    naming the hook by its place in the config."""
    hooks = runner(workspace, pre_tool_use(command(cmd, timeout)))
    with trio.fail_after(LIMIT):
        verdict = await hooks.run_pre_tool_use("Bash", {"command": "ls"})
    assert verdict.outcome == "deny"
    assert reason in verdict.reason
    assert "PreToolUse[0].hooks[0]" in verdict.reason


@pytest.mark.parametrize(
    "printed",
    [
        {"hookSpecificOutput": {"permissionDecision": "x" * 900_000}},
        {"decision": ["y"] * 100_000},
    ],
)
async def test_a_malformed_decision_is_quoted_in_a_few_words(
    workspace: Path, tmp_path: Path, printed: dict[str, Any]
) -> None:
    """G-139: a decision of the wrong value denies, quoting what the hook printed, cut short.
    It was quoted whole: a hook printing a 900 kB "decision" put 900 kB into the denied
    call's result, which the model, the history and the log all carry."""
    out = tmp_path / "decision.json"
    out.write_text(json.dumps(printed))
    hooks = runner(workspace, pre_tool_use(command(f"cat {shlex.quote(str(out))}")))
    with trio.fail_after(LIMIT):
        verdict = await hooks.run_pre_tool_use("Bash", {"command": "ls"})
    assert verdict.outcome == "deny"
    assert verdict.reason.startswith("hook PreToolUse[0].hooks[0] printed malformed output: ")
    assert verdict.reason.endswith("…")
    assert len(verdict.reason) < 200


async def test_a_block_by_exit_2_names_its_hook_after_its_words(workspace: Path) -> None:
    """An exit 2 blocks with the hook's stderr for the model, followed by the hook's place:
    /bin/sh also exits 2 on a syntax error, so a person must be able to find the hook."""
    for cmd, said in (("echo 'no globbing' >&2; exit 2", "no globbing"), ("if then", "Syntax")):
        hooks = runner(workspace, pre_tool_use(command(cmd)))
        with trio.fail_after(LIMIT):
            verdict = await hooks.run_pre_tool_use("Glob", {"pattern": "*"})
        assert verdict.outcome == "deny"
        assert said in verdict.reason
        assert verdict.reason.endswith("(hook PreToolUse[0].hooks[0])")


async def test_spawn_failure_denies(tmp_path: Path) -> None:
    """G-139: a hook that cannot be spawned at all (its cwd is gone) denies the call."""
    missing = tmp_path / "gone"
    hooks = runner(missing, pre_tool_use(command("true")))
    with trio.fail_after(LIMIT):
        verdict = await hooks.run_pre_tool_use("Read", {})
    assert verdict.outcome == "deny"
    assert "could not be started" in verdict.reason


async def test_all_deny_causes_are_combined(workspace: Path) -> None:
    """G-141, G-142: a hook type with no executor denies naming the type, and together with a
    timed-out hook and the others every cause comes back in one reason. A hook printing JSON
    nested 200,000 deep used to raise RecursionError out of its verdict, which cancelled the
    other hooks and lost their reasons ("PreToolUse hooks could not run: ExceptionGroup")."""
    config = pre_tool_use(
        command("sleep 30", 0.3),
        {"type": "prompt", "prompt": "is this ok?"},
        command("echo fine"),
        command("echo nope >&2; exit 2"),
        command("python3 -c \"print('[' * 200000 + ']' * 200000)\""),
    )
    hooks = runner(workspace, config)
    with trio.fail_after(LIMIT):
        verdict = await hooks.run_pre_tool_use("Bash", {"command": "ls"})
    assert verdict.outcome == "deny"
    parts = verdict.reason.split("; ")
    assert len(parts) == 5, verdict.reason
    assert "timed out" in parts[0]
    assert "'prompt'" in parts[1]
    assert "no executor" in parts[1]
    assert "not JSON" in parts[2]
    assert parts[3] == "nope (hook PreToolUse[0].hooks[3])"
    assert parts[4] == "hook PreToolUse[0].hooks[4] printed JSON nested too deeply to read"


async def test_deny_beats_ask_beats_allow(workspace: Path) -> None:
    """G-140: when hooks disagree, deny wins over ask, and ask over allow."""

    def decide(value: str) -> dict[str, Any]:
        out = json.dumps({"hookSpecificOutput": {"permissionDecision": value}})
        return command(f"echo {shlex.quote(out)}")

    hooks = runner(workspace, pre_tool_use(decide("allow"), decide("ask")))
    with trio.fail_after(LIMIT):
        assert (await hooks.run_pre_tool_use("Read", {})).outcome == "ask"
    hooks = runner(workspace, pre_tool_use(decide("allow"), decide("deny"), decide("ask")))
    with trio.fail_after(LIMIT):
        assert (await hooks.run_pre_tool_use("Read", {})).outcome == "deny"


async def test_timeout_stops_the_whole_process_tree(workspace: Path, tmp_path: Path) -> None:
    """G-139: a timed-out hook's children are stopped too, not left running."""
    pid_file = tmp_path / "child.pid"
    cmd = f"sleep 60 & echo $! > {shlex.quote(str(pid_file))}; wait"
    hooks = runner(workspace, pre_tool_use(command(cmd, 1.0)))
    with trio.fail_after(LIMIT):
        verdict = await hooks.run_pre_tool_use("Bash", {"command": "ls"})
    assert "timed out" in verdict.reason
    pid = int(pid_file.read_text())
    assert not _running(pid)


def _running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] not in "ZX"


async def test_matchers_select_by_tool_name_and_source(workspace: Path, tmp_path: Path) -> None:
    """PROTOCOL §8: a matcher is a regex searched in the tool name; absent, empty or "*" match
    all; SessionStart matches its source."""
    cmd = python_hook(tmp_path, "rec", RECORDER)
    config = {
        "PreToolUse": [
            {"matcher": "Write|Edit", "hooks": [command(cmd)]},
            {"matcher": "*", "hooks": [command(cmd)]},
            {"matcher": "", "hooks": [command(cmd)]},
            {"hooks": [command(cmd)]},
        ],
        "SessionStart": [{"matcher": "resume", "hooks": [command(cmd)]}],
    }
    hooks = runner(workspace, config)
    assert len(hooks.select("PreToolUse", {"tool_name": "Edit"}).hooks) == 4
    assert len(hooks.select("PreToolUse", {"tool_name": "Read"}).hooks) == 3
    assert len(hooks.select("PreToolUse", {"tool_name": "MultiEdit"}).hooks) == 4
    assert not hooks.select("SessionStart", {"source": "startup"}).fires
    with trio.fail_after(LIMIT):
        await hooks.run_advisory("SessionStart", {"source": "resume"})
    assert len(records(tmp_path, "rec")) == 1


#: A matcher that backtracks without end on a long run of a's it cannot match to the end: with
#: Python's re it held the event loop (every session) for minutes at 40 characters and past any
#: bound at 5,000.
SLOW_MATCHER = "(a|aa)+$"
LONG_NAME = "a" * 5000 + "!"


def matcher_timed_out(where: str) -> str:
    return (
        f"the matcher '(a|aa)+$' of hooks {where} could not be matched against the tool_name "
        "(5001 characters) within 0.02 s, so its hooks did not run; simplify the pattern"
    )


async def test_a_pre_tool_use_matcher_that_cannot_tell_in_time_denies(
    workspace: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """G-139, decision 52: a matcher is matched with the permission patterns' time limit. One
    that cannot tell in time whether it selects the call fails closed: the call is denied
    (even though another hook allows it) with a reason naming the pattern, its hooks do not
    run, and a warning says the same. Without the limit the match never ends."""
    rec = python_hook(tmp_path, "rec", RECORDER)
    allow = json.dumps({"hookSpecificOutput": {"permissionDecision": "allow"}})
    config = {
        "PreToolUse": [
            {"matcher": SLOW_MATCHER, "hooks": [command(rec)]},
            {"hooks": [command(f"echo {shlex.quote(allow)}")]},
        ]
    }
    hooks = runner(workspace, config)
    with caplog.at_level(logging.WARNING, "robotad.session.hooks"), trio.fail_after(LIMIT):
        verdict = await hooks.run_pre_tool_use(LONG_NAME, {})
    assert verdict == HookVerdict("deny", matcher_timed_out("PreToolUse[0]"))
    assert not (tmp_path / "rec.py.out").exists()
    assert f"PreToolUse hooks: {matcher_timed_out('PreToolUse[0]')}" in caplog.text
    with trio.fail_after(LIMIT):  # what it can tell in time, it selects as ever
        assert (await hooks.run_pre_tool_use("aaa", {})).outcome == "allow"
    assert len(records(tmp_path, "rec")) == 1


async def test_an_advisory_matcher_that_cannot_tell_in_time_is_reported(
    workspace: Path, tmp_path: Path
) -> None:
    """G-143, decision 52: on an advisory event a matcher that cannot tell in time runs none
    of its hooks, and the firing reports a failure naming the pattern; the other groups run."""
    rec = python_hook(tmp_path, "rec", RECORDER)
    config = {
        "PostToolUse": [
            {"matcher": SLOW_MATCHER, "hooks": [command(rec)]},
            {"matcher": "a", "hooks": [command(rec)]},
        ]
    }
    with trio.fail_after(LIMIT):
        failures = await runner(workspace, config).run_advisory(
            "PostToolUse", {"tool_name": LONG_NAME}
        )
    assert failures == [HookFailure("PostToolUse", matcher_timed_out("PostToolUse[0]"))]
    assert len(records(tmp_path, "rec")) == 1  # the second group's hook, alone


def test_matchers_keep_their_meaning_and_are_not_judged_at_load() -> None:
    """Decision 52: a matcher is compiled by the `regex` package in its ``re``-compatible
    mode, ``.`` not crossing a newline as with ``re``; no check at load could tell a pattern
    that backtracks from a valid one, so none is refused for it (the time limit answers)."""
    config = parse_hooks_config(
        {"PreToolUse": [{"matcher": "Ed.t$", "hooks": []}, {"matcher": SLOW_MATCHER, "hooks": []}]}
    )
    edit, slow = config["PreToolUse"]
    assert edit.where == "PreToolUse[0]"
    assert edit.selects("Edit")
    assert not edit.selects("Ed\nt")
    assert slow.selects("aaa")


async def test_advisory_failures_are_reported_never_raised(workspace: Path) -> None:
    """G-141, G-143: on advisory events a failing, timing-out, blocking or unknown-type hook is
    reported as a failure and nothing is raised."""
    config = {
        "PostToolUse": [
            {
                "hooks": [
                    command("exit 1"),
                    command("sleep 30", 0.3),
                    command("exit 2"),
                    {"type": "http", "url": "http://localhost"},
                    command("echo whatever output"),
                ]
            }
        ]
    }
    hooks = runner(workspace, config)
    with trio.fail_after(LIMIT):
        failures = await hooks.run_advisory("PostToolUse", {"tool_name": "Read"})
    assert [f.event for f in failures] == ["PostToolUse"] * 4
    reasons = [f.reason for f in failures]
    assert "exited 1" in reasons[0]
    assert "timed out" in reasons[1]
    assert "exited 2" in reasons[2]
    assert "'http'" in reasons[3]


async def test_an_advisory_hook_that_prints_a_lot_and_exits_0_did_not_fail(
    workspace: Path,
) -> None:
    """G-143: an advisory hook's stdout is not read, so 2 MB of it (a formatter's report, a
    diff) with exit 0 is no failure. It used to be reported as one ("printed more than …
    bytes") in turn_finished.hookFailures and the log, while the hook had done its work. On
    PreToolUse, whose output decides, the same flood still denies (G-139)."""
    flood = "head -c 2000000 /dev/zero"
    config = {"PostToolUse": [{"hooks": [command(flood)]}]}
    with trio.fail_after(LIMIT):
        failures = await runner(workspace, config).run_advisory("PostToolUse", {"tool_name": "X"})
        verdict = await runner(workspace, pre_tool_use(command(flood))).run_pre_tool_use("X", {})
    assert failures == []
    assert verdict.outcome == "deny"
    assert verdict.reason == (
        "hook PreToolUse[0].hooks[0] printed more than 1048576 bytes on stdout, more than "
        "robotad reads; robotad stopped it (write long output to a file instead)"
    )


async def test_a_pre_tool_use_hook_printing_without_end_denies_at_once(
    workspace: Path, tmp_path: Path
) -> None:
    """G-139: a PreToolUse hook printing without end (``yes``) kept robotad reading and
    discarding its output at full speed, half a core, until its timeout; only then did the
    call get its deny. Past the cap the hook is now stopped at once and the call denied with a
    reason naming the cap: its timeout is 60 s, far past the test's bound. On either stream,
    since both can decide (stdout a decision, stderr an exit 2's reason)."""
    for to in ("", " >&2"):
        pid_file = tmp_path / "hook.pid"
        cmd = f"echo $$ > {shlex.quote(str(pid_file))}; exec yes{to}"
        hooks = runner(workspace, pre_tool_use(command(cmd, 60), command("exit 0")))
        with trio.fail_after(LIMIT):
            verdict = await hooks.run_pre_tool_use("Bash", {"command": "ls"})
        stream = "stderr" if to else "stdout"
        assert (verdict.outcome, verdict.reason) == (
            "deny",
            f"hook PreToolUse[0].hooks[0] printed more than 1048576 bytes on {stream}, more "
            "than robotad reads; robotad stopped it (write long output to a file instead)",
        )
        pid = int(pid_file.read_text())
        assert not Path(f"/proc/{pid}").exists()  # stopped and reaped: no zombie either


async def test_an_advisory_hook_printing_without_end_fails_at_once(
    workspace: Path, tmp_path: Path
) -> None:
    """G-143: an advisory hook's stderr is read (its first line names a failure), so one
    flooding it is stopped at the cap and reported, instead of being read at full speed until
    its timeout (60 s, far past the test's bound). Its stdout is not read at all: it goes to
    /dev/null, so ``yes`` there costs robotad nothing and, exiting 0, is no failure."""
    pid_file = tmp_path / "hook.pid"
    flood = f"echo $$ > {shlex.quote(str(pid_file))}; exec yes >&2"
    on_stdout = 'test "$(readlink /proc/$$/fd/1)" = /dev/null && yes | head -c 5000000'
    config = {"Stop": [{"hooks": [command(flood, 60), command(on_stdout, 60)]}]}
    with trio.fail_after(LIMIT):
        failures = await runner(workspace, config).run_advisory("Stop", {"turn_id": "t"})
    assert failures == [
        HookFailure(
            "Stop",
            "hook Stop[0].hooks[0] printed more than 1048576 bytes on stderr, more than "
            "robotad reads; robotad stopped it (write long output to a file instead)",
        )
    ]
    assert not Path(f"/proc/{int(pid_file.read_text())}").exists()


async def test_model_call_hooks_are_fire_and_forget(workspace: Path, tmp_path: Path) -> None:
    """G-050, G-051: model-call hook input reports effort "auto" when unset, and the caller
    does not wait for the hook; its failure (even an exit 2) is only reported."""
    cmd = python_hook(tmp_path, "rec", RECORDER + "sys.exit(2)\n")
    hooks = runner(workspace, {"PreModelCall": [{"hooks": [command(cmd)]}]})
    reported: list[list[HookFailure]] = []
    done = trio.Event()

    def report(failures: list[HookFailure]) -> None:
        reported.append(failures)
        done.set()

    payload = model_call_input("m-1", None)
    assert payload == {"model": "m-1", "effort": "auto"}
    assert model_call_input("m-1", "high")["effort"] == "high"
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            hooks.fire_and_forget(nursery, "PreModelCall", payload, report=report)
            # The call goes on at once: the hook has not even started yet.
            assert not (tmp_path / "rec.py.out").exists()
            assert not done.is_set()
            await done.wait()
    (record,) = records(tmp_path, "rec")
    assert record["stdin"]["effort"] == "auto"
    assert reported == [[HookFailure("PreModelCall", "hook PreModelCall[0].hooks[0] exited 2")]]


async def test_cancellation_stops_a_running_hook(workspace: Path, tmp_path: Path) -> None:
    """G-139: cancelling the caller (an abort) stops the hook process and propagates."""
    fifo = tmp_path / "hook.pid"
    os.mkfifo(fifo)
    cmd = f"echo $$ > {shlex.quote(str(fifo))}; exec sleep 60"
    hooks = runner(workspace, pre_tool_use(command(cmd, 60)))
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(hooks.run_pre_tool_use, "Bash", {"command": "ls"})
            # The hook announces itself through the FIFO: it is running now.
            pid = int(await trio.to_thread.run_sync(fifo.read_text, abandon_on_cancel=True))
            nursery.cancel_scope.cancel()
    assert not _running(pid)


def test_config_errors_are_located() -> None:
    """PROTOCOL §8: unknown events, bad matchers, missing commands and bad timeouts are
    located errors; an unknown hook type is not."""
    raw = {
        "PreToolUse": [
            {"matcher": "(", "hooks": [{"type": "command"}]},
            {"hooks": [{"type": "command", "command": "x", "timeout": 0, "extra": 1}]},
            {"hooks": [{"type": "mystery", "anything": True}]},
        ],
        "Nope": [],
        "Stop": "x",
    }
    with pytest.raises(InvalidSetting) as caught:
        parse_hooks_config(raw)
    assert [issue["path"] for issue in caught.value.issues] == [
        "$.hooks.PreToolUse[0].matcher",
        "$.hooks.PreToolUse[0].hooks[0].command",
        "$.hooks.PreToolUse[1].hooks[0].timeout",
        "$.hooks.PreToolUse[1].hooks[0].extra",
        "$.hooks.Nope",
        "$.hooks.Stop",
    ]
    config = parse_hooks_config({"PreToolUse": [{"hooks": [{"type": "mystery"}]}]})
    assert config["PreToolUse"][0].hooks[0].type == "mystery"
    assert parse_hooks_config(None) == {}
