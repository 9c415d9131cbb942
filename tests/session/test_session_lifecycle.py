"""The hooks lifecycle of a Session, with real command hooks (small /bin/sh scripts)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from protocol.errors import NotAllowed, ProviderFailed, StorageFailed, TurnAborted
from protocol.shapes import Message
from robotad.tools import builtin_tools
from tests.session.session_harness import (
    LIMIT,
    Events,
    FileLog,
    MemoryStore,
    every_event,
    hook_recorder,
    hook_records,
    hooks_for,
    new_session,
    scripted,
)

TURN_EVENTS = (
    "UserPromptSubmit",
    "PreToolUse",
    "PermissionDecision",
    "PostToolUse",
    "PreModelCall",
    "PostModelCall",
    "Stop",
    "StopFailure",
    "PreCompact",
    "PostCompact",
    "SessionStart",
    "SessionEnd",
)


@pytest.fixture
def hookdir(tmp_path: Path) -> Path:
    folder = tmp_path / "hooks"
    folder.mkdir()
    return folder


def fired(hookdir: Path, name: str = "rec") -> list[tuple[str, str, dict[str, Any]]]:
    """(event, traceparent, input) of every recorded firing, in order."""
    return [
        (r["input"]["hook_event_name"], r["traceparent"], r["input"])
        for r in hook_records(hookdir, name)
    ]


async def test_session_start_once_with_source(workspace: Path, hookdir: Path) -> None:
    """G-124, G-137, G-103: SessionStart fires exactly once (start, then a run), with its
    source, the session's cwd and id, and no TRACEPARENT even in a tracing session."""
    hooks = hooks_for(workspace, every_event(hook_recorder(hookdir, "rec"), ["SessionStart"]))
    with trio.fail_after(LIMIT):
        fresh = new_session(workspace, hooks=hooks, trace=True)
        await fresh.start()
        await fresh.start()
        await fresh.run("hi")
        loaded = new_session(workspace, hooks=hooks, source="resume", session_id="s-loaded")
        await loaded.run("hi")
    starts = fired(hookdir)
    assert [(e, tp) for e, tp, _ in starts] == [("SessionStart", ""), ("SessionStart", "")]
    assert starts[0][2]["source"] == "startup"
    assert starts[1][2]["source"] == "resume"
    assert starts[0][2]["session_id"] == fresh.session_id
    assert starts[1][2]["session_id"] == "s-loaded"
    assert starts[0][2]["cwd"] == str(workspace)


async def test_turn_path_hooks_carry_the_prompt_root(workspace: Path, hookdir: Path) -> None:
    """G-125, G-126, G-128, G-135, G-138, G-117, G-050: a traced turn fires
    UserPromptSubmit before its first provider call, PreToolUse/PermissionDecision/PostToolUse
    around the permitted body with the canonical path, model-call hooks with effort "auto",
    then Stop — every one with the same TRACEPARENT, the turn root's."""
    hooks = hooks_for(workspace, every_event(hook_recorder(hookdir, "rec"), TURN_EVENTS))
    provider = scripted(
        [
            {"toolCalls": [{"name": "Read", "arguments": {"file_path": "notes.txt"}}]},
            {"text": "read it"},
        ]
    )
    seen_at_first_call: list[list[str]] = []
    provider.on_call = lambda request: seen_at_first_call.append([e for e, _, _ in fired(hookdir)])
    session = new_session(workspace, provider, tools=builtin_tools(), hooks=hooks, trace=True)
    with trio.fail_after(LIMIT):
        await session.start()
        assert await session.run("read the notes") == "read it"
    records = fired(hookdir)
    events = [e for e, _, _ in records]
    assert events[0] == "SessionStart"
    turn = records[1:]
    assert seen_at_first_call[0] == ["SessionStart", "UserPromptSubmit"]
    assert [e for e, _, _ in turn if e not in ("PreModelCall", "PostModelCall")] == [
        "UserPromptSubmit",
        "PreToolUse",
        "PermissionDecision",
        "PostToolUse",
        "Stop",
    ]
    assert events.count("PreModelCall") == 2
    assert events.count("PostModelCall") == 2
    root = turn[0][1]
    assert root.startswith("00-")
    assert len(root) == 55
    assert {tp for _, tp, _ in turn} == {root}
    by_event = {e: payload for e, _, payload in turn}
    canonical = str(workspace / "notes.txt")
    assert by_event["PreToolUse"]["tool_input"] == {"file_path": canonical}
    assert by_event["PostToolUse"]["tool_input"] == {"file_path": canonical}
    assert by_event["PostToolUse"]["tool_response"]["ok"] is True
    assert by_event["PermissionDecision"]["decision"] == "allow"
    assert by_event["PreModelCall"]["effort"] == "auto"
    assert by_event["UserPromptSubmit"]["prompt"] == "read the notes"
    await session.run("untraced? no: a new root")
    second = fired(hookdir)[len(records) :]
    assert second
    assert {tp for _, tp, _ in second} != {root}


async def test_untraced_session_sets_no_traceparent(
    workspace: Path, hookdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """G-135: without trace, no hook gets a TRACEPARENT, not even one the daemon inherited."""
    monkeypatch.setenv("TRACEPARENT", "00-" + "a" * 32 + "-" + "b" * 16 + "-01")
    hooks = hooks_for(workspace, every_event(hook_recorder(hookdir, "rec"), ["UserPromptSubmit"]))
    with trio.fail_after(LIMIT):
        await new_session(workspace, hooks=hooks).run("hi")
    assert [tp for _, tp, _ in fired(hookdir)] == [""]


async def test_model_call_hooks_are_fire_and_forget(workspace: Path, hookdir: Path) -> None:
    """G-051: the provider call does not wait for PreModelCall (the hook waits for the call
    to have begun), and a blocking verdict from a model-call hook changes nothing."""
    marker = hookdir / "called"
    waiter = hookdir / "wait.sh"
    waiter.write_text(f"#!/bin/sh\nwhile [ ! -e {marker} ]; do sleep 0.01; done\nexit 0\n")
    waiter.chmod(0o755)
    blocker = hook_recorder(hookdir, "block", exit_code=2, stdout='{"decision": "block"}')
    config = {
        "PreModelCall": [
            {"hooks": [{"type": "command", "command": str(waiter), "timeout": 5}]},
            {"hooks": [{"type": "command", "command": blocker}]},
        ],
        "PostModelCall": [{"hooks": [{"type": "command", "command": blocker}]}],
    }
    provider = scripted([{"text": "unchanged"}])
    provider.on_call = lambda request: marker.touch()
    events = Events()
    session = new_session(
        workspace, provider, hooks=hooks_for(workspace, config), event_sink=events
    )
    with trio.fail_after(LIMIT):
        assert await session.run("go") == "unchanged"
    finished = events.of("turn_finished")[0]
    failures = finished["hookFailures"]
    # Exit 2 of an advisory hook is reported; the waiting hook did not time out.
    assert {f["event"] for f in failures} == {"PreModelCall", "PostModelCall"}
    assert all("exited 2" in f["reason"] for f in failures)
    assert len(hook_records(hookdir, "block")) == 2


async def test_stop_failure_not_stop_on_model_error(workspace: Path, hookdir: Path) -> None:
    """G-127, G-133: a model-call error fires StopFailure (with the turn's root) and no Stop."""
    hooks = hooks_for(
        workspace, every_event(hook_recorder(hookdir, "rec"), ["Stop", "StopFailure"])
    )
    provider = scripted([{"error": "upstream 503"}])
    session = new_session(workspace, provider, hooks=hooks, trace=True)
    with trio.fail_after(LIMIT), pytest.raises(ProviderFailed):
        await session.run("go")
    records = fired(hookdir)
    assert [e for e, _, _ in records] == ["StopFailure"]
    assert records[0][1] != ""
    assert "upstream 503" in records[0][2]["error"]


async def test_advisory_failures_are_reported(workspace: Path, hookdir: Path) -> None:
    """G-143: a failing advisory hook fails nothing: the turn completes and the failure is in
    turn_finished.hookFailures and in the session log."""
    failing = hook_recorder(hookdir, "fail", exit_code=1)
    hooks = hooks_for(workspace, every_event(failing, ["UserPromptSubmit", "Stop"]))
    events = Events()
    log = FileLog(workspace.parent, "s-advisory")
    session = new_session(
        workspace,
        hooks=hooks,
        event_sink=events,
        logger=log.logger,
        session_id="s-advisory",
    )
    with trio.fail_after(LIMIT):
        assert await session.run("hello") == "echo: hello"
    failures = events.of("turn_finished")[0]["hookFailures"]
    assert [f["event"] for f in failures] == ["UserPromptSubmit", "Stop"]
    logged = [e.data for e in log.entries() if e.event == "hook_failure"]
    assert [d["event"] for d in logged] == ["UserPromptSubmit", "Stop"]


async def test_pre_tool_use_is_fail_closed(workspace: Path, hookdir: Path) -> None:
    """G-139, G-140, G-203: a PreToolUse hook that blocks (exit 2) or prints malformed output
    denies the call; the model gets a failed result paired with the call."""
    blocking = hook_recorder(hookdir, "block", exit_code=2)
    malformed = hook_recorder(hookdir, "bad", stdout="not json")
    config = {
        "PreToolUse": [
            {"matcher": "Read", "hooks": [{"type": "command", "command": blocking}]},
            {"matcher": "Glob", "hooks": [{"type": "command", "command": malformed}]},
        ]
    }
    provider = scripted(
        [
            {
                "toolCalls": [
                    {"name": "Read", "arguments": {"file_path": "notes.txt"}},
                    {"name": "Glob", "arguments": {"pattern": "*.txt"}},
                ]
            },
            {"text": "ok"},
        ]
    )
    session = new_session(
        workspace, provider, tools=builtin_tools(), hooks=hooks_for(workspace, config)
    )
    with trio.fail_after(LIMIT):
        assert await session.run("look") == "ok"
    results = [m for m in session.get_history() if m.role == "tool"]
    assert [m.name for m in results] == ["Read", "Glob"]
    assert not results[0].ok
    assert "PreToolUse" in (results[0].content or "")
    assert not results[1].ok
    assert "not JSON" in (results[1].content or "")


async def test_shutdown_order_and_nothing_after(workspace: Path, hookdir: Path) -> None:
    """G-129, G-130, G-131, G-137: shutdown saves, then fires SessionEnd (no TRACEPARENT),
    then closes the provider — once, however often it is called; afterwards no event or hook
    fires and runs are refused."""
    hooks = hooks_for(
        workspace,
        every_event(hook_recorder(hookdir, "rec"), ["SessionEnd", "UserPromptSubmit"]),
    )
    provider = scripted()
    store = MemoryStore()
    order: list[str] = []
    store.on_save = lambda snapshot: order.append(f"save:{len(fired(hookdir))}")
    provider.on_close = lambda: order.append(f"close:{len(fired(hookdir))}")
    events = Events()
    log = FileLog(workspace, "s-closing")
    session = new_session(
        workspace,
        provider,
        hooks=hooks,
        store=store,
        event_sink=events,
        logger=log.logger,
        session_id="s-closing",
        trace=True,
    )
    with trio.fail_after(LIMIT):
        await session.run("hi")
        count = len(events.items)
        order.clear()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.shutdown)
            nursery.start_soon(session.shutdown)
        await session.shutdown()
        logged = log.events()
        with pytest.raises(NotAllowed):
            await session.run("again")
        with pytest.raises(NotAllowed):
            await session.compact()
        session.inject_message(Message.user("late"))  # would log a history_mutation
    records = fired(hookdir)
    assert [e for e, _, _ in records] == ["UserPromptSubmit", "SessionEnd"]
    assert records[1][1] == ""
    assert order == ["save:1", "close:2"]
    assert provider.closed == 1
    assert len(events.items) == count
    assert logged[-1] == "session_end"
    assert log.events() == logged  # nothing is logged after shutdown


async def test_shutdown_steps_are_best_effort(workspace: Path, hookdir: Path) -> None:
    """G-132: a failing save and a failing SessionEnd hook do not stop shutdown: the provider
    is still closed and shutdown returns normally."""
    hooks = hooks_for(
        workspace, every_event(hook_recorder(hookdir, "end", exit_code=1), ["SessionEnd"])
    )
    provider = scripted()
    store = MemoryStore()
    store.fail = True
    session = new_session(workspace, provider, hooks=hooks, store=store)
    with trio.fail_after(LIMIT):
        with pytest.raises(StorageFailed):  # a completed turn is acknowledged once saved
            await session.run("hi")
        await session.shutdown()
    assert len(hook_records(hookdir, "end")) == 1
    assert provider.closed == 1


async def test_compaction_hooks_trace_only_for_auto(workspace: Path, hookdir: Path) -> None:
    """G-136, G-137, G-055: both hooks of an auto-compaction a traced turn triggers get that
    turn's root; a user-requested compaction's hooks get none; the trigger reaches both."""
    hooks = hooks_for(
        workspace,
        every_event(
            hook_recorder(hookdir, "rec"), ["UserPromptSubmit", "PreCompact", "PostCompact"]
        ),
    )
    provider = scripted([{"text": "x" * 400}], context_window=200)
    session = new_session(workspace, provider, hooks=hooks, trace=True)
    with trio.fail_after(LIMIT):
        await session.run("first")  # now over the threshold of a 200-token window
        await session.run("second")
        await session.compact("keep it short")
    records = fired(hookdir)
    names = [e for e, _, _ in records]
    assert names == [
        "UserPromptSubmit",
        "PreCompact",
        "PostCompact",
        "UserPromptSubmit",
        "PreCompact",
        "PostCompact",
    ]
    auto_pre, auto_post, second_submit = records[1], records[2], records[3]
    assert auto_pre[1] == auto_post[1] == second_submit[1] != ""
    assert auto_pre[2]["trigger"] == auto_post[2]["trigger"] == "auto"
    manual_pre, manual_post = records[4], records[5]
    assert manual_pre[1] == manual_post[1] == ""
    assert manual_pre[2]["trigger"] == manual_post[2]["trigger"] == "manual"
    assert manual_pre[2]["custom_instructions"] == "keep it short"


@pytest.mark.parametrize("event", ["Stop", "PostCompact"])
async def test_an_abort_stops_a_running_stop_or_post_compact_hook(
    workspace: Path, hookdir: Path, event: str
) -> None:
    """G-064, G-193: an abort while Stop or PostCompact ran was answered "aborted" but waited
    out the hook (60 s by default), the session busy all along. Now it stops the hook; the
    turn's reply, or the compaction, is done and stands — and the abort says so: it answers
    false, since it stopped nothing of the work (architecture decision 42)."""
    started = hookdir / "started"
    hooks = hooks_for(workspace, every_event(f"touch {started}; sleep 30", [event]))
    session = new_session(
        workspace, scripted([{"text": "done"}, {"text": "the summary"}]), hooks=hooks
    )
    outcome: dict[str, Any] = {}

    async def work() -> None:
        outcome["response"] = await session.run("hi")
        if event == "PostCompact":
            outcome["compacted"] = (await session.compact()).compacted

    with trio.fail_after(LIMIT):  # far below the hook's 30 s
        async with trio.open_nursery() as nursery:
            nursery.start_soon(work)
            while not started.exists():
                await trio.sleep(0.02)
            assert session.abort() is False
    assert outcome["response"] == "done"
    if event == "PostCompact":
        assert outcome["compacted"] is True
    else:
        assert [m.content for m in session.get_history() if m.role == "assistant"] == ["done"]


async def test_a_session_end_hook_cut_short_by_a_deadline_still_ends_the_log(
    workspace: Path, hookdir: Path
) -> None:
    """G-132: the daemon's shutdown deadline cancelling a slow SessionEnd hook skipped the
    log's ``session_end`` (a settled log read as one cut off mid-turn on recovery)."""
    started = hookdir / "started"
    hooks = hooks_for(workspace, every_event(f"touch {started}; sleep 30", ["SessionEnd"]))
    log = FileLog(workspace, "s-deadline")
    session = new_session(
        workspace, scripted(), hooks=hooks, logger=log.logger, session_id="s-deadline"
    )
    with trio.fail_after(LIMIT):
        await session.run("hi")
        with trio.CancelScope() as deadline:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(session.shutdown)
                while not started.exists():
                    await trio.sleep(0.02)
                deadline.cancel()
    assert log.events()[-1] == "session_end"


@pytest.mark.parametrize("direct", [False, True])
async def test_an_abort_during_post_tool_use_keeps_the_calls_result(
    workspace: Path, hookdir: Path, direct: bool
) -> None:
    """G-128, G-143: an abort while a PostToolUse hook ran (one ignoring SIGTERM) made the
    call that had run read "interrupted: the turn was aborted while Write was running" in
    history — its result lost, no tool_finished — though the file was written. The abort now
    cuts only the hook short; the call's own result stands, as clients were told."""
    started = hookdir / "started"
    hooks = hooks_for(
        workspace, every_event(f"trap '' TERM; touch {started}; sleep 30", ["PostToolUse"])
    )
    write = {"name": "Write", "arguments": {"file_path": "out.txt", "content": "x"}}
    events = Events()
    session = new_session(
        workspace,
        scripted([{"toolCalls": [write]}, {"text": "never asked"}]),
        tools=builtin_tools(),
        hooks=hooks,
        event_sink=events,
        permission_mode="bypassPermissions",
    )
    outcome: dict[str, Any] = {}

    async def work() -> None:
        if direct:
            outcome["result"] = await session.invoke_tool("Write", write["arguments"])
        else:
            with pytest.raises(TurnAborted):
                await session.run("write it")

    with trio.fail_after(LIMIT):  # far below the hook's 30 s
        async with trio.open_nursery() as nursery:
            nursery.start_soon(work)
            while not started.exists():
                await trio.sleep(0.02)
            session.abort()
    assert (workspace / "out.txt").read_text() == "x"
    if direct:
        assert outcome["result"].ok
        assert outcome["result"].content.startswith("Created ")
        return
    (result,) = [m for m in session.get_history() if m.role == "tool"]
    assert result.ok
    assert (result.content or "").startswith("Created ")
    assert [e["ok"] for e in events.of("tool_finished")] == [True]
