"""The Agent Client Protocol v1 shapes robotactl's agent reads and writes, as msgspec Structs.

Only what the agent uses is modelled. Incoming params (`InitializeParams`, `NewSessionParams`,
…) accept unknown members (``_meta`` and fields of later protocol revisions): an editor is
never refused for sending more than we read. Outgoing shapes omit every unset member, because
the official SDKs check each ``session/update`` against the ACP schema and silently drop one
that fails — an outgoing member is either a valid value or absent, never ``null`` where the
schema wants a string.

Names are camelCase on the wire (``rename="camel"``); the tagged unions use ACP's own
discriminators (``sessionUpdate`` for updates, ``type`` for content, ``outcome`` for a
permission answer).
"""

from __future__ import annotations

from typing import Any, Final, Literal

from msgspec import UNSET, Struct, UnsetType

__all__ = [
    "ACP_PROTOCOL_VERSION",
    "AgentCapabilities",
    "AgentMessageChunk",
    "CancelParams",
    "ContentBlock",
    "ContentItem",
    "CurrentModeUpdate",
    "DiffItem",
    "Implementation",
    "InitializeParams",
    "InitializeResult",
    "ListSessionsParams",
    "ListSessionsResult",
    "ListedSession",
    "LoadSessionParams",
    "LoadSessionResult",
    "McpServerEntry",
    "NameValue",
    "NewSessionParams",
    "NewSessionResult",
    "PermissionOption",
    "PermissionOutcome",
    "PermissionToolCall",
    "PromptParams",
    "PromptResult",
    "RequestPermissionParams",
    "RequestPermissionResult",
    "SessionMode",
    "SessionModeState",
    "SessionNotification",
    "SessionRefParams",
    "SessionUpdate",
    "SetModeParams",
    "StopReason",
    "TextBlock",
    "ToolCall",
    "ToolCallContent",
    "ToolCallUpdate",
    "ToolKind",
    "ToolLocation",
    "ToolStatus",
    "UsageUpdate",
    "UserMessageChunk",
]

#: The ACP protocol version this agent speaks.
ACP_PROTOCOL_VERSION: Final = 1

StopReason = Literal["end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"]
ToolKind = Literal[
    "read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode", "other"
]
ToolStatus = Literal["pending", "in_progress", "completed", "failed"]


class _In(Struct, rename="camel", frozen=True):
    """Base of what the editor sends: unknown members are ignored."""


class _Out(Struct, rename="camel", omit_defaults=True):
    """Base of what the agent sends: unset members are left out."""


# -- content --------------------------------------------------------------------------------


class TextBlock(_Out, tag_field="type", tag="text"):
    text: str


#: An incoming prompt block, kept as the editor sent it (`robotactl.acp.prompt` reads it).
ContentBlock = dict[str, Any]


# -- initialize -----------------------------------------------------------------------------


class Implementation(_Out):
    name: str
    version: str
    title: str | UnsetType = UNSET


class InitializeParams(_In, frozen=True):
    protocol_version: int
    client_info: dict[str, Any] | None = None
    client_capabilities: dict[str, Any] | None = None


class PromptCapabilities(_Out):
    """Every flag is sent (an omitted one reads as false)."""

    image: bool
    audio: bool
    embedded_context: bool


class McpCapabilities(_Out):
    http: bool
    sse: bool


class SessionCapabilities(_Out):
    """Each supported optional method is an (empty) object."""

    list: dict[str, Any]
    resume: dict[str, Any]
    close: dict[str, Any]


class AgentCapabilities(_Out):
    prompt_capabilities: PromptCapabilities
    mcp_capabilities: McpCapabilities
    session_capabilities: SessionCapabilities
    load_session: bool


class InitializeResult(_Out):
    protocol_version: int
    agent_capabilities: AgentCapabilities
    agent_info: Implementation
    auth_methods: list[Any]


# -- sessions -------------------------------------------------------------------------------


class NameValue(_In, frozen=True):
    """An ``env`` variable of a stdio MCP server or a ``headers`` entry of an HTTP one."""

    name: str
    value: str


class McpServerEntry(_In, frozen=True):
    """An editor's MCP server: stdio ``{name, command, args, env}`` or
    ``{type: "http"|"sse", name, url, headers}``."""

    name: str
    type: str | None = None
    command: str | None = None
    args: list[str] | None = None
    env: list[NameValue] | None = None
    url: str | None = None
    headers: list[NameValue] | None = None


class NewSessionParams(_In, frozen=True):
    cwd: str
    mcp_servers: list[McpServerEntry] | None = None


class LoadSessionParams(_In, frozen=True):
    """``session/load`` and ``session/resume``: same members."""

    session_id: str
    cwd: str | None = None
    mcp_servers: list[McpServerEntry] | None = None


class SessionRefParams(_In, frozen=True):
    """``session/close``."""

    session_id: str


class CancelParams(_In, frozen=True):
    session_id: str


class SessionMode(_Out):
    id: str
    name: str
    description: str | UnsetType = UNSET


class SessionModeState(_Out):
    current_mode_id: str
    available_modes: list[SessionMode]


class NewSessionResult(_Out):
    session_id: str
    modes: SessionModeState


class LoadSessionResult(_Out):
    """``session/load`` and ``session/resume`` results."""

    modes: SessionModeState


class SetModeParams(_In, frozen=True):
    session_id: str
    mode_id: str


class ListSessionsParams(_In, frozen=True):
    cwd: str | None = None
    cursor: str | None = None


class ListedSession(_Out):
    session_id: str
    cwd: str
    title: str | UnsetType = UNSET
    updated_at: str | UnsetType = UNSET


class ListSessionsResult(_Out):
    sessions: list[ListedSession]
    next_cursor: str | UnsetType = UNSET


class PromptParams(_In, frozen=True):
    session_id: str
    prompt: list[ContentBlock]


class PromptResult(_Out):
    stop_reason: StopReason


# -- session/update -------------------------------------------------------------------------


class ToolLocation(_Out):
    path: str
    line: int | UnsetType = UNSET


class ContentItem(_Out, tag_field="type", tag="content"):
    """Tool output shown as a content block."""

    content: TextBlock


class DiffItem(_Out, tag_field="type", tag="diff"):
    """A file change; `old_text` absent (or null) for a new file."""

    path: str
    new_text: str
    old_text: str | UnsetType | None = UNSET


ToolCallContent = ContentItem | DiffItem


class _Update(_Out, tag_field="sessionUpdate"):
    """Base of every ``session/update`` payload."""


class UserMessageChunk(_Update, tag="user_message_chunk"):
    content: TextBlock


class AgentMessageChunk(_Update, tag="agent_message_chunk"):
    content: TextBlock


class ToolCall(_Update, tag="tool_call"):
    tool_call_id: str
    title: str
    kind: ToolKind
    status: ToolStatus
    raw_input: dict[str, Any] | UnsetType = UNSET
    locations: list[ToolLocation] | UnsetType = UNSET
    content: list[ToolCallContent] | UnsetType = UNSET


class ToolCallUpdate(_Update, tag="tool_call_update"):
    tool_call_id: str
    status: ToolStatus | UnsetType = UNSET
    title: str | UnsetType = UNSET
    kind: ToolKind | UnsetType = UNSET
    raw_input: dict[str, Any] | UnsetType = UNSET
    locations: list[ToolLocation] | UnsetType = UNSET
    content: list[ToolCallContent] | UnsetType = UNSET


class UsageUpdate(_Update, tag="usage_update"):
    used: int
    size: int


class CurrentModeUpdate(_Update, tag="current_mode_update"):
    current_mode_id: str


SessionUpdate = (
    UserMessageChunk
    | AgentMessageChunk
    | ToolCall
    | ToolCallUpdate
    | UsageUpdate
    | CurrentModeUpdate
)


class SessionNotification(_Out):
    session_id: str
    update: SessionUpdate


# -- permissions ----------------------------------------------------------------------------


class PermissionOption(_Out):
    option_id: str
    name: str
    kind: Literal["allow_once", "allow_always", "reject_once", "reject_always"]


class PermissionToolCall(_Out):
    """The ``toolCall`` of a permission request: a tool-call update without its tag."""

    tool_call_id: str
    title: str
    kind: ToolKind
    status: ToolStatus
    raw_input: dict[str, Any] | UnsetType = UNSET
    locations: list[ToolLocation] | UnsetType = UNSET
    content: list[ToolCallContent] | UnsetType = UNSET


class RequestPermissionParams(_Out):
    session_id: str
    tool_call: PermissionToolCall
    options: list[PermissionOption]


class PermissionOutcome(_In, frozen=True):
    outcome: str
    option_id: str | None = None


class RequestPermissionResult(_In, frozen=True):
    outcome: PermissionOutcome
