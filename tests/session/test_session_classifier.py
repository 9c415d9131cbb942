"""The auto-mode classifier port: the command classifier and the denial-streak gate."""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import trio

from robotad.session.permissions.classifier import (
    AutoModeGate,
    ClassifierVerdict,
    CommandClassifier,
)

LIMIT = 20


def classifier_script(directory: Path, answer: str) -> str:
    script = directory / "classify.py"
    script.write_text(
        "import json, os, sys\n"
        "record = {'stdin': json.load(sys.stdin), 'cwd': os.getcwd()}\n"
        f"open({str(directory / 'seen.json')!r}, 'w').write(json.dumps(record))\n"
        f"sys.stdout.write({answer!r})\n"
    )
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}"


async def test_classifier_sees_only_the_call_in_the_session_cwd(tmp_path: Path) -> None:
    """G-213, G-103: the classifier's input is exactly {session_id, cwd, tool_name, tool_input}
    and it runs in the session's cwd."""
    cwd = tmp_path / "project"
    cwd.mkdir()
    classifier = CommandClassifier(classifier_script(tmp_path, '{"decision": "allow"}'))
    with trio.fail_after(LIMIT):
        verdict = await classifier.classify(
            session_id="s1", cwd=cwd, tool_name="Bash", tool_input={"command": "make"}
        )
    assert verdict == ClassifierVerdict("allow", "")
    seen = json.loads((tmp_path / "seen.json").read_text())
    assert seen["stdin"] == {
        "session_id": "s1",
        "cwd": str(cwd),
        "tool_name": "Bash",
        "tool_input": {"command": "make"},
    }
    assert seen["cwd"] == str(cwd)


async def test_classifier_deny_carries_its_reason(tmp_path: Path) -> None:
    """G-120: a classifier deny comes back with the classifier's reason."""
    answer = '{"decision": "deny", "reason": "writes outside the project"}'
    classifier = CommandClassifier(classifier_script(tmp_path, answer))
    with trio.fail_after(LIMIT):
        verdict = await classifier.classify(
            session_id="s1", cwd=tmp_path, tool_name="Write", tool_input={"file_path": "/x"}
        )
    assert verdict == ClassifierVerdict("deny", "writes outside the project")


@pytest.mark.parametrize(
    ("command", "reason"),
    [
        ("exit 3", "exited 3"),
        ("echo not json", "malformed output"),
        ('echo \'{"decision": "maybe"}\'', "malformed output"),
        ("true", "malformed output"),
        ("sleep 30", "timed out"),
        ("/nonexistent/classifier", "exited 127"),
    ],
)
async def test_classifier_failures_deny(tmp_path: Path, command: str, reason: str) -> None:
    """G-120: whatever goes wrong with the classifier is a deny saying why."""
    classifier = CommandClassifier(command, time_limit=0.3)
    with trio.fail_after(LIMIT):
        verdict = await classifier.classify(
            session_id="s1", cwd=tmp_path, tool_name="Bash", tool_input={"command": "ls"}
        )
    assert verdict.decision == "deny"
    assert reason in verdict.reason


async def test_a_classifier_printing_without_end_denies_at_once(tmp_path: Path) -> None:
    """G-120: a classifier printing without end (``yes``) was read and thrown away at full
    speed until its timeout; past the cap it is now stopped at once, and the call denied
    saying why. Its timeout is 60 s, far past the test's bound."""
    classifier = CommandClassifier("yes", time_limit=60)
    with trio.fail_after(LIMIT):
        verdict = await classifier.classify(
            session_id="s1", cwd=tmp_path, tool_name="Bash", tool_input={"command": "ls"}
        )
    assert verdict == ClassifierVerdict(
        "deny",
        "classifier printed more than 1048576 bytes on stdout, more than robotad reads; "
        "robotad stopped it (write long output to a file instead)",
    )


def failing_script(directory: Path, body: str) -> str:
    """A classifier (a Python script) whose body is `body`: it fails as that makes it."""
    script = directory / "failing.py"
    script.write_text(f"import sys\n{body}")
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}"


async def classify(classifier: CommandClassifier, cwd: Path) -> ClassifierVerdict:
    with trio.fail_after(LIMIT):
        return await classifier.classify(
            session_id="s1", cwd=cwd, tool_name="Bash", tool_input={"command": "ls"}
        )


async def test_a_failed_classifiers_denial_ends_with_its_stderr(tmp_path: Path) -> None:
    """G-120: a classifier that exits non-zero is denied in the same words as before, then
    what it said on stderr, so a person can act on it: one line, its traceback's lines
    joined, an escape sequence and a bidi override shown, not sent."""
    body = (
        "sys.stderr.write('Traceback (most recent call last):\\n')\n"
        "sys.stderr.write('  File \"classify.py\", line 9\\n\\n')\n"
        "sys.stderr.write('KeyError: \\x1b[2J\\u202eCLASSIFIER_KEY\\r\\n')\n"
        "sys.exit(3)\n"
    )
    verdict = await classify(CommandClassifier(failing_script(tmp_path, body)), tmp_path)
    assert verdict == ClassifierVerdict(
        "deny",
        "classifier exited 3; its stderr ended: Traceback (most recent call last): | "
        'File "classify.py", line 9 | KeyError: <U+001B>[2J<U+202E>CLASSIFIER_KEY',
    )


async def test_a_classifier_printing_malformed_output_is_denied_with_its_stderr(
    tmp_path: Path,
) -> None:
    """G-120: malformed output keeps its reason and gains the end of stderr, bytes that are
    not UTF-8 replaced."""
    body = "sys.stderr.buffer.write(b'model said: \\xff nope\\n')\nprint('not json')\n"
    verdict = await classify(CommandClassifier(failing_script(tmp_path, body)), tmp_path)
    assert verdict.decision == "deny"
    assert verdict.reason.startswith("classifier printed malformed output: ")
    assert verdict.reason.endswith("; its stderr ended: model said: \ufffd nope")


async def test_a_timed_out_classifiers_denial_ends_with_its_stderr(tmp_path: Path) -> None:
    """G-120: what a classifier said before it ran out of time is in its denial too."""
    command = "echo waiting for the model server >&2; sleep 30"
    verdict = await classify(CommandClassifier(command, time_limit=0.3), tmp_path)
    assert verdict == ClassifierVerdict(
        "deny", "classifier timed out after 0.3s; its stderr ended: waiting for the model server"
    )


async def test_a_denials_stderr_is_its_last_two_kib(tmp_path: Path) -> None:
    """A classifier that printed 100 KB on stderr before failing is denied with the end of
    it, where its error is: at most 2 KiB, marked as cut."""
    body = "sys.stderr.write('noise ' * 20000 + '\\nthe real error\\n')\nsys.exit(1)\n"
    verdict = await classify(CommandClassifier(failing_script(tmp_path, body)), tmp_path)
    prefix = "classifier exited 1; its stderr ended: …"
    assert verdict.reason.startswith(prefix)
    assert verdict.reason.endswith("noise | the real error")
    assert len(verdict.reason) - len(prefix) <= 2048


async def test_a_classifier_that_answers_is_not_judged_by_its_stderr(tmp_path: Path) -> None:
    """The stderr of a classifier that answered is read but not looked at: 500 KB of
    diagnostics and an allow is an allow, with no stderr in its reason."""
    answer = '{"decision": "allow"}'
    command = f"head -c 500000 /dev/zero | tr '\\0' x >&2; echo {shlex.quote(answer)}"
    verdict = await classify(CommandClassifier(command, time_limit=60), tmp_path)
    assert verdict == ClassifierVerdict("allow", "")


async def test_a_classifier_printing_without_end_on_stderr_denies_at_once(tmp_path: Path) -> None:
    """Decision 61: stderr is read now, so it is bounded as stdout is: past 1 MiB the
    classifier is stopped at once and denied saying so. Its timeout is 60 s, far past the
    test's bound."""
    verdict = await classify(CommandClassifier("yes >&2", time_limit=60), tmp_path)
    assert verdict.decision == "deny"
    assert verdict.reason.startswith(
        "classifier printed more than 1048576 bytes on stderr, more than robotad reads; "
        "robotad stopped it (write long output to a file instead); its stderr ended: …"
    )
    assert verdict.reason.endswith("y | y | y")


class ScriptedClassifier:
    def __init__(self, answers: list[str]) -> None:
        self.answers = answers
        self.calls = 0

    async def classify(
        self, *, session_id: str, cwd: Path, tool_name: str, tool_input: Mapping[str, Any]
    ) -> ClassifierVerdict:
        answer = self.answers[self.calls]
        self.calls += 1
        return ClassifierVerdict("allow" if answer == "allow" else "deny", f"said {answer}")


async def decide(gate: AutoModeGate) -> str:
    decision = await gate.decide(
        session_id="s1", cwd=Path("/w"), tool_name="Bash", tool_input={"command": "x"}
    )
    return decision.outcome


async def test_three_denials_in_a_row_hand_the_next_call_to_a_person() -> None:
    """G-123: after three classifier denials in a row the next call goes to a person, without
    consulting the classifier; then the classifier gets the following calls again."""
    classifier = ScriptedClassifier(["deny", "deny", "deny", "deny", "allow"])
    gate = AutoModeGate(classifier)
    assert [await decide(gate) for _ in range(3)] == ["deny"] * 3
    assert await decide(gate) == "ask-person"
    assert classifier.calls == 3
    assert [await decide(gate) for _ in range(2)] == ["deny", "allow"]


async def test_an_allow_resets_the_streak() -> None:
    """G-123: the denials must be consecutive; an allow starts the count again."""
    classifier = ScriptedClassifier(["deny", "deny", "allow", "deny", "deny", "deny"])
    gate = AutoModeGate(classifier)
    outcomes = [await decide(gate) for _ in range(6)]
    assert outcomes == ["deny", "deny", "allow", "deny", "deny", "deny"]
    assert gate.consecutive_denials == 3
    assert await decide(gate) == "ask-person"
