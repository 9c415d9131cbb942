"""The session's tool gate: permissions, live approvals, consent, auto mode, spilling."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest
import trio

from protocol.errors import NotAllowed, TransitionRefused
from protocol.shapes import ApprovalRequest
from robotad.session.permissions.classifier import CommandClassifier
from robotad.session.ports import ApprovalAnswer
from robotad.storage.spill import SpillStore
from robotad.tools import builtin_tools
from tests.session.session_harness import (
    LIMIT,
    Events,
    FileLog,
    MemoryStore,
    ShoutTool,
    new_session,
    scripted,
)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    cwd = tmp_path / "project"
    cwd.mkdir()
    (cwd / "notes.txt").write_text("remember the milk\n")
    (cwd / "secret.txt").write_text("hunter2\n")
    return cwd


def shouts(*texts: str) -> list[dict[str, Any]]:
    """One scripted step per text, each calling Shout once, then a final answer."""
    steps: list[dict[str, Any]] = [
        {"toolCalls": [{"name": "Shout", "arguments": {"text": text}}]} for text in texts
    ]
    return [*steps, {"text": "done"}]


class Approver:
    """A live permission handler answering from a list, recording what it was asked."""

    def __init__(self, *answers: ApprovalAnswer | bool) -> None:
        self.answers = list(answers)
        self.asked: list[ApprovalRequest] = []

    async def __call__(self, request: ApprovalRequest) -> ApprovalAnswer | bool:
        self.asked.append(request)
        await trio.lowlevel.checkpoint()
        return self.answers.pop(0)


def results(session: Any) -> list[tuple[bool, str]]:
    return [(m.ok, m.content or "") for m in session.get_history() if m.role == "tool"]


async def test_no_handler_denies_what_needs_approval(workspace: Path) -> None:
    """G-118, G-202: without a permission handler a call that needs approval is denied as a
    failed result, and the denial is recorded."""
    shout = ShoutTool()
    session = new_session(workspace, scripted(shouts("hi")), tools=[shout])
    assert await session.run("shout") == "done"
    assert shout.runs == []
    ((ok, content),) = results(session)
    assert not ok
    assert "needs approval" in content
    assert session.recent_denials()[0].tool == "Shout"


async def test_live_approval_and_session_consent(workspace: Path) -> None:
    """G-113, G-128: a live "allow always" for the session remembers a pattern projected
    from the argument: the same call runs without asking, a different argument asks again.
    Each decision is reported (ask, then allow)."""
    shout = ShoutTool()
    approver = Approver(ApprovalAnswer(True, remember="session"), ApprovalAnswer(False))
    events = Events()
    session = new_session(
        workspace,
        scripted(shouts("hi", "hi", "other")),
        tools=[shout],
        permission_handler=approver,
        event_sink=events,
    )
    assert await session.run("shout thrice") == "done"
    assert shout.runs == ["hi", "hi"]
    assert [r.arguments for r in approver.asked] == [{"text": "hi"}, {"text": "other"}]
    assert session.rules()["allow"] == ["Shout(hi)"]
    assert [ok for ok, _ in results(session)] == [True, True, False]
    decisions = [e["decision"] for e in events.of("permission_decided")]
    assert decisions == ["ask", "allow", "allow", "ask", "deny"]


async def test_project_consent_needs_persistence(workspace: Path) -> None:
    """G-114: a project-scoped "allow always" without a persistence callback, or with one
    that fails, rejects the approval and leaves no session grant; with one it persists."""
    shout = ShoutTool()
    approver = Approver(*[ApprovalAnswer(True, remember="project")] * 3)
    session = new_session(
        workspace, scripted(shouts("a")), tools=[shout], permission_handler=approver
    )
    await session.run("no callback")
    assert shout.runs == []
    assert "rejected" in results(session)[0][1]
    assert session.rules()["allow"] == []
    with pytest.raises(NotAllowed):
        await session.add_project_rule("Shout(x)", "allow")
    assert session.rules()["allow"] == []

    async def failing(rule: str, kind: str) -> None:
        raise OSError("read-only file system")

    persisted: list[tuple[str, str]] = []

    async def persisting(rule: str, kind: str) -> None:
        persisted.append((rule, kind))

    broken = new_session(
        workspace,
        scripted(shouts("b")),
        tools=[shout],
        permission_handler=approver,
        persist_project_rule=failing,
    )
    await broken.run("failing callback")
    assert shout.runs == []
    assert broken.rules()["allow"] == []
    working = new_session(
        workspace,
        scripted(shouts("c", "c")),
        tools=[shout],
        permission_handler=approver,
        persist_project_rule=persisting,
    )
    await working.run("working callback")
    assert shout.runs == ["c", "c"]
    assert persisted == [("Shout(c)", "allow")]
    assert len(approver.asked) == 3


async def test_relative_path_judged_in_canonical_form(workspace: Path) -> None:
    """G-116, G-117: a relative path is canonicalised against the session's cwd before the
    gate, so an absolute deny pattern catches it, and the tool gets the canonical path."""
    provider = scripted(
        [
            {
                "toolCalls": [
                    {"name": "Read", "arguments": {"file_path": "secret.txt"}},
                    {"name": "Read", "arguments": {"file_path": "./sub/../notes.txt"}},
                ]
            },
            {"text": "ok"},
        ]
    )
    session = new_session(
        workspace,
        provider,
        tools=builtin_tools(),
        permissions={"deny": [f"Read({workspace}/secret.txt)"]},
    )
    await session.run("read both")
    (secret_ok, secret), (notes_ok, notes) = results(session)
    assert not secret_ok
    assert "denied by rule" in secret
    assert "hunter2" not in secret
    assert notes_ok
    assert "remember the milk" in notes


async def test_auto_mode_classifier(workspace: Path, tmp_path: Path) -> None:
    """G-119, G-120, G-213, G-103: in auto mode the classifier is consulted only where the
    gate would ask; it runs in the session's cwd and reads exactly {session_id, cwd,
    tool_name, tool_input}; its deny is a failed result carrying its reason, its allow runs
    the call."""
    seen = tmp_path / "classifier.jsonl"
    script = tmp_path / "classify.sh"
    script.write_text(
        "#!/bin/sh\n"
        f"input=$(cat); printf '%s\\n' \"$input\" >> {shlex.quote(str(seen))}\n"
        'case "$input" in *LOUD*) echo \'{"decision":"deny","reason":"too loud"}\';;\n'
        '  *) echo \'{"decision":"allow","reason":"fine"}\';; esac\n'
    )
    script.chmod(0o755)
    shout = ShoutTool()
    provider = scripted(
        [
            {
                "toolCalls": [
                    {"name": "Read", "arguments": {"file_path": "notes.txt"}},
                    {"name": "Shout", "arguments": {"text": "LOUD"}},
                    {"name": "Shout", "arguments": {"text": "quiet"}},
                ]
            },
            {"text": "ok"},
        ]
    )
    session = new_session(
        workspace,
        provider,
        tools=[*builtin_tools(), shout],
        classifier=CommandClassifier(shlex.quote(str(script))),
        permission_mode="auto",
    )
    with trio.fail_after(LIMIT):
        await session.run("go")
    inputs = [json.loads(line) for line in seen.read_text().splitlines()]
    assert inputs == [
        {
            "session_id": session.session_id,
            "cwd": str(workspace),
            "tool_name": "Shout",
            "tool_input": {"text": text},
        }
        for text in ("LOUD", "quiet")
    ]
    (read_ok, _), (loud_ok, loud), (quiet_ok, _) = results(session)
    assert read_ok
    assert quiet_ok
    assert not loud_ok
    assert "too loud" in loud
    assert shout.runs == ["quiet"]


async def test_a_failed_classifiers_stderr_reaches_the_denial_the_event_and_the_log(
    workspace: Path, tmp_path: Path
) -> None:
    """G-120: a classifier that fails (here it exits 2) denies the call, and its reason — in
    the failed result the model gets, the ``permission_decided`` event and the session log's
    ``permission_decision`` line (written, as every line, through the log's redaction) — ends
    with what the classifier said on stderr, so a person can act on it."""
    script = tmp_path / "classify.sh"
    script.write_text("#!/bin/sh\necho 'no API key: set CLASSIFIER_KEY' >&2\nexit 2\n")
    script.chmod(0o755)
    shout, events, log = ShoutTool(), Events(), FileLog(tmp_path, "s-classifier")
    session = new_session(
        workspace,
        scripted(shouts("hi")),
        tools=[shout],
        classifier=CommandClassifier(shlex.quote(str(script))),
        permission_mode="auto",
        event_sink=events,
        logger=log.logger,
        session_id="s-classifier",
    )
    with trio.fail_after(LIMIT):
        await session.run("shout")
    reason = "classifier exited 2; its stderr ended: no API key: set CLASSIFIER_KEY"
    ((ok, content),) = results(session)
    assert not ok
    assert reason in content
    assert shout.runs == []
    assert [e["reason"] for e in events.of("permission_decided")] == [reason]
    logged = [e.data for e in log.entries() if e.event == "permission_decision"]
    assert [entry["reason"] for entry in logged] == [reason]


async def test_auto_mode_ask_rule_goes_to_a_person(workspace: Path) -> None:
    """G-121: in auto mode a call matching an ask rule goes to a person, not the classifier."""

    class NeverAsked:
        async def classify(self, **kwargs: Any) -> Any:
            raise AssertionError("the classifier must not be consulted")

    shout = ShoutTool()
    approver = Approver(True)
    session = new_session(
        workspace,
        scripted(shouts("hey")),
        tools=[shout],
        classifier=NeverAsked(),
        permission_mode="auto",
        permissions={"ask": ["Shout"]},
        permission_handler=approver,
    )
    await session.run("go")
    assert [r.tool for r in approver.asked] == ["Shout"]
    assert shout.runs == ["hey"]


async def test_mode_transitions(workspace: Path) -> None:
    """G-105, G-106, G-107: auto without a classifier is refused; a guard's refusal keeps the
    mode; removing the guard restores transitions."""
    session = new_session(workspace)
    with pytest.raises(TransitionRefused):
        session.set_permission_mode("auto")
    with pytest.raises(TransitionRefused):
        new_session(workspace, permission_mode="auto")
    session.set_mode_guard(lambda old, new: "no bypass" if new == "bypassPermissions" else None)
    with pytest.raises(TransitionRefused) as refused:
        session.set_permission_mode("bypassPermissions")
    assert refused.value.data["reason"] == "no bypass"  # type: ignore[index]
    assert session.permission_mode == "default"
    assert session.set_permission_mode("plan") == "plan"
    session.set_mode_guard(None)
    assert session.set_permission_mode("bypassPermissions") == "bypassPermissions"


async def test_added_tools_are_gated(workspace: Path) -> None:
    """G-211: a tool added to a live session passes the gate like any other: plan mode
    denies it (an execute tool) and its body never runs."""
    shout = ShoutTool()
    session = new_session(workspace, scripted(shouts("late")), permission_mode="plan")
    session.add_tools([shout])
    await session.run("go")
    assert shout.runs == []
    ((ok, content),) = results(session)
    assert not ok
    assert "plan mode denies" in content


async def test_oversized_result_is_spilled(workspace: Path, tmp_path: Path) -> None:
    """G-195, G-200: a result over the spill threshold reaches the model as an opaque
    tool-result: reference that reads back in full."""
    shout = ShoutTool(size=200_000)
    runtime = tmp_path / "run"
    with SpillStore(runtime) as spill:
        session = new_session(
            workspace,
            scripted(shouts("abc")),
            tools=[shout],
            permissions={"allow": ["Shout"]},
            spill=spill,
        )
        await session.run("big")
        tool = next(m for m in session.get_history() if m.role == "tool")
        assert tool.ok
        assert (tool.content or "").startswith("tool-result:")
        assert tool.metadata["spilled"] is True  # type: ignore[index]
        assert spill.get(tool.content or "") == ("ABC" * 70_000)[:200_000]


@pytest.mark.parametrize("lines", [1, 600], ids=["shown", "spilled"])
async def test_a_file_name_that_is_not_utf8_reaches_the_model_written_out(
    workspace: Path, tmp_path: Path, lines: int
) -> None:
    """A Grep finding lines in a file whose name holds an undecodable byte, its answer short
    or over the spill threshold: the byte reaches the model written out (``\\xff``), and the
    session saves and runs on. Its text held a lone surrogate, which neither the context
    estimate, the record nor the spill store can encode: the turn failed with -32603 and its
    result was lost."""
    from robotad.tools import GrepTool

    name = bytes(workspace) + b"/caf\xe9.txt"
    with open(name, "wb") as file:
        file.write(b"".join(b"line%d " % n + b"y" * 300 + b"\n" for n in range(lines)))
    grep = {"name": "Grep", "arguments": {"pattern": "line", "path": str(workspace)}}
    store = MemoryStore()
    with SpillStore(tmp_path / "run") as spill:
        session = new_session(
            workspace,
            scripted([{"toolCalls": [grep]}, {"text": "found"}, {"text": "more"}]),
            tools=[GrepTool()],
            spill=spill,
            store=store,
        )
        with trio.fail_after(LIMIT):
            assert await session.run("search") == "found"
            assert await session.run("again") == "more"
        tool = next(m for m in session.get_history() if m.role == "tool")
        assert tool.ok
        text = tool.content or ""
        if lines > 1:
            text = spill.get(text)
        assert f"{workspace}/caf\\xe9.txt:1:line0 " in text
    assert store.last.messages[-1].content == "more"
    assert session.get_context_state().used_tokens > 0


async def test_a_long_read_reaches_the_model_as_text_never_spilled(
    workspace: Path, tmp_path: Path
) -> None:
    """Read's answer stops below the spill threshold (with where to continue): a 2,000-line
    file used to come back as an opaque tool-result: reference the model could not read."""
    from robotad.session.turn.tool_admission import DEFAULT_SPILL_THRESHOLD
    from robotad.tools import ReadTool
    from robotad.tools.read import MAX_OUTPUT_CHARS

    assert MAX_OUTPUT_CHARS < DEFAULT_SPILL_THRESHOLD
    (workspace / "long.txt").write_text(
        "".join(f"line {n:05d} " + "x" * 60 + "\n" for n in range(2000))
    )
    read = {"name": "Read", "arguments": {"file_path": str(workspace / "long.txt")}}
    with SpillStore(tmp_path / "run") as spill:
        session = new_session(
            workspace,
            scripted([{"toolCalls": [read]}, {"text": "read"}]),
            tools=[ReadTool()],
            spill=spill,
        )
        await session.run("read it")
        tool = next(m for m in session.get_history() if m.role == "tool")
    content = tool.content or ""
    assert not content.startswith("tool-result:")
    assert "line 00000" in content
    assert "continue with offset=" in content.splitlines()[-1]


async def test_classifier_denial_streak_hands_back_to_a_person(workspace: Path) -> None:
    """G-123: after three classifier denials in a row the next call that needs a decision
    goes to a person instead of being denied."""

    class Refuser:
        def __init__(self) -> None:
            self.calls = 0

        async def classify(self, **kwargs: Any) -> Any:
            from robotad.session.permissions.classifier import ClassifierVerdict

            self.calls += 1
            await trio.lowlevel.checkpoint()
            return ClassifierVerdict("deny", "no")

    shout = ShoutTool()
    classifier = Refuser()
    approver = Approver(True)
    session = new_session(
        workspace,
        scripted(shouts("1", "2", "3", "4")),
        tools=[shout],
        classifier=classifier,
        permission_mode="auto",
        permission_handler=approver,
    )
    await session.run("go")
    assert classifier.calls == 3
    assert [r.arguments for r in approver.asked] == [{"text": "4"}]
    assert shout.runs == ["4"]


async def test_a_path_swapped_while_its_call_waits_is_not_read(workspace: Path) -> None:
    """A link made between the permission check and the open (here while a person is asked
    about the decoy) does not lead Read to the file a deny rule protects: the body opens the
    file the check judged or nothing."""
    vault = workspace / "vault"
    vault.mkdir()
    (vault / "key").write_text("TOKEN=hunter2\n")
    decoy = workspace / "x"
    decoy.write_text("decoy\n")

    async def swap_then_approve(request: ApprovalRequest) -> bool:
        decoy.unlink()
        decoy.symlink_to(vault / "key")
        await trio.lowlevel.checkpoint()
        return True

    provider = scripted(
        [{"toolCalls": [{"name": "Read", "arguments": {"file_path": "x"}}]}, {"text": "ok"}]
    )
    session = new_session(
        workspace,
        provider,
        tools=builtin_tools(),
        permissions={"ask": ["Read(x)"], "deny": ["Read(vault/**)"]},
        permission_handler=swap_then_approve,
    )
    with trio.fail_after(LIMIT):
        await session.run("read x")
    ((ok, content),) = results(session)
    assert not ok
    assert "hunter2" not in content
    assert "changed after its permission check" in content


def _calls(*calls: tuple[str, dict[str, Any]]) -> Any:
    """A script making `calls` in one round, then answering "ok"."""
    round_ = [{"name": name, "arguments": arguments} for name, arguments in calls]
    return scripted([{"toolCalls": round_}, {"text": "ok"}])


async def test_rules_hold_however_the_call_is_spelled(workspace: Path, tmp_path: Path) -> None:
    """End to end, with no one to ask: a Glob naming a denied folder in its pattern, a Grep
    over the parent of a denied folder, an acceptEdits Write to a submodule's git config, a
    redirection behind a prefix allow rule and a dressed-up denied rm are all held."""
    private = tmp_path / "private"
    private.mkdir()
    (private / "plans.txt").write_text("")
    (workspace / "secret").mkdir()
    (workspace / "secret" / "key").write_text("TOKEN=abc123\n")
    (workspace / "victim").mkdir()
    rc = tmp_path / "rc"
    session = new_session(
        workspace,
        _calls(
            ("Glob", {"pattern": "../private/*"}),
            ("Grep", {"pattern": "TOKEN"}),
            ("Write", {"file_path": ".git/modules/lib/config", "content": "[core]\n"}),
            ("Bash", {"command": f"echo x >> {shlex.quote(str(rc))}"}),
            ("Bash", {"command": "(rm -rf victim)"}),
        ),
        tools=builtin_tools(),
        permission_mode="acceptEdits",
        permissions={
            "allow": ["Bash(echo:*)", "Bash(rm -rf:*)"],
            "deny": [f"Glob({private}/**)", "Read(secret/**)", "Bash(rm:*)"],
        },
    )
    with trio.fail_after(LIMIT):
        await session.run("go")
    (glob_ok, glob), (_, grep), (write_ok, _), (echo_ok, _), (rm_ok, rm) = results(session)
    assert not glob_ok
    assert "plans.txt" not in glob
    assert "abc123" not in grep
    assert not write_ok
    assert not (workspace / ".git").exists()
    assert not echo_ok
    assert not rc.exists()
    assert not rm_ok
    assert "denied by rule Bash(rm:*)" in rm
    assert (workspace / "victim").is_dir()
