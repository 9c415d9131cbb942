"""The auto-mode classifier port and the gate that consults it.

A `Classifier` judges one tool call — never the conversation (G-213): it sees the session id,
the session's cwd, the tool name and the call's effective arguments, and nothing the agent read
or wrote, so no file, web page or tool result can argue for its own call.
`CommandClassifier` is the configured one (``[classifier] command``): ``/bin/sh -c`` in the
session's cwd (G-103), those four fields as JSON on stdin, and
``{"decision": "allow"|"deny", "reason": …}`` on stdout. Whatever goes wrong — spawn failure,
timeout, non-zero exit, output that is not that object, more than 1 MiB of it (the command is
then stopped at once) — is a deny carrying the reason. Its stderr is not read (``/dev/null``).

`AutoModeGate` is consulted only for calls the permission enforcer marked classifier-eligible
(G-119). It counts the session's classifier denials in a row: after three, the next call that
needs a decision goes to a person (``ask-person``) instead of to the classifier (G-123), and
the count starts again; a classifier allow resets it too.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, Literal, Protocol

import msgspec
from msgspec import Struct

from robotad.session.hooks.shell import ShellFailure, child_environment, run_shell_command

__all__ = [
    "AutoModeGate",
    "Classifier",
    "ClassifierVerdict",
    "CommandClassifier",
    "GateDecision",
]

DEFAULT_TIMEOUT_S: Final = 60.0
DENIALS_BEFORE_PERSON: Final = 3


class ClassifierVerdict(Struct, frozen=True):
    decision: Literal["allow", "deny"]
    reason: str = ""


class Classifier(Protocol):
    """Judges one call. Must not raise for an ordinary failure: return a deny saying why."""

    async def classify(
        self, *, session_id: str, cwd: Path, tool_name: str, tool_input: Mapping[str, Any]
    ) -> ClassifierVerdict: ...


class _Wire(Struct, frozen=True):
    decision: Literal["allow", "deny"]
    reason: str = ""


class CommandClassifier:
    """Runs `command` once per call. `time_limit` bounds each run (seconds)."""

    def __init__(self, command: str, *, time_limit: float = DEFAULT_TIMEOUT_S) -> None:
        self.command = command
        self.time_limit = time_limit

    async def classify(
        self, *, session_id: str, cwd: Path, tool_name: str, tool_input: Mapping[str, Any]
    ) -> ClassifierVerdict:
        request = {
            "session_id": session_id,
            "cwd": os.fspath(cwd),
            "tool_name": tool_name,
            "tool_input": dict(tool_input),
        }
        try:
            stdin = msgspec.json.encode(request)
            result = await run_shell_command(
                self.command,
                stdin=stdin,
                cwd=cwd,
                env=child_environment(cwd, None),
                time_limit=self.time_limit,
                read_stderr=False,
            )
        except ShellFailure as exc:
            return ClassifierVerdict("deny", f"classifier {exc.reason}")
        except (TypeError, msgspec.EncodeError) as exc:
            return ClassifierVerdict("deny", f"classifier input could not be encoded: {exc}")
        if result.exit_code != 0:
            return ClassifierVerdict("deny", f"classifier exited {result.exit_code}")
        try:
            answer = msgspec.json.decode(result.stdout.strip() or b"null", type=_Wire)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            return ClassifierVerdict("deny", f"classifier printed malformed output: {exc}")
        if answer.decision == "deny" and not answer.reason.strip():
            return ClassifierVerdict("deny", "denied by the classifier")
        return ClassifierVerdict(answer.decision, answer.reason)


class GateDecision(Struct, frozen=True):
    """``allow`` or ``deny`` from the classifier, or ``ask-person`` after a denial streak."""

    outcome: Literal["allow", "deny", "ask-person"]
    reason: str


class AutoModeGate:
    """One session's auto-mode state: the classifier and its consecutive-denial count."""

    def __init__(
        self, classifier: Classifier, *, denials_before_person: int = DENIALS_BEFORE_PERSON
    ) -> None:
        self.classifier = classifier
        self.denials_before_person = denials_before_person
        self._streak = 0

    @property
    def consecutive_denials(self) -> int:
        return self._streak

    def reset(self) -> None:
        """Forget the streak (e.g. when the session leaves auto mode)."""
        self._streak = 0

    async def decide(
        self, *, session_id: str, cwd: Path, tool_name: str, tool_input: Mapping[str, Any]
    ) -> GateDecision:
        """Decide one classifier-eligible call. A cancelled classification changes nothing."""
        if self._streak >= self.denials_before_person:
            self._streak = 0
            return GateDecision(
                "ask-person",
                f"the classifier denied {self.denials_before_person} calls in a row; "
                "a person decides this one",
            )
        verdict = await self.classifier.classify(
            session_id=session_id, cwd=cwd, tool_name=tool_name, tool_input=tool_input
        )
        if verdict.decision == "allow":
            self._streak = 0
            return GateDecision("allow", verdict.reason or "allowed by the classifier")
        self._streak += 1
        return GateDecision("deny", verdict.reason or "denied by the classifier")
