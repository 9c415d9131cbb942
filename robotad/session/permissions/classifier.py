"""The auto-mode classifier port and the gate that consults it.

A `Classifier` judges one tool call — never the conversation (G-213): it sees the session id,
the session's cwd, the tool name and the call's effective arguments, and nothing the agent read
or wrote, so no file, web page or tool result can argue for its own call.
`CommandClassifier` is the configured one (``[classifier] command``): ``/bin/sh -c`` in the
session's cwd (G-103), those four fields as JSON on stdin, and
``{"decision": "allow"|"deny", "reason": …}`` on stdout. Whatever goes wrong — spawn failure,
timeout, non-zero exit, output that is not that object, more than 1 MiB on stdout or stderr
(the command is then stopped at once) — is a deny carrying the reason, followed by the end of
what the command printed on stderr (`stderr_tail`: its last 2 KiB at most, one line, control
characters shown as ``<U+001B>``), so the person reading the denial can see why it failed
(decision 61). The stderr of a classifier that answered is not looked at.

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

from robotad.said_text import one_line_tail
from robotad.session.hooks.shell import ShellFailure, child_environment, run_shell_command

__all__ = [
    "AutoModeGate",
    "Classifier",
    "ClassifierVerdict",
    "CommandClassifier",
    "GateDecision",
    "stderr_tail",
]

DEFAULT_TIMEOUT_S: Final = 60.0
DENIALS_BEFORE_PERSON: Final = 3
#: The most of a failed classifier's stderr its denial quotes: the end, where the error is.
STDERR_TAIL_BYTES: Final = 2048


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
            )
        except ShellFailure as exc:
            return _failed(f"classifier {exc.reason}", exc.stderr)
        except (TypeError, msgspec.EncodeError) as exc:
            return ClassifierVerdict("deny", f"classifier input could not be encoded: {exc}")
        if result.exit_code != 0:
            return _failed(f"classifier exited {result.exit_code}", result.stderr)
        try:
            answer = msgspec.json.decode(result.stdout.strip() or b"null", type=_Wire)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            return _failed(f"classifier printed malformed output: {exc}", result.stderr)
        if answer.decision == "deny" and not answer.reason.strip():
            return ClassifierVerdict("deny", "denied by the classifier")
        return ClassifierVerdict(answer.decision, answer.reason)


def _failed(reason: str, stderr: bytes) -> ClassifierVerdict:
    """The deny of a classifier that failed: `reason`, then the end of its stderr, if any."""
    tail = stderr_tail(stderr)
    return ClassifierVerdict("deny", f"{reason}; its stderr ended: {tail}" if tail else reason)


#: The bytes that continue a UTF-8 character: a tail starting with them starts mid-character.
_CONTINUATION = bytes(range(0x80, 0xC0))


def stderr_tail(data: bytes, limit: int = STDERR_TAIL_BYTES) -> str:
    """The end of a command's stderr as one safe line of at most `limit` characters (``…``
    first when there was more): its last `limit` bytes, decoded with undecodable bytes
    replaced, each line stripped and the blank ones dropped, joined by `` | ``, tabs as
    spaces and every other control character and bidi control shown as ``<U+001B>``. Empty
    when it printed nothing to read."""
    cut = len(data) > limit
    if cut:  # a character split by the cut is no character: start at the next one
        data = data[-limit:].lstrip(_CONTINUATION)
    return one_line_tail(data.decode("utf-8", errors="replace").splitlines(), limit, cut=cut)


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
