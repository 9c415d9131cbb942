"""Params and result of every method of PROTOCOL.md §5, as msgspec Structs.

Each ``*Params`` Struct is what the daemon decodes a request's params into (unknown members
refused, every constraint expressed with `msgspec.Meta` so a refusal lists each problem with its
path); each result Struct is what it answers. Members are snake_case here and camelCase on the
wire. Optional members either carry the default PROTOCOL.md documents (``permissionMode``
"default", ``wait`` true, ``offset`` 0, ``limit`` 50 for ``history/search``...) or are
`msgspec.UNSET` when absence means something of its own. Params encode with ``omit_defaults``,
so a client sends only what it set.

`METHODS` maps each method name to its ``(Params, Result)`` pair; the protocol reference is
generated from it (``protocol/gen_reference.py``).

Its size is the catalogue: every method's params and result in one place, the single definition
clients and daemon share.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

from msgspec import UNSET, Meta, Struct, UnsetType

from protocol.session_ids import SESSION_ID_PATTERN
from protocol.shapes import (
    MAX_SAFE_INTEGER,
    ContextState,
    Message,
    Pending,
    PermissionMode,
    SandboxMode,
    SessionInfo,
    TurnCompleted,
    TurnRunning,
    TurnWaiting,
    Usage,
)

__all__ = [
    "MCP_SERVER_NAME_MAX",
    "METHODS",
    "PROTOCOL_VERSION",
    "SESSION_ID_PATTERN",
    "AbandonParams",
    "AbandonResult",
    "AbortResult",
    "AddRuleParams",
    "ApprovalResponse",
    "Artifact",
    "Chunks",
    "ClientInfo",
    "CloseResult",
    "CompactParams",
    "CompactResult",
    "Count",
    "CreateParams",
    "DaemonCapabilities",
    "DaemonSessionCounts",
    "DaemonStatus",
    "DeleteResult",
    "Empty",
    "ExportParams",
    "ExportResult",
    "ForkParams",
    "HistoryEntry",
    "HistoryParams",
    "HistoryResult",
    "ImportParams",
    "InitializeParams",
    "InitializeResult",
    "LogProblem",
    "LogResult",
    "MaxRounds",
    "McpListParams",
    "McpListResult",
    "McpServer",
    "McpServerEntry",
    "NamedToolChoice",
    "OkResult",
    "PendingResult",
    "PermissionRules",
    "Permissions",
    "PositiveInt",
    "ResumeParams",
    "RunParams",
    "RunResult",
    "ScriptedToolCall",
    "SearchParams",
    "SearchResult",
    "ServerInfo",
    "SessionId",
    "SessionList",
    "SessionRef",
    "SessionSummary",
    "SetPermissionModeParams",
    "SetPermissionModeResult",
    "ShutdownParams",
    "Step",
    "SubscribeParams",
    "SubscribeResult",
    "ToolChoice",
]

PROTOCOL_VERSION: Final = 1


SessionId = Annotated[
    str,
    Meta(
        pattern=SESSION_ID_PATTERN,
        description="a letter or digit, then up to 127 letters, digits, '.', '_' or '-'",
    ),
]
AbsolutePath = Annotated[str, Meta(pattern=r"^/", description="an absolute path")]
NonEmpty = Annotated[str, Meta(min_length=1)]
Count = Annotated[int, Meta(ge=0, le=MAX_SAFE_INTEGER)]
PositiveInt = Annotated[int, Meta(gt=0, le=MAX_SAFE_INTEGER)]
MaxRounds = Annotated[
    int,
    Meta(
        ge=1,
        le=MAX_SAFE_INTEGER,
        description="provider calls a turn may make before it stops (stopReason maxRounds)",
    ),
]
#: Pieces a scripted step's text streams in.
Chunks = Annotated[int, Meta(ge=1, le=MAX_SAFE_INTEGER)]
Threshold = Annotated[float, Meta(gt=0, le=1, description="a fraction of the context window")]

RuleKind = Literal["allow", "ask", "deny"]
RuleScope = Literal["session", "project"]


class _Params(Struct, rename="camel", forbid_unknown_fields=True, frozen=True, omit_defaults=True):
    """Base of every params Struct."""


class _Result(Struct, rename="camel", forbid_unknown_fields=True, frozen=True):
    """Base of every result Struct (and of the shapes nested in them)."""


class Empty(_Params, frozen=True):
    """Params of a method that takes none (``{}``, absent or null)."""


class OkResult(_Result, frozen=True):
    ok: bool = True


# -- daemon ---------------------------------------------------------------------------------


class ClientInfo(_Params, frozen=True):
    name: str
    version: str


class InitializeParams(_Params, frozen=True):
    """``initialize``: optional handshake; the daemon always answers it."""

    client_info: ClientInfo | UnsetType = UNSET


class ServerInfo(_Result, frozen=True):
    version: str
    name: str = "robotad"


class DaemonCapabilities(_Result, frozen=True):
    framings: list[str]


class InitializeResult(_Result, frozen=True):
    protocol_version: int
    server_info: ServerInfo
    capabilities: DaemonCapabilities


class DaemonSessionCounts(_Result, frozen=True):
    loaded: int
    running: int
    waiting: int


class DaemonStatus(_Result, frozen=True):
    """``daemon/status`` result. `startedAt` is ISO-8601 UTC ending in ``Z``."""

    version: str
    protocol_version: int
    pid: int
    started_at: str
    socket_path: str
    state_dir: str
    sessions: DaemonSessionCounts


class ShutdownParams(_Params, frozen=True):
    """``daemon/shutdown``: answered at once; running turns get `grace_seconds` to finish."""

    grace_seconds: Annotated[float, Meta(ge=0)] = 10


# -- sessions -------------------------------------------------------------------------------


class SessionRef(_Params, frozen=True):
    """Params naming one session: ``session/open``, ``get``, ``close``, ``delete``, ``abort``,
    ``pending``, ``context``, ``unsubscribe``, ``log``."""

    session_id: SessionId


class Permissions(_Params, frozen=True):
    """Rule lists of a new session; each entry a permission pattern (PROTOCOL.md §4). An
    absent list is the configured default."""

    allow: list[str] | UnsetType = UNSET
    ask: list[str] | UnsetType = UNSET
    deny: list[str] | UnsetType = UNSET


class ScriptedToolCall(_Params, frozen=True):
    name: NonEmpty
    arguments: dict[str, Any] = {}


class Step(_Params, frozen=True):
    """One step of the offline ``scripted`` provider (PROTOCOL.md §7).

    Either a reply step ``{text?, toolCalls?, chunks?, delayMs?, error?, usage?}`` or a summary
    step ``{summary, delayMs?}``; a summary step takes no reply member.
    """

    text: str | UnsetType = UNSET
    tool_calls: list[ScriptedToolCall] | UnsetType = UNSET
    chunks: Chunks = 1
    delay_ms: Count = 0
    error: str | UnsetType = UNSET
    usage: Usage | UnsetType = UNSET
    summary: str | UnsetType = UNSET

    def __post_init__(self) -> None:
        if self.summary is not UNSET:
            extra = [
                name
                for name, value in (
                    ("text", self.text),
                    ("toolCalls", self.tool_calls),
                    ("error", self.error),
                    ("usage", self.usage),
                )
                if value is not UNSET
            ]
            if extra or self.chunks != 1:
                raise ValueError("a summary step takes only delayMs besides summary")

    @property
    def is_summary(self) -> bool:
        return self.summary is not UNSET


#: The longest MCP server name robotad takes (``McpServer.name``, ``[mcp_servers.NAME]``): its
#: tools are offered as ``mcp__NAME__TOOL`` in at most 64 characters, and ``mcp__NAME__`` stays
#: whole in each, with room for 16 of the tool's (``robotad.mcp.naming``, decision 68). A
#: client that makes names up (``robotactl acp``) keeps them this short.
MCP_SERVER_NAME_MAX: Final = 41


class McpServer(_Params, frozen=True):
    """A session-scoped MCP server (PROTOCOL.md §10.5): ``{name, command, args?, env?}`` (stdio)
    or ``{name, url, headers?}`` (streamable HTTP). `name` is ``[A-Za-z0-9_-]+``, at most 41
    characters (`MCP_SERVER_NAME_MAX`); its tools are offered as ``mcp__NAME__TOOL``."""

    name: NonEmpty
    command: NonEmpty | UnsetType = UNSET
    args: list[str] | UnsetType = UNSET
    env: dict[str, str] | UnsetType = UNSET
    url: NonEmpty | UnsetType = UNSET
    headers: dict[str, str] | UnsetType = UNSET


class CreateParams(_Params, frozen=True):
    """``session/create``: `cwd` an absolute, existing directory (existence is the daemon's
    check); `session_id` generated when absent. `auto_compact_threshold` is a fraction in
    (0, 1] or false (never compact automatically); absent means the default. `max_rounds`
    bounds the provider calls of each turn (absent: the configured default, else no limit)."""

    cwd: AbsolutePath
    session_id: SessionId | UnsetType = UNSET
    provider: NonEmpty | UnsetType = UNSET
    model: NonEmpty | UnsetType = UNSET
    system_message: str | UnsetType = UNSET
    permission_mode: PermissionMode = "default"
    permissions: Permissions | UnsetType = UNSET
    auto_compact_threshold: Threshold | Literal[False] | UnsetType = UNSET
    context_window: PositiveInt | UnsetType = UNSET
    idle_timeout_ms: PositiveInt | UnsetType = UNSET
    max_rounds: MaxRounds | UnsetType = UNSET
    script: list[Step] | UnsetType = UNSET
    mcp_servers: list[McpServer] | UnsetType = UNSET
    sandbox: SandboxMode | UnsetType = UNSET


class SessionSummary(_Result, frozen=True):
    """One entry of ``session/list``. For a damaged record (`status` not "ok") the members
    that could not be read are null."""

    session_id: str
    cwd: str | None
    created_at: str | None
    updated_at: str | None
    message_count: int | None
    loaded: bool
    running: bool
    waiting: bool
    status: Literal["ok", "corrupt", "unsupported"]
    title: str | UnsetType = UNSET
    forked_from: str | UnsetType = UNSET


class SessionList(_Result, frozen=True):
    """``session/list`` result, newest `updatedAt` first."""

    sessions: list[SessionSummary]


class CloseResult(_Result, frozen=True):
    closed: bool = True


class ForkParams(_Params, frozen=True):
    """``session/fork``: history up to and including `at_message_id` (default: all of it).

    A parked execution is not carried over: each tool call the fork's history would leave
    without a result (the parked round's unanswered calls, or a round cut between a call and
    its result) is closed in the fork by a failed tool result saying it was not carried over.
    The source keeps its pending execution and can still answer it.
    """

    session_id: SessionId
    at_message_id: (
        Annotated[
            NonEmpty,
            Meta(
                description="the source message the fork ends at (default: the last); a "
                "tool call left without a result up to there, such as a parked approval's, is "
                "closed in the fork by a failed 'not carried over' tool result, while the "
                "source keeps its pending approval"
            ),
        ]
        | UnsetType
    ) = UNSET
    new_session_id: SessionId | UnsetType = UNSET


class DeleteResult(_Result, frozen=True):
    deleted: bool = True


# -- turns ----------------------------------------------------------------------------------


class NamedToolChoice(_Params, frozen=True):
    """A tool choice naming the one tool the model must call."""

    name: NonEmpty


ToolChoice = Literal["auto", "none", "required"] | NamedToolChoice


class RunParams(_Params, frozen=True):
    """``session/run``: `turn_id` is an idempotency key; ``wait: false`` answers
    ``{turnId, status: "running"}`` at once. `max_rounds` overrides the session's round limit
    for this turn."""

    session_id: SessionId
    prompt: str
    turn_id: Annotated[str, Meta(min_length=1, max_length=256)] | UnsetType = UNSET
    tool_choice: ToolChoice | UnsetType = UNSET
    system_context: str | UnsetType = UNSET
    max_rounds: MaxRounds | UnsetType = UNSET
    wait: bool = True


#: ``session/run`` and ``session/resume`` results, told apart by ``status``.
RunResult = TurnCompleted | TurnWaiting | TurnRunning


class AbortResult(_Result, frozen=True):
    aborted: bool


class PendingResult(_Result, frozen=True):
    pending: Pending | None


class ApprovalResponse(_Params, frozen=True):
    """A person's answer to one approval request; `responseId` makes redelivery idempotent."""

    request_id: NonEmpty
    response_id: NonEmpty
    approved: bool


class ResumeParams(_Params, frozen=True):
    """``session/resume``: continue a parked execution with the given answers."""

    session_id: SessionId
    execution_id: NonEmpty
    responses: list[ApprovalResponse]


class AbandonParams(_Params, frozen=True):
    """``session/abandon``: drop a parked execution; its open tool calls close as failed."""

    session_id: SessionId
    execution_id: NonEmpty


class AbandonResult(_Result, frozen=True):
    abandoned: bool = True


class CompactParams(_Params, frozen=True):
    session_id: SessionId
    instructions: str | UnsetType = UNSET


class CompactResult(_Result, frozen=True):
    """``compacted: false`` means there was nothing to summarise."""

    compacted: bool
    before: ContextState
    after: ContextState


class HistoryParams(_Params, frozen=True):
    """``session/history``: `limit` absent means to the end."""

    session_id: SessionId
    offset: Count = 0
    limit: Count | UnsetType = UNSET


class HistoryResult(_Result, frozen=True):
    """`total` counts the whole history, not just the page."""

    total: int
    messages: list[Message]


class SetPermissionModeParams(_Params, frozen=True):
    session_id: SessionId
    mode: PermissionMode


class SetPermissionModeResult(_Result, frozen=True):
    mode: PermissionMode


class AddRuleParams(_Params, frozen=True):
    """``session/addRule``: project scope persists for the session's canonical cwd, or fails
    and adds nothing."""

    session_id: SessionId
    rule: NonEmpty
    kind: RuleKind
    scope: RuleScope


class PermissionRules(_Result, frozen=True):
    """The session's rule lists after a change."""

    allow: list[str]
    ask: list[str]
    deny: list[str]


# -- events, export, logs, history ----------------------------------------------------------


class SubscribeParams(_Params, frozen=True):
    """``session/subscribe``: buffered events after `after_seq` come first (or -32012)."""

    session_id: SessionId
    after_seq: Count | UnsetType = UNSET


class SubscribeResult(_Result, frozen=True):
    latest_seq: int


class ExportParams(_Params, frozen=True):
    session_id: SessionId
    redact: bool = False


class Artifact(_Result, frozen=True):
    """An exported session: exactly these four members; `record` is the stored record."""

    schema_version: int
    kind: Literal["robota.session"]
    exported_at: str
    record: dict[str, Any]


class ExportResult(_Result, frozen=True):
    artifact: Artifact


class ImportParams(_Params, frozen=True):
    """``session/import``: the artifact is decoded by the same total decoder as a stored
    record, then held to what a session can go on from, so every defect is refused with its
    path under ``$.artifact``."""

    artifact: dict[str, Any]
    session_id: SessionId | UnsetType = UNSET


class LogProblem(_Result, frozen=True):
    message: str
    line: int | UnsetType = UNSET
    event: str | UnsetType = UNSET


class LogResult(_Result, frozen=True):
    """``session/log``: `entries` log lines decoded; `complete` false whenever a problem was
    found."""

    entries: int
    complete: bool
    problems: list[LogProblem]


class SearchParams(_Params, frozen=True):
    """``history/search``: prompts of every session, newest first."""

    query: str | UnsetType = UNSET
    cwd: str | UnsetType = UNSET
    limit: Count = 50


class HistoryEntry(_Result, frozen=True):
    prompt: str
    session_id: str
    cwd: str
    timestamp: str


class SearchResult(_Result, frozen=True):
    entries: list[HistoryEntry]
    unreadable_lines: int


# -- MCP tool servers (PROTOCOL.md §10.5) ---------------------------------------------------


class McpListParams(_Params, frozen=True):
    """``mcp/list``: the daemon's servers, plus the servers of `session_id` when given (else
    of every loaded session)."""

    session_id: SessionId | UnsetType = UNSET


class McpServerEntry(_Result, frozen=True):
    """One server of ``mcp/list``: `tools` are the names the model sees
    (``mcp__NAME__TOOL``); `error` is the last failure, when there was one, and names each
    tool the server listed that was left out (``tool left out: …``)."""

    name: str
    scope: Literal["daemon", "session"]
    status: Literal["starting", "ready", "failed", "stopped"]
    tools: list[str]
    error: str | UnsetType = UNSET


class McpListResult(_Result, frozen=True):
    servers: list[McpServerEntry]


#: Every method: name → (params type, result type).
METHODS: Final[dict[str, tuple[type[Struct], Any]]] = {
    "initialize": (InitializeParams, InitializeResult),
    "daemon/status": (Empty, DaemonStatus),
    "daemon/shutdown": (ShutdownParams, OkResult),
    "session/create": (CreateParams, SessionInfo),
    "session/open": (SessionRef, SessionInfo),
    "session/get": (SessionRef, SessionInfo),
    "session/list": (Empty, SessionList),
    "session/close": (SessionRef, CloseResult),
    "session/fork": (ForkParams, SessionInfo),
    "session/delete": (SessionRef, DeleteResult),
    "session/run": (RunParams, RunResult),
    "session/abort": (SessionRef, AbortResult),
    "session/pending": (SessionRef, PendingResult),
    "session/resume": (ResumeParams, RunResult),
    "session/abandon": (AbandonParams, AbandonResult),
    "session/compact": (CompactParams, CompactResult),
    "session/history": (HistoryParams, HistoryResult),
    "session/context": (SessionRef, ContextState),
    "session/setPermissionMode": (SetPermissionModeParams, SetPermissionModeResult),
    "session/addRule": (AddRuleParams, PermissionRules),
    "session/subscribe": (SubscribeParams, SubscribeResult),
    "session/unsubscribe": (SessionRef, OkResult),
    "session/export": (ExportParams, ExportResult),
    "session/import": (ImportParams, SessionInfo),
    "session/log": (SessionRef, LogResult),
    "history/search": (SearchParams, SearchResult),
    "mcp/list": (McpListParams, McpListResult),
}
