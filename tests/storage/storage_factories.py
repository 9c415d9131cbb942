"""Builders of valid session records (as Structs and as JSON builtins) for the storage tests."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import msgspec
from hypothesis import strategies as st
from msgspec import UNSET

from protocol.shapes import Message, ToolCall, Usage
from robotad.storage.record import (
    ForkedFrom,
    HistoryEntry,
    Permissions,
    SessionRecord,
    SessionSettings,
    StoredToolSchema,
)

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


def make_record(session_id: str = "s-1", *, messages: int = 3, **changes: Any) -> SessionRecord:
    """A valid record with a few messages of every role and every optional member absent."""
    history: list[Message] = [Message("m-0", "system", "You are terse.", "complete", T0)]
    for index in range(1, messages):
        if index % 3 == 1:
            history.append(Message(f"m-{index}", "user", f"question {index}", "complete", T0))
        elif index % 3 == 2:
            call = ToolCall(f"c-{index}", "Read", {"file_path": "/etc/hosts"})
            reply = Message(f"m-{index}", "assistant", None, "complete", T0, tool_calls=[call])
            reply.metadata = {"usage": msgspec.to_builtins(Usage(10, 2))}
            history.append(reply)
        else:
            result = Message(f"m-{index}", "tool", "127.0.0.1 localhost", "complete", T0)
            result.tool_call_id = f"c-{index - 1}"
            result.name = "Read"
            result.metadata = {"ok": True}
            history.append(result)
    record = SessionRecord(
        id=session_id,
        cwd="/home/user/project",
        created_at="2024-05-01T12:00:00Z",
        updated_at="2024-05-01T12:05:00.250Z",
        messages=history,
        history=[HistoryEntry("h-1", "mode_change", T0, {"mode": "plan"})],
        system_prompt="You are terse.",
        tool_schemas=[
            StoredToolSchema(
                "Read", "Read a file", {"type": "object", "properties": {"file_path": {}}}
            )
        ],
        settings=SessionSettings(
            provider="scripted",
            model="scripted-1",
            permission_mode="default",
            permissions=Permissions(allow=["Read(*)"], ask=[], deny=["Bash(rm:*)"]),
            auto_compact_threshold=0.835,
        ),
        turn_count=1,
        metadata={},
    )
    return msgspec.structs.replace(record, **changes) if changes else record


def record_builtins(record: SessionRecord | None = None) -> dict[str, Any]:
    """The JSON form of a record (camelCase keys, ISO strings)."""
    result = msgspec.to_builtins(record if record is not None else make_record())
    assert isinstance(result, dict)
    return result


def envelope_bytes(record_obj: dict[str, Any], version: Any = 1) -> bytes:
    return msgspec.json.encode({"schemaVersion": version, "record": record_obj})


# -- hypothesis ---------------------------------------------------------------------------

JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**40), 2**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
    | st.sampled_from(["2024-01-01T00:00:00Z", "2024-01-01", "[REDACTED]"]),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=12,
)
OPEN_MAPS = st.dictionaries(st.text(max_size=8), JSON_VALUES, max_size=4)
INSTANTS = st.datetimes(
    min_value=datetime(1971, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
)
UNSET_OR = st.just(UNSET)


@st.composite
def messages(draw: st.DrawFn) -> Message:
    message = Message(
        id=draw(st.text(min_size=1, max_size=6)),
        role=draw(st.sampled_from(["system", "user", "assistant", "tool"])),
        content=draw(st.none() | st.text(max_size=20)),
        state=draw(st.sampled_from(["complete", "interrupted"])),
        timestamp=draw(INSTANTS),
    )
    if draw(st.booleans()):
        calls = draw(
            st.lists(
                st.builds(
                    ToolCall,
                    id=st.text(min_size=1, max_size=4),
                    name=st.text(min_size=1, max_size=6),
                    arguments=OPEN_MAPS,
                    raw_arguments=UNSET_OR | st.text(max_size=6),
                ),
                max_size=2,
            )
        )
        message.tool_calls = calls
    if draw(st.booleans()):
        message.tool_call_id = draw(st.text(max_size=4))
    if draw(st.booleans()):
        message.name = draw(st.text(max_size=4))
    if draw(st.booleans()):
        message.metadata = draw(OPEN_MAPS)
    return message


@st.composite
def records(draw: st.DrawFn) -> SessionRecord:
    """Random valid records, optional members present or absent at random."""
    settings = SessionSettings(
        provider=draw(st.text(max_size=8)),
        model=draw(st.text(max_size=8)),
        permission_mode=draw(
            st.sampled_from(["default", "acceptEdits", "plan", "bypassPermissions", "auto"])
        ),
        permissions=Permissions(
            allow=draw(st.lists(st.text(max_size=8), max_size=2)),
            ask=draw(st.lists(st.text(max_size=8), max_size=2)),
            deny=draw(st.lists(st.text(max_size=8), max_size=2)),
        ),
        auto_compact_threshold=draw(
            st.just(False) | st.floats(min_value=0.01, max_value=1.0, allow_nan=False)
        ),
        context_window=draw(UNSET_OR | st.integers(1, 10**7)),
        idle_timeout_ms=draw(UNSET_OR | st.integers(1, 10**7)),
        script=draw(UNSET_OR | st.lists(OPEN_MAPS, max_size=2)),
    )
    stamp = draw(INSTANTS)
    iso = msgspec.to_builtins(stamp)
    return SessionRecord(
        id=draw(st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,20}", fullmatch=True)),
        cwd=draw(st.text(max_size=12)),
        created_at=iso,
        updated_at=draw(st.sampled_from([iso, stamp.isoformat(), "2030-02-03T04:05:06+05:30"])),
        messages=draw(st.lists(messages(), max_size=4)),
        history=draw(
            st.lists(
                st.builds(
                    HistoryEntry,
                    id=st.text(max_size=4),
                    type=st.text(max_size=6),
                    timestamp=INSTANTS,
                    data=UNSET_OR | OPEN_MAPS,
                ),
                max_size=2,
            )
        ),
        system_prompt=draw(st.none() | st.text(max_size=10)),
        tool_schemas=draw(
            st.lists(
                st.builds(
                    StoredToolSchema,
                    name=st.text(max_size=5),
                    description=st.text(max_size=5),
                    input_schema=OPEN_MAPS,
                ),
                max_size=2,
            )
        ),
        settings=settings,
        turn_count=draw(st.integers(0, 1000)),
        metadata=draw(OPEN_MAPS),
        name=draw(UNSET_OR | st.text(max_size=6)),
        title=draw(UNSET_OR | st.text(max_size=6)),
        forked_from=draw(
            UNSET_OR
            | st.builds(ForkedFrom, session_id=st.text(max_size=4), message_id=st.text(max_size=4))
        ),
        omitted_prompt=draw(UNSET_OR | st.booleans()),
    )
