"""The session log: append-only JSONL written and read through explicit ports.

Writing (`SessionLogger.log`): the payload is checked against its event's shape
(`log_events.PAYLOADS`, so nothing is written that the reader would refuse), every sensitive key
is redacted at any depth (G-152, by key only: G-220), oversized members go to sidecars
(`sidecars.externalize`, G-153), a member that repeats from line to line — a provider request's
tools, the same schemas on every call — goes to a sidecar once per distinct content and each
line names it (`_SHARED`; a reader resolves it as any sidecar, so the entry it decodes is the
same), and the line is wrapped in the logger-owned envelope
``{schemaVersion, timestamp, sessionId, event, data}``: the payload lives under ``data`` and can
never override an envelope member, whatever names it uses (G-147). Lines are only appended
(G-146), each once the sidecars it names are stored, and in the order they were logged. An
async caller logs a line with `SessionLogger.place`/`store_pending`: a line naming a sidecar
not stored yet (a session's first request, with its tool set; a tool result over the spill
limit) has it created on a worker thread, and the lines logged meanwhile wait behind it, so
the event loop never waits for a sidecar's fsyncs (architecture decisions 62 and 76).
Streamed text goes to the log as ``text_delta`` events (G-148).

Reading (`decode_log`) is total and fails closed (G-150): each line's version is read first,
then its envelope, its sidecars (resolved and verified) and its payload; one bad line fails the
whole decode with `LogDecodeError` listing every bad line by number. `decode_lines` is the same
work reporting problems instead of raising. `decode_each` does that work one line at a time as
the log is read, in pieces when the source can (`PiecewiseLogSource`), keeping nothing it has
handed on: ``session/log`` and the recovery of a cut-off log go through it, so checking a log
of hundreds of thousands of lines holds one line at a time, not the log. A missing log is an
empty log; an unreadable one raises `OSError`.

The ports: a `LogSink` appends a line, stores a sidecar (blocking: perhaps on a worker thread)
and says whether it holds one; a `LogSource` reads the whole log and one sidecar, and a
`PiecewiseLogSource` also reads the log in bounded pieces.
`log_files.FileLogSink`/`FileLogSource` are the file-system adapters; nothing here turns a path
into file access on its own.

Its size is one format in one place: the writer (with the order it keeps while a line waits
for its sidecars) and the reader that must accept exactly what it writes (envelope, sidecars,
shared members) change together.
"""

from __future__ import annotations

import collections
import contextlib
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping
from datetime import datetime
from typing import Any, Final, Protocol, TypedDict, runtime_checkable

import msgspec
import trio
from msgspec import Struct

from protocol.shapes import UtcDatetime, utc_now
from protocol.validate import ValidationFailed, convert

from .handoff import run_blocking
from .log_events import LOG_SCHEMA_VERSION, PAYLOADS, LogEventName
from .scrub import redact_in_place
from .sidecars import (
    DEFAULT_BYTE_BUDGET,
    DEFAULT_DEPTH_LIMIT,
    DEFAULT_SPILL_LIMIT,
    LITERAL_KEY,
    SIDECAR_KEY,
    PayloadSource,
    SidecarError,
    externalize,
    holds_markup,
    may_hold_reference,
    resolve,
    stored,
)

__all__ = [
    "LogDecodeError",
    "LogEntry",
    "LogProblem",
    "LogSink",
    "LogSource",
    "PendingLine",
    "PiecewiseLogSource",
    "SessionLogger",
    "decode_each",
    "decode_lines",
    "decode_log",
    "split_lines",
]


class LogSink(Protocol):
    """Where a session log is written."""

    def append(self, line: bytes) -> None:
        """Append one complete line (without its newline)."""
        ...

    def put_payload(self, content: bytes, sha256: str) -> str:
        """Store a sidecar exclusively and durably (an existing one is identical); return its
        name, which is `sha256`. Blocking: may be called on a worker thread, while the
        thread that owns the sink appends lines and looks for sidecars."""
        ...

    def holds_payload(self, name: str, size: int) -> bool:
        """Whether the sidecar `name` of `size` bytes is stored already (a look; nothing is
        written). A sidecar it holds is one `put_payload` would leave as it is."""
        ...


class LogSource(PayloadSource, Protocol):
    """Where a session log is read from."""

    def read(self) -> bytes | None:
        """The whole log, or None when there is none. Other failures raise `OSError`."""
        ...


@runtime_checkable
class PiecewiseLogSource(LogSource, Protocol):
    """A `LogSource` that can also hand over its log in bounded pieces (`decode_each` then
    reads it so)."""

    def read_pieces(self) -> Generator[bytes, None, None]:
        """The bytes `read` gives, in order, in pieces of a bounded size; none for a missing
        log. A failure to open or read raises `OSError` from the iteration. The caller
        closes the generator it does not run to its end (it may hold a file open)."""
        ...


class LogEntry(Struct, rename="camel", forbid_unknown_fields=True):
    """One decoded line; `data` is the payload with sidecars resolved."""

    schema_version: int
    timestamp: UtcDatetime
    session_id: str
    event: LogEventName
    data: dict[str, Any]


class UnresolvedLogEntry(LogEntry):
    """A line decoded without resolving its sidecars (``resolve_sidecars=False``) whose
    payload still holds a reference or a literal wrapper: it is not shape-checked, and replay
    refuses the history mutation it carries (G-162). Never decoded from a line: only
    `decode_lines` makes one, so a resolved payload holding a marker-shaped value as content
    (a model's tool arguments ``{"$sidecar": …}``) is never taken for one."""


class LogProblem(TypedDict, total=False):
    """One bad line (or replay gap): ``{line?, event?, message}`` (PROTOCOL.md §5)."""

    line: int
    event: str
    message: str


class LogDecodeError(Exception):
    """A log that does not decode completely; `problems` lists every bad line."""

    def __init__(self, problems: list[LogProblem]) -> None:
        self.problems = problems
        first = problems[0] if problems else LogProblem(message="undecodable log")
        where = f"line {first['line']}: " if "line" in first else ""
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        super().__init__(f"session log does not decode: {where}{first['message']}{more}")


# -- writing --------------------------------------------------------------------------------

#: Where a member sits that repeats from line to line, by event: logged as a sidecar, stored
#: once per distinct content. A provider request's tools are its biggest part and the same on
#: every call of a session (5 KB of schemas for the built-in tools, far more with MCP servers).
_SHARED: Final[dict[str, tuple[str, ...]]] = {"provider_request": ("request", "tools")}


class SessionLogger:
    """Writes one session's events to a `LogSink`, in the order they are logged. Not a
    persistence barrier: a sink failure propagates to the caller, who decides whether it
    matters.

    A line is written only once every sidecar it names is stored (`LogSink.put_payload`
    creates one durably), so no line ever names a sidecar that is not there. `log` stores
    them on the calling thread; `place` and `store_pending` (or both at once,
    `store_and_log`), for async callers, on a worker thread, so the event loop never waits
    for a sidecar's fsyncs (architecture decision 62) — and what is logged while they run
    waits behind the line (`_backlog`), so the log's order is the order in which lines were
    logged (placed) either way. A line whose sidecars are all stored already (a look at each
    file, `LogSink.holds_payload`) is written at once, without the thread; a sidecar a placed
    line is still storing is not taken for one (that store may fail and take it back). Placed
    lines have their sidecars stored one line after the other, in the log's order
    (`store_pending` waits for the store of the line placed before), so a sidecar two waiting
    lines name (a tool result's, in its ``history_mutation`` and its ``tool_result``) is
    created once, by the first, and no line is written before a store that created one of its
    sidecars ended; `written` waits until every line logged so far is written."""

    def __init__(
        self,
        session_id: str,
        sink: LogSink,
        *,
        clock: Callable[[], datetime] = utc_now,
        spill_limit: int = DEFAULT_SPILL_LIMIT,
    ) -> None:
        self._session_id = session_id
        self._sink = sink
        self._clock = clock
        self._spill_limit = spill_limit
        self._encoder = msgspec.json.Encoder()
        #: Per shared member's path: its last content as given, that content as stored
        #: (redacted), and the reference it got.
        self._shared: dict[tuple[str, ...], tuple[bytes, bytes, dict[str, Any]]] = {}
        #: Lines logged but not written yet, in order: the first waits for its sidecars (a
        #: `PendingLine`), the others (lines, or more pending ones) behind it. Empty when
        #: every line logged is written.
        self._backlog: collections.deque[bytes | PendingLine] = collections.deque()
        #: The line placed last (`place`): the next one's store waits for its store to end.
        self._last_placed: PendingLine | None = None
        #: The sidecars placed lines still store (name: how many lines store it). A look finds
        #: one such a store has linked, but the store may yet fail and take it back: a line
        #: naming it stores it again, after that store (`_missing`).
        self._unsettled: collections.Counter[str] = collections.Counter()
        #: `close` was called while lines waited: the sink is closed again once they are out.
        self._close_when_written = False

    def log(self, event: LogEventName, data: Mapping[str, Any] | Struct) -> None:
        """Write one event. `data` may hold Structs (messages…) and datetimes. Its sidecars
        are stored on the calling thread; while a line placed before it waits for its own,
        it waits behind that line (and a failure to append it is raised to the call that
        writes it).

        Raises `ValueError` for an event outside the vocabulary and `ValidationFailed` for a
        payload its event's shape refuses (a programming error: the reader would refuse it).
        """
        line, sidecars = self._stage(event, data)
        if sidecars:
            for name, content in self._missing(sidecars):
                self._sink.put_payload(content, name)
        if self._backlog:
            self._backlog.append(line)
        else:
            self._sink.append(line)

    async def store_and_log(self, event: LogEventName, data: Mapping[str, Any] | Struct) -> None:
        """`log`, with the sidecars the line needs created on a worker thread: `place`, then
        `store_pending` when the line must wait for them."""
        pending = self.place(event, data)
        if pending is not None:
            await self.store_pending(pending)

    def place(self, event: LogEventName, data: Mapping[str, Any] | Struct) -> PendingLine | None:
        """Log one event (as `log` does, with its errors) without storing a sidecar here.
        When every sidecar the line names is stored already, it is written now (or behind
        the lines still waiting) and None is returned. Otherwise its place in the log's
        order is taken — every line logged after it waits behind it — and the pending line
        is returned: the caller must hand it to `store_pending`, or the log stops there."""
        line, sidecars = self._stage(event, data)
        missing = self._missing(sidecars) if sidecars else None
        if not missing:
            self._write(line)
            return None
        before = self._last_placed
        pending = PendingLine(event, line, missing, None if before is None else before.stored)
        self._backlog.append(pending)
        self._last_placed = pending
        self._unsettled.update(name for name, _ in missing)
        return pending

    async def store_pending(self, pending: PendingLine) -> None:
        """Store `pending`'s sidecars on a worker thread (`handoff.run_blocking`), once the
        store of the line placed before it has ended (what that one created is not created
        again), then write it and the lines behind it that wait for nothing more. A store
        that started always finishes, even when the caller is cancelled (the line is then
        written, and `Cancelled` comes at the caller's next checkpoint). A store that fails
        drops this line only — the lines behind it are written — and raises its error; a
        line whose append fails is dropped, its error raised too (`_write_ready`)."""
        if pending.done or pending.storing:
            raise ValueError("a pending line is stored once")
        pending.storing = True
        try:
            try:
                with trio.CancelScope(shield=True):
                    if pending.after is not None:
                        await pending.after.wait()  # its line's store: it always ends
                        pending.after = None
                    await run_blocking(self._store, pending.sidecars)
            except BaseException as exc:
                pending.line, pending.done = None, True  # may name a sidecar that is not there
                # Whatever waited behind it is written all the same, and the store's error
                # raised with those of the lines that could not be.
                self._write_ready(*([exc] if isinstance(exc, Exception) else []))
                raise
            pending.done = True
            self._write_ready()
        finally:
            for name, _ in pending.sidecars:
                self._unsettled[name] -= 1
                if not self._unsettled[name]:
                    del self._unsettled[name]
            pending.stored.set()
            if self._last_placed is pending:
                self._last_placed = None

    async def written(self) -> None:
        """Return once every line logged before the call is written (or dropped, its store
        having failed): at once, without a checkpoint, when none waits. Each line placed must
        be handed to `store_pending`, or this never returns."""
        last = self._last_placed
        if last is not None:
            await last.stored.wait()

    def _stage(
        self, event: LogEventName, data: Mapping[str, Any] | Struct
    ) -> tuple[bytes, dict[str, bytes]]:
        """The line for `event` and the sidecars it names (name → content), nothing stored
        or written: the payload checked, redacted, its oversized and shared members turned
        into references."""
        shape = PAYLOADS.get(event)
        if shape is None:
            raise ValueError(f"unknown session-log event {event!r}")
        payload = msgspec.to_builtins(data)
        if not isinstance(payload, dict):
            raise ValueError("a session-log payload must be an object")
        convert(payload, shape)
        path = _SHARED.get(event)
        shared = _detach(payload, path) if path is not None else None
        redact_in_place(payload)  # a fresh tree of plain dicts and lists: ours to change
        sidecars: dict[str, bytes] = {}
        spilled = externalize(payload, _collector(sidecars), limit=self._spill_limit)
        if path is not None and shared is not None:
            spilled = self._attach(spilled, payload, path, shared, sidecars)
        line = self._encoder.encode(
            {
                "schemaVersion": LOG_SCHEMA_VERSION,
                "timestamp": self._clock(),
                "sessionId": self._session_id,
                "event": event,
                "data": spilled,
            }
        )
        return line, sidecars

    def _missing(self, sidecars: dict[str, bytes]) -> list[tuple[str, bytes]]:
        """The sidecars of `sidecars` the sink does not hold yet (a look at each), and those
        a placed line's store has not settled: a store that fails takes back what it linked."""
        return [
            (name, content)
            for name, content in sidecars.items()
            if name in self._unsettled or not self._sink.holds_payload(name, len(content))
        ]

    def _store(self, sidecars: list[tuple[str, bytes]]) -> None:
        """Store `sidecars` (on a worker thread: touches nothing of the logger's own). A
        sidecar the line placed before stored meanwhile is left as it is (`put_payload`)."""
        for name, content in sidecars:
            self._sink.put_payload(content, name)

    def _write(self, line: bytes) -> None:
        """Append `line` now, or behind the lines still waiting for their sidecars."""
        if self._backlog:
            self._backlog.append(line)
        else:
            self._sink.append(line)

    def _write_ready(self, *failed: Exception) -> None:
        """Append the backlog's lines from its start up to the first that still waits. A line
        whose append fails is dropped, the others written; then the errors, those `failed`
        (a failed store's) first, are raised: the one, or every one in an `ExceptionGroup`,
        so each line dropped is counted (a full disk refuses them all)."""
        failures = list(failed)
        while self._backlog:
            head = self._backlog[0]
            if isinstance(head, PendingLine):
                if not head.done:
                    break
                line = head.line
            else:
                line = head
            self._backlog.popleft()
            if line is None:
                continue
            try:
                self._sink.append(line)
            except Exception as exc:
                failures.append(exc)
        if not self._backlog and self._close_when_written:
            self._close_when_written = False
            self.close()
        if len(failures) > 1:
            raise ExceptionGroup("session log lines not written", failures)
        if failures:
            raise failures[0]

    def _attach(
        self,
        spilled: dict[str, Any],
        payload: dict[str, Any],
        path: tuple[str, ...],
        value: Any,
        sidecars: dict[str, bytes],
    ) -> dict[str, Any]:
        """`spilled` with the shared member `value` at `path` as a reference to its sidecar
        (added to `sidecars`); when it cannot be (it spells a sidecar key, or what holds it
        was spilled whole), the payload logged with the member in place, as any other (its
        sidecars in `sidecars` instead of those of `spilled`)."""
        holder = _holder(spilled, path)
        reference = self._reference(path, value, sidecars) if holder is not None else None
        if reference is not None and holder is not None:
            holder[path[-1]] = reference
            return spilled
        redact_in_place(value)
        restored = _holder(payload, path)
        assert restored is not None  # `_detach` took the member from there
        restored[path[-1]] = value
        sidecars.clear()  # those of `spilled`, which is not logged
        return externalize(payload, _collector(sidecars), limit=self._spill_limit)

    def _reference(
        self, path: tuple[str, ...], value: Any, sidecars: dict[str, bytes]
    ) -> dict[str, Any] | None:
        """The sidecar reference for the shared member `value`, its sidecar added to
        `sidecars` (the content redacted the first time it is seen, and remembered); None
        when it cannot be a sidecar."""
        content = self._encoder.encode(value)
        known = self._shared.get(path)
        if known is not None and known[0] == content:
            # Named again, so looked for again before the line is written: the log may have
            # been removed or rotated with its sidecars since, and a line naming a sidecar its
            # log does not have would make the whole log undecodable.
            sidecars[known[2][SIDECAR_KEY]["sha256"]] = known[1]
            return known[2]
        redact_in_place(value)
        redacted = self._encoder.encode(value)
        reference = stored(redacted, _collector(sidecars))
        if reference is not None:
            self._shared[path] = (content, redacted, reference)
        return reference

    def close(self) -> None:
        """Release what the sink holds open, when it has a ``close`` (`FileLogSink` keeps its
        file open between lines); a later `log` may open it again. While lines wait for their
        sidecars, the sink is closed again once they are written."""
        self._close_when_written = bool(self._backlog)
        close = getattr(self._sink, "close", None)
        if close is not None:
            close()


class PendingLine:
    """A line of `event` that `SessionLogger.place` put in the log's order, whose sidecars
    are not stored yet (`sidecars`: name, content); `done` once their store has ended, `line`
    None when it failed (the line is dropped), `stored` set once `store_pending` is over with
    it (the line, and those behind it that wait for nothing more, written). `after`: the
    `stored` of the line placed before it, whose store its own waits for."""

    __slots__ = ("after", "done", "event", "line", "sidecars", "stored", "storing")

    def __init__(
        self,
        event: LogEventName,
        line: bytes,
        sidecars: list[tuple[str, bytes]],
        after: trio.Event | None = None,
    ) -> None:
        self.event = event
        self.line: bytes | None = line
        self.sidecars = sidecars
        self.after = after
        self.done = False
        self.storing = False
        self.stored = trio.Event()


def _collector(sidecars: dict[str, bytes]) -> Callable[[bytes, str], str]:
    """A `put` for `externalize` and `stored` that only notes each sidecar in `sidecars`; a
    sidecar's name is its SHA-256 (`LogSink.put_payload`)."""

    def put(content: bytes, sha256: str) -> str:
        sidecars[sha256] = content
        return sha256

    return put


def _detach(payload: dict[str, Any], path: tuple[str, ...]) -> Any:
    """Take the member at `path` out of `payload` and return it, when it is a nonempty
    object or array; None (and `payload` unchanged) otherwise."""
    holder = _holder(payload, path)
    value = holder.get(path[-1]) if holder is not None else None
    if holder is None or type(value) not in (dict, list) or not value:
        return None
    return holder.pop(path[-1])


def _holder(tree: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any] | None:
    """The object that holds the member at `path` in `tree`: each step a plain object (not
    a sidecar reference or a literal wrapper); None when there is none such."""
    node: Any = tree
    for key in path[:-1]:
        node = node.get(key) if type(node) is dict else None
        if type(node) is not dict or SIDECAR_KEY in node or LITERAL_KEY in node:
            return None
    return node if type(node) is dict else None


# -- reading --------------------------------------------------------------------------------

_entry_decoder = msgspec.json.Decoder(LogEntry)


def decode_log(
    source: LogSource,
    *,
    resolve_sidecars: bool = True,
    depth_limit: int = DEFAULT_DEPTH_LIMIT,
    byte_budget: int = DEFAULT_BYTE_BUDGET,
) -> list[LogEntry]:
    """Every entry of the log, or `LogDecodeError` if any line is bad (never a partial list).

    A missing log decodes as ``[]``. With `resolve_sidecars` false, references stay in place
    and a payload holding one is not shape-checked (replay then refuses it, G-162)."""
    entries, problems = decode_lines(
        source,
        resolve_sidecars=resolve_sidecars,
        depth_limit=depth_limit,
        byte_budget=byte_budget,
    )
    if problems:
        raise LogDecodeError(problems)
    return [entry for _, entry in entries]


def decode_lines(
    source: LogSource,
    *,
    resolve_sidecars: bool = True,
    depth_limit: int = DEFAULT_DEPTH_LIMIT,
    byte_budget: int = DEFAULT_BYTE_BUDGET,
) -> tuple[list[tuple[int, LogEntry]], list[LogProblem]]:
    """Decode every line independently: ``([(line number, entry)], [problem per bad line])``.

    Line numbers start at 1. Only the final newline may end the file; any other empty line is
    a problem. One sidecar resolution (depth limit, byte budget) per line. The log is read
    whole with `source.read` (what this returns holds every entry anyway); `decode_each` is
    the same work one line at a time."""
    data = source.read()
    entries: list[tuple[int, LogEntry]] = []
    problems: list[LogProblem] = []
    pieces = () if data is None else (data,)
    payloads = source if resolve_sidecars else None
    for number, line in enumerate(split_lines(pieces), start=1):
        result = _decode_numbered(number, line, payloads, depth_limit, byte_budget)
        if isinstance(result, LogEntry):
            entries.append((number, result))
        else:
            problems.append(result)
    return entries, problems


def decode_each(
    source: LogSource,
    *,
    resolve_sidecars: bool = True,
    depth_limit: int = DEFAULT_DEPTH_LIMIT,
    byte_budget: int = DEFAULT_BYTE_BUDGET,
) -> Iterator[tuple[int, LogEntry | LogProblem]]:
    """`decode_lines`'s work as the log is read: ``(line number, entry or problem)`` for each
    line in order, the same entries and problems `decode_lines` gives. A `PiecewiseLogSource`
    is read in pieces, so what this holds at once is one piece and the line being decoded,
    however long the log; any other source is read whole. `OSError` (the log cannot be read)
    comes from the iteration, possibly after some lines were given."""
    payloads = source if resolve_sidecars else None
    pieces = source.read_pieces() if isinstance(source, PiecewiseLogSource) else _whole(source)
    with contextlib.closing(pieces):
        for number, line in enumerate(split_lines(pieces), start=1):
            yield number, _decode_numbered(number, line, payloads, depth_limit, byte_budget)


def _whole(source: LogSource) -> Generator[bytes, None, None]:
    data = source.read()
    if data is not None:
        yield data


def split_lines(pieces: Iterable[bytes]) -> Iterator[bytes]:
    """The lines of the bytes `pieces` make together, wherever they are cut: what
    ``b"".join(pieces).split(b"\\n")`` gives without the empty last part a final newline
    leaves (no lines for no bytes). A line is held only until it is given, however many
    pieces it spans."""
    pending = bytearray()
    for piece in pieces:
        end = piece.find(b"\n")
        if end < 0:
            pending += piece
            continue
        if pending:
            pending += piece[:end]
            yield bytes(pending)
            pending.clear()
        else:
            yield piece[:end]
        start = end + 1
        while (end := piece.find(b"\n", start)) >= 0:
            yield piece[start:end]
            start = end + 1
        pending += piece[start:]
    if pending:
        yield bytes(pending)


def _decode_numbered(
    number: int, line: bytes, source: PayloadSource | None, depth_limit: int, byte_budget: int
) -> LogEntry | LogProblem:
    """Line `number` decoded: its entry, or its problem with ``line`` set."""
    result = _decode_line(line, source, depth_limit, byte_budget)
    if not isinstance(result, LogEntry):
        result["line"] = number
    return result


def _decode_line(
    line: bytes, source: PayloadSource | None, depth_limit: int, byte_budget: int
) -> LogEntry | LogProblem:
    if not line.strip():
        return LogProblem(message="empty line")
    try:
        entry = _entry_decoder.decode(line)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return _explain_bad_envelope(line)
    if entry.schema_version != LOG_SCHEMA_VERSION:
        return LogProblem(
            event=entry.event, message=f"unsupported schema version {entry.schema_version}"
        )
    if not may_hold_reference(line):
        pass  # nothing to resolve: a payload nested however deep is taken as decoded
    elif source is not None:
        try:
            resolved = resolve(entry.data, source, depth_limit=depth_limit, byte_budget=byte_budget)
        except SidecarError as exc:
            return LogProblem(event=entry.event, message=f"sidecar refused ({exc.code}): {exc}")
        except RecursionError:
            return LogProblem(event=entry.event, message=_TOO_DEEP_TO_RESOLVE)
        entry.data = resolved
    elif holds_markup(entry.data):
        # Unresolved on request: the payload cannot be checked, and replay refuses it.
        return UnresolvedLogEntry(*msgspec.structs.astuple(entry))
    try:
        convert(entry.data, PAYLOADS[entry.event])
    except ValidationFailed as exc:
        return LogProblem(event=entry.event, message=_payload_message(exc))
    return entry


#: A payload that refers to sidecars and nests deeper than resolving can follow.
_TOO_DEEP_TO_RESOLVE = "a payload with sidecars nests too deeply to resolve"


def _explain_bad_envelope(line: bytes) -> LogProblem:
    """Why a line's envelope failed, version first (no field issues for another version)."""
    try:
        parsed = msgspec.json.decode(line)
    except msgspec.DecodeError as exc:
        return LogProblem(message=f"not JSON: {exc}")
    if not isinstance(parsed, dict):
        return LogProblem(message="a log line must be a JSON object")
    problem = LogProblem()
    if isinstance(parsed.get("event"), str):
        problem["event"] = parsed["event"]
    version = parsed.get("schemaVersion")
    if "schemaVersion" not in parsed:
        problem["message"] = "missing schema version"
    elif type(version) is not int:
        problem["message"] = "schema version is not an integer"
    elif version != LOG_SCHEMA_VERSION:
        problem["message"] = f"unsupported schema version {version}"
    else:
        try:
            convert(parsed, LogEntry)
            problem["message"] = "malformed envelope"
        except ValidationFailed as exc:
            problem["message"] = "; ".join(f"{i['path']}: {i['message']}" for i in exc.issues)
    return problem


def _payload_message(exc: ValidationFailed) -> str:
    return "; ".join(f"$.data{i['path'][1:]}: {i['message']}" for i in exc.issues)
