"""Every error of the wire contract (PROTOCOL.md §2 and §3), as exception classes.

An error class carries its JSON-RPC code; an instance carries the `message` and the `data`
object that go on the wire. Domain code raises these directly (``raise SessionBusy(sid, tid)``)
and the peer turns them into error responses; nothing else maps strings to codes.

`RpcError.from_wire` rebuilds the right class on the client side, so ``except SessionBusy``
works in robotactl exactly as it does in the daemon.
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = [
    "CODES",
    "CompactionAborted",
    "CompactionFailed",
    "EffectUncertain",
    "EventsLost",
    "ExecutionPending",
    "InternalError",
    "InvalidParams",
    "InvalidRequest",
    "Issue",
    "MethodNotFound",
    "NotAllowed",
    "ParseError",
    "ProviderFailed",
    "RecordCorrupt",
    "RecordUnsupported",
    "RequestCancelled",
    "RpcError",
    "SessionBusy",
    "SessionExists",
    "SessionNotFound",
    "StaleResponse",
    "StorageFailed",
    "TransitionRefused",
    "TurnAborted",
]

#: One located problem: ``{"path": "$.permissions.allow[2]", "message": "..."}``.
Issue = dict[str, str]


class RpcError(Exception):
    """An error with a JSON-RPC code. Subclasses fix `code` and build `data` from arguments."""

    code: ClassVar[int] = -32603
    default_message: ClassVar[str] = "internal error"

    def __init__(self, message: str | None = None, data: dict[str, Any] | None = None) -> None:
        self.message = message or self.default_message
        self.data = data
        super().__init__(self.message)

    def to_wire(self) -> dict[str, Any]:
        """The JSON-RPC ``error`` member: ``{code, message, data?}``."""
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error

    @staticmethod
    def from_wire(error: dict[str, Any]) -> RpcError:
        """Rebuild the exception a peer sent, as the class registered for its code."""
        code = error.get("code")
        message = str(error.get("message", ""))
        data = error.get("data")
        cls = CODES.get(code, RpcError) if isinstance(code, int) else RpcError
        exc = cls.__new__(cls)
        RpcError.__init__(exc, message, data if isinstance(data, dict) else None)
        if cls is RpcError and isinstance(code, int):
            exc.code = code  # type: ignore[misc]
        return exc

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(code={self.code}, message={self.message!r}, data={self.data!r})"
        )


# -- JSON-RPC 2.0 ---------------------------------------------------------------------------


class ParseError(RpcError):
    code = -32700
    default_message = "parse error"


class InvalidRequest(RpcError):
    code = -32600
    default_message = "invalid request"


class MethodNotFound(RpcError):
    code = -32601
    default_message = "method not found"

    def __init__(self, method: str) -> None:
        super().__init__(f"method not found: {method}", {"method": method})


class InvalidParams(RpcError):
    """-32602 with every problem listed: ``data.issues = [{path, message}, ...]``."""

    code = -32602
    default_message = "invalid params"

    def __init__(self, issues: list[Issue], message: str | None = None) -> None:
        if message is None:
            first = issues[0] if issues else {"path": "$", "message": "invalid"}
            more = f" (and {len(issues) - 1} more)" if len(issues) > 1 else ""
            message = f"invalid params: {first['path']}: {first['message']}{more}"
        super().__init__(message, {"issues": issues})

    @property
    def issues(self) -> list[Issue]:
        return list((self.data or {}).get("issues", []))


class InternalError(RpcError):
    code = -32603
    default_message = "internal error"


class RequestCancelled(RpcError):
    code = -32800
    default_message = "request cancelled"


# -- application errors (PROTOCOL.md §3) ----------------------------------------------------


class SessionBusy(RpcError):
    code = -32001
    default_message = "session busy"

    #: What holds a session outside any turn (``turnId`` null), by the kind of its work.
    WORK: ClassVar[dict[str, str]] = {
        "compaction": "a compaction",
        "resume": "the continuation of an answered approval",
        "direct": "a tool called directly",
    }

    def __init__(self, session_id: str, turn_id: str | None, kind: str | None = None) -> None:
        if turn_id is not None:
            what = f"turn {turn_id}"
        else:
            what = self.WORK.get(kind or "", "work that belongs to no turn")
        super().__init__(
            f"session {session_id} is busy with {what}",
            {"sessionId": session_id, "turnId": turn_id},
        )


class SessionNotFound(RpcError):
    code = -32002
    default_message = "session not found"

    def __init__(self, session_id: str, **extra: Any) -> None:
        super().__init__(f"no session {session_id}", {"sessionId": session_id, **extra})


class RecordCorrupt(RpcError):
    code = -32003
    default_message = "stored record is corrupt"

    def __init__(self, session_id: str, issues: list[Issue], *, path: str | None = None) -> None:
        """`path`: the record's file relative to the state folder (``sessions/<id>.json``),
        named in the message and in `data` (v1.1) so a person knows which file to look at."""
        first = f": {issues[0]['path']}: {issues[0]['message']}" if issues else ""
        where = f" ({path})" if path else ""
        data: dict[str, Any] = {"sessionId": session_id, "issues": issues}
        if path:
            data["path"] = path
        super().__init__(f"stored record of {session_id}{where} is corrupt{first}", data)


class RecordUnsupported(RpcError):
    code = -32004
    default_message = "stored record has an unsupported schema version"

    def __init__(self, session_id: str, schema_version: Any, *, path: str | None = None) -> None:
        where = f" ({path})" if path else ""
        data: dict[str, Any] = {"sessionId": session_id, "schemaVersion": schema_version}
        if path:
            data["path"] = path
        super().__init__(
            f"stored record of {session_id}{where} has unsupported schemaVersion "
            f"{schema_version!r}",
            data,
        )


class ExecutionPending(RpcError):
    code = -32005
    default_message = "an execution is waiting for approval"

    def __init__(self, session_id: str, execution_id: str) -> None:
        super().__init__(
            f"session {session_id} has execution {execution_id} waiting; resume or abandon it",
            {"sessionId": session_id, "executionId": execution_id},
        )


class TurnAborted(RpcError):
    code = -32006
    default_message = "turn aborted"

    def __init__(self, session_id: str, turn_id: str | None) -> None:
        super().__init__(
            f"turn {turn_id} of {session_id} was aborted",
            {"sessionId": session_id, "turnId": turn_id},
        )


class ProviderFailed(RpcError):
    code = -32007
    default_message = "provider failed"

    def __init__(self, session_id: str, turn_id: str | None, provider: str, reason: str) -> None:
        super().__init__(
            f"provider {provider} failed: {reason}",
            {"sessionId": session_id, "turnId": turn_id, "provider": provider, "reason": reason},
        )


class CompactionFailed(RpcError):
    code = -32008
    default_message = "compaction failed"

    def __init__(self, session_id: str, trigger: str, reason: str = "") -> None:
        text = f"compaction ({trigger}) of {session_id} failed"
        super().__init__(
            f"{text}: {reason}" if reason else text, {"sessionId": session_id, "trigger": trigger}
        )


class CompactionAborted(RpcError):
    code = -32009
    default_message = "compaction aborted"

    def __init__(self, session_id: str, trigger: str) -> None:
        super().__init__(
            f"compaction ({trigger}) of {session_id} was aborted",
            {"sessionId": session_id, "trigger": trigger},
        )


class SessionExists(RpcError):
    code = -32010
    default_message = "session exists"

    def __init__(self, session_id: str) -> None:
        super().__init__(f"session {session_id} already exists", {"sessionId": session_id})


class StaleResponse(RpcError):
    code = -32011
    default_message = "stale response"

    def __init__(
        self, session_id: str, execution_id: str, request_id: str | None = None, reason: str = ""
    ) -> None:
        data: dict[str, Any] = {"sessionId": session_id, "executionId": execution_id}
        if request_id is not None:
            data["requestId"] = request_id
        super().__init__(f"stale response: {reason}" if reason else "stale response", data)


class EventsLost(RpcError):
    code = -32012
    default_message = "events lost"

    def __init__(self, session_id: str, oldest_seq: int, *, latest_seq: int | None = None) -> None:
        """`latest_seq` given: the asked-for seq lies beyond it (a seq this daemon process
        never published, e.g. one from before a restart), which the message says."""
        if latest_seq is None:
            message = f"events of {session_id} before seq {oldest_seq} are no longer buffered"
        else:
            message = (
                f"events of {session_id} go up to seq {latest_seq} only: a later seq is one "
                "robotad never published since it started (it restarted since?)"
            )
        super().__init__(message, {"sessionId": session_id, "oldestSeq": oldest_seq})


class TransitionRefused(RpcError):
    code = -32013
    default_message = "permission-mode transition refused"

    def __init__(self, session_id: str, mode: str, reason: str) -> None:
        super().__init__(
            f"cannot enter mode {mode}: {reason}",
            {"sessionId": session_id, "mode": mode, "reason": reason},
        )


class NotAllowed(RpcError):
    code = -32014
    default_message = "not allowed"

    def __init__(self, reason: str) -> None:
        super().__init__(reason, {"reason": reason})


class EffectUncertain(RpcError):
    """PROTOCOL.md §10.1: the execution's approved tool was running when robotad stopped, so
    its effect may or may not have happened; it is never run again — abandon the execution."""

    code = -32015
    default_message = "effect uncertain"

    def __init__(self, session_id: str, execution_id: str, calls: list[str]) -> None:
        super().__init__(
            f"execution {execution_id} was running {', '.join(calls)} when robotad stopped: "
            "the outcome is unknown and it is never run again; abandon the execution",
            {"sessionId": session_id, "executionId": execution_id, "calls": calls},
        )


class StorageFailed(RpcError):
    """PROTOCOL.md §10.1: a durable write failed (disk full, read-only, I/O error); nothing
    was half-written and the previous file stands. `path` is relative to the state folder."""

    code = -32016
    default_message = "storage failed"

    def __init__(self, path: str, reason: str, session_id: str | None = None) -> None:
        data: dict[str, Any] = {"path": path, "reason": reason}
        if session_id is not None:
            data = {"sessionId": session_id, **data}
        super().__init__(f"cannot write {path}: {reason}", data)


#: code → class, for `RpcError.from_wire`.
CODES: dict[int, type[RpcError]] = {
    cls.code: cls
    for cls in (
        ParseError,
        InvalidRequest,
        MethodNotFound,
        InvalidParams,
        InternalError,
        RequestCancelled,
        SessionBusy,
        SessionNotFound,
        RecordCorrupt,
        RecordUnsupported,
        ExecutionPending,
        TurnAborted,
        ProviderFailed,
        CompactionFailed,
        CompactionAborted,
        SessionExists,
        StaleResponse,
        EventsLost,
        TransitionRefused,
        NotAllowed,
        EffectUncertain,
        StorageFailed,
    )
}
