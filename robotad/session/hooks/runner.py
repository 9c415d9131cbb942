"""Claude-Code-compatible command hooks: execution and verdicts.

The configuration is parsed by `robotad.session.hooks.config`. Each matching hook runs through
the executor registered for its type; a ``command`` hook runs ``/bin/sh -c COMMAND`` in the
session's cwd (G-103) as the leader of a new process group, with the JSON input on stdin
(``session_id``, ``cwd``, ``hook_event_name`` and the event's own fields, Claude Code's names),
``CLAUDE_PROJECT_DIR`` and ``ROBOTA_PROJECT_DIR`` set to the cwd, and ``TRACEPARENT`` exactly
when the caller passes one for that firing (an inherited one is removed). On timeout the whole
process tree is stopped. Hooks matching one firing run concurrently. robotad reads at most
1 MiB of each output stream an event uses (PreToolUse's stdout and stderr, an advisory event's
stderr, the first line of which names a failure); a hook printing more is stopped at once and
has failed. The stdout of an advisory hook is not read: it goes to ``/dev/null``, unlimited.

PreToolUse is the one enforcing event (`HookRunner.run_pre_tool_use`): exit 0 with
``hookSpecificOutput.permissionDecision`` (or the legacy ``decision: block|approve``) decides,
exit 0 with nothing decided is no objection, exit 2 blocks with stderr as the reason, and every
other outcome — timeout, spawn failure, other non-zero exit, malformed output, output past the
cap, unknown hook type, a matcher that could not tell in time — denies (G-139…G-141). All deny
reasons of one call come back as one reason (G-142). Every other event is advisory
(`run_advisory`, `fire_and_forget`): failures are returned as `HookFailure`s, never raised
(G-143).

Its size is one concept, a firing from the selection of its hooks to their verdict: what a
hook's exit and output mean is read here, beside the runner that decides what to read.
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal, Protocol

import msgspec
import trio
from msgspec import Struct

from robotad.session.hooks.config import MATCH_FIELD, HookGroup, HooksConfig, HookSpec
from robotad.session.hooks.shell import ShellFailure, child_environment, run_shell_command
from robotad.session.permissions.patterns import MATCH_TIME_LIMIT

__all__ = [
    "CommandExecutor",
    "HookExecutionError",
    "HookExecutor",
    "HookFailure",
    "HookInvocation",
    "HookOutput",
    "HookRunner",
    "HookSelection",
    "HookVerdict",
    "model_call_input",
]

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S: Final = 60.0
_REASON_LIMIT: Final = 2000
_SHOWN_LIMIT: Final = 100


# -- executors -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HookInvocation:
    """One hook to run. `reads_stdout` says whether the event reads the hook's stdout
    (PreToolUse does, advisory events do not): an executor may discard it unread when not."""

    spec: HookSpec
    stdin: bytes
    cwd: Path
    env: Mapping[str, str]
    timeout: float
    reads_stdout: bool = True


@dataclass(frozen=True, slots=True)
class HookOutput:
    """What a hook that ran left: its exit code and its whole output (an executor that cannot
    keep all of it raises `HookExecutionError` instead)."""

    exit_code: int
    stdout: bytes
    stderr: bytes


class HookExecutionError(Exception):
    """The hook reached no outcome (timeout, spawn or transport failure, output past what
    robotad reads); `reason` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class HookExecutor(Protocol):
    """Runs hooks of one `type`. Returns the hook's exit code and output, or raises
    `HookExecutionError`; cancellation must stop the hook and propagate."""

    async def execute(self, invocation: HookInvocation) -> HookOutput: ...


class CommandExecutor:
    """The ``command`` hook type: ``/bin/sh -c`` in the session's cwd; a stdout the event
    does not read goes to ``/dev/null``."""

    async def execute(self, invocation: HookInvocation) -> HookOutput:
        assert invocation.spec.command is not None
        try:
            result = await run_shell_command(
                invocation.spec.command,
                stdin=invocation.stdin,
                cwd=invocation.cwd,
                env=invocation.env,
                time_limit=invocation.timeout,
                read_stdout=invocation.reads_stdout,
            )
        except ShellFailure as exc:
            raise HookExecutionError(exc.reason) from None
        return HookOutput(result.exit_code, result.stdout, result.stderr)


# -- verdicts --------------------------------------------------------------------------------


class HookVerdict(Struct, frozen=True):
    """PreToolUse's combined answer: ``none`` means no hook objected or decided."""

    outcome: Literal["allow", "deny", "ask", "none"]
    reason: str = ""


class HookFailure(Struct, frozen=True):
    """An advisory hook that failed; reported, never raised (``turn_finished.hookFailures``)."""

    event: str
    reason: str


def model_call_input(model: str, effort: str | None, **fields: Any) -> dict[str, Any]:
    """PreModelCall/PostModelCall input fields: `effort` is ``"auto"`` when unset (G-050)."""
    return {**fields, "model": model, "effort": effort or "auto"}


class _Decided(Struct, frozen=True):
    outcome: Literal["allow", "deny", "ask", "none"]
    reason: str


@dataclass(frozen=True, slots=True)
class HookSelection:
    """What one firing runs: the selected `hooks`, in configuration order, and in `unmatched`
    a reason for each group whose matcher could not tell in time (its hooks do not run, and
    the firing fails on it: a deny on PreToolUse, a reported failure elsewhere)."""

    hooks: list[HookSpec]
    unmatched: list[str]

    @property
    def fires(self) -> bool:
        """Whether the firing has a hook to run or a failure to report."""
        return bool(self.hooks or self.unmatched)


@dataclass(frozen=True, slots=True)
class _Judge:
    """How an event reads its hooks: whether it needs their stdout, and their verdict."""

    reads_stdout: bool
    verdict: Callable[[HookSpec, HookOutput], _Decided]


class HookRunner:
    """Fires the configured hooks of one session. Never reads the daemon's own cwd: `cwd` is
    the session's, for the child and for the input's ``cwd`` field alike."""

    def __init__(
        self,
        config: HooksConfig,
        *,
        cwd: Path,
        session_id: str,
        executors: Mapping[str, HookExecutor] | None = None,
        default_timeout: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        self.config = config
        self.cwd = cwd
        self.session_id = session_id
        self.executors: Mapping[str, HookExecutor] = (
            executors if executors is not None else {"command": CommandExecutor()}
        )
        self.default_timeout = default_timeout

    def select(self, event: str, payload: Mapping[str, Any]) -> HookSelection:
        """The hooks selected for one firing, in configuration order, and a failure for each
        group whose matcher could not tell in time whether it selects (decision 52)."""
        field = MATCH_FIELD.get(event)
        target = payload.get(field) if field is not None else None
        target = target if isinstance(target, str) else None
        selection = HookSelection([], [])
        for group in self.config.get(event, ()):
            try:
                selected = group.selects(target)
            except TimeoutError:
                assert target is not None
                reason = _matcher_timed_out(group, field, target)
                logger.warning("%s hooks: %s", event, reason)
                selection.unmatched.append(reason)
                continue
            if selected:
                selection.hooks.extend(group.hooks)
        return selection

    def hook_input(self, event: str, payload: Mapping[str, Any]) -> bytes:
        """The JSON a hook reads on stdin; the common fields cannot be overridden."""
        common = {"session_id": self.session_id, "cwd": os.fspath(self.cwd)}
        return msgspec.json.encode({**payload, **common, "hook_event_name": event})

    async def run_pre_tool_use(
        self,
        tool_name: str,
        tool_input: Mapping[str, Any],
        *,
        tool_use_id: str | None = None,
        traceparent: str | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> HookVerdict:
        """Run the PreToolUse hooks for one call (fail-closed). `tool_input` should be the
        call's effective arguments (canonical paths, G-117). Deny beats ask beats allow; every
        deny reason is joined into the verdict's one reason (G-142)."""
        payload: dict[str, Any] = {**(extra or {}), "tool_name": tool_name}
        payload["tool_input"] = dict(tool_input)
        if tool_use_id is not None:
            payload["tool_use_id"] = tool_use_id
        try:
            results = await self._run_all("PreToolUse", payload, traceparent, _PRE_TOOL_USE)
        except Exception as exc:  # fail closed: a gate that cannot run denies
            logger.exception("PreToolUse hooks failed")
            return HookVerdict("deny", f"PreToolUse hooks could not run: {type(exc).__name__}")
        for outcome in ("deny", "ask", "allow"):
            reasons = [r.reason for r in results if r.outcome == outcome]
            if reasons:
                return HookVerdict(outcome, "; ".join(r for r in reasons if r))
        return HookVerdict("none")

    async def run_advisory(
        self, event: str, payload: Mapping[str, Any], *, traceparent: str | None = None
    ) -> list[HookFailure]:
        """Run one advisory event's hooks and return their failures; never raises anything
        but cancellation."""
        try:
            results = await self._run_all(event, payload, traceparent, _ADVISORY)
        except Exception as exc:  # a bug or a broken executor must not fail the turn
            logger.exception("advisory %s hooks failed", event)
            return [HookFailure(event, f"hooks could not run: {type(exc).__name__}")]
        return [HookFailure(event, r.reason) for r in results if r.outcome == "deny"]

    def fire_and_forget(
        self,
        nursery: trio.Nursery,
        event: str,
        payload: Mapping[str, Any],
        *,
        traceparent: str | None = None,
        report: Callable[[list[HookFailure]], None] | None = None,
    ) -> None:
        """Start an advisory event in `nursery` without waiting for it (model-call hooks,
        G-051); `report` is called with its failures, if any, when it ends."""
        if not self.select(event, payload).fires:
            return

        async def fire() -> None:
            failures = await self.run_advisory(event, payload, traceparent=traceparent)
            if failures and report is not None:
                report(failures)

        nursery.start_soon(fire)

    async def _run_all(
        self,
        event: str,
        payload: Mapping[str, Any],
        traceparent: str | None,
        judge: _Judge,
    ) -> list[_Decided]:
        """Every selected hook's outcome, after a deny for each group that could not be told
        (a failure on an advisory event)."""
        selection = self.select(event, payload)
        unmatched = [_Decided("deny", reason) for reason in selection.unmatched]
        specs = selection.hooks
        if not specs:
            return unmatched
        stdin = self.hook_input(event, payload)
        env = child_environment(self.cwd, traceparent)
        results: list[_Decided] = [_Decided("none", "")] * len(specs)

        async def one(index: int, spec: HookSpec) -> None:
            results[index] = await self._run_one(event, spec, stdin, env, judge)

        async with trio.open_nursery() as nursery:
            for index, spec in enumerate(specs):
                nursery.start_soon(one, index, spec)
        return unmatched + results

    async def _run_one(
        self,
        event: str,
        spec: HookSpec,
        stdin: bytes,
        env: Mapping[str, str],
        judge: _Judge,
    ) -> _Decided:
        executor = self.executors.get(spec.type)
        if executor is None:
            reason = f"hook {spec.where} has type {spec.type!r}, which no executor runs"
            return _Decided("deny", reason)
        timeout = spec.timeout if spec.timeout is not None else self.default_timeout
        invocation = HookInvocation(spec, stdin, self.cwd, env, timeout, judge.reads_stdout)
        try:
            output = await executor.execute(invocation)
        except HookExecutionError as exc:
            return _Decided("deny", f"hook {spec.where} {exc.reason}")
        except Exception as exc:
            logger.exception("hook %s executor failed", spec.where)
            return _Decided("deny", f"hook {spec.where} failed: {type(exc).__name__}")
        try:
            return judge.verdict(spec, output)
        except Exception:  # one hook's unreadable output never cancels the others
            logger.exception("hook %s output could not be judged", spec.where)
            return _Decided("deny", f"hook {spec.where} printed output robotad cannot read")


def _first_line(data: bytes) -> str:
    text = data.decode("utf-8", "replace").strip()
    return text.splitlines()[0][:300] if text else ""


def _clip(text: str) -> str:
    return text if len(text) <= _REASON_LIMIT else text[: _REASON_LIMIT - 1] + "…"


def _exit_failure(spec: HookSpec, output: HookOutput) -> _Decided:
    detail = _first_line(output.stderr)
    return _Decided(
        "deny", f"hook {spec.where} {_ended(output.exit_code)}" + (f": {detail}" if detail else "")
    )


def _ended(exit_code: int) -> str:
    """How the hook ended: its exit status, or the signal that killed it (a negative code:
    "exited -9" read like a status the hook chose)."""
    if exit_code >= 0:
        return f"exited {exit_code}"
    try:
        name = f" ({signal.Signals(-exit_code).name})"
    except ValueError:
        name = ""
    return f"was killed by signal {-exit_code}{name}"


def _advisory_verdict(spec: HookSpec, output: HookOutput) -> _Decided:
    """Advisory events: only a non-zero exit is a failure (a block cannot apply here). Their
    stdout is not read, so a hook that printed a lot there and exited 0 did not fail."""
    if output.exit_code == 0:
        return _Decided("none", "")
    return _exit_failure(spec, output)


def _pre_tool_use_verdict(spec: HookSpec, output: HookOutput) -> _Decided:
    if output.exit_code == 2:
        # The hook's words for the model, then which hook: /bin/sh also exits 2 on a syntax
        # error, and the person reading the log must be able to find the hook either way.
        reason = _clip(output.stderr.decode("utf-8", "replace").strip())
        return _Decided(
            "deny", f"{reason} (hook {spec.where})" if reason else f"blocked by hook {spec.where}"
        )
    if output.exit_code != 0:
        return _exit_failure(spec, output)
    text = output.stdout.decode("utf-8", "replace").strip()
    if not text:
        return _Decided("none", "")
    try:
        data = msgspec.json.decode(text)
    except msgspec.DecodeError:
        return _Decided("deny", f"hook {spec.where} printed output that is not JSON")
    except RecursionError:  # [[[[… 200,000 deep: the decoder's stack, not the daemon's
        return _Decided("deny", f"hook {spec.where} printed JSON nested too deeply to read")
    try:
        return _decision_of(data, spec)
    except ValueError as exc:
        return _Decided("deny", f"hook {spec.where} printed malformed output: {exc}")


def _decision_of(data: object, spec: HookSpec) -> _Decided:
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    specific = data.get("hookSpecificOutput")
    if specific is not None:
        if not isinstance(specific, dict):
            raise ValueError("hookSpecificOutput is not an object")
        decision = specific.get("permissionDecision")
        if decision is not None:
            if decision not in ("allow", "deny", "ask"):
                raise ValueError(f"unknown permissionDecision {_shown(decision)}")
            return _Decided(decision, _reason(specific.get("permissionDecisionReason"), spec))
    legacy = data.get("decision")
    if legacy is not None:
        if legacy not in ("block", "approve"):
            raise ValueError(f"unknown decision {_shown(legacy)}")
        outcome: Literal["deny", "allow"] = "deny" if legacy == "block" else "allow"
        return _Decided(outcome, _reason(data.get("reason"), spec))
    if data.get("continue") is False:
        return _Decided("deny", _reason(data.get("stopReason"), spec))
    return _Decided("none", "")


def _matcher_timed_out(group: HookGroup, field: str | None, target: str) -> str:
    """Why a group's hooks did not run: its matcher could not tell in time (decision 52)."""
    return (
        f"the matcher {_shown(group.matcher)} of hooks {group.where} could not be matched "
        f"against the {field} ({len(target)} characters) within {MATCH_TIME_LIMIT:g} s, so its "
        "hooks did not run; simplify the pattern"
    )


def _shown(value: object) -> str:
    """A value the hook printed, as a reason quotes it: its repr, cut to a few words (the
    hook may have printed a megabyte of it, and the reason reaches the model and the log)."""
    text = repr(value)
    return text if len(text) <= _SHOWN_LIMIT else text[: _SHOWN_LIMIT - 1] + "…"


def _reason(value: object, spec: HookSpec) -> str:
    if isinstance(value, str) and value.strip():
        return _clip(value.strip())
    return f"decided by hook {spec.where}"


_PRE_TOOL_USE: Final = _Judge(reads_stdout=True, verdict=_pre_tool_use_verdict)
_ADVISORY: Final = _Judge(reads_stdout=False, verdict=_advisory_verdict)
