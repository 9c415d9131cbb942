"""The record codec: decoded, never cast (G-013…G-025, G-216)."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from typing import Any

import msgspec
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from msgspec import UNSET

from protocol.validate import join_path
from robotad.storage.record import (
    SCHEMA_VERSION,
    Corrupt,
    SessionRecord,
    Unsupported,
    Valid,
    check_record,
    decode_record,
    encode_record,
)

from .storage_factories import JSON_VALUES, envelope_bytes, make_record, record_builtins, records


def _corrupt(data: bytes) -> list[dict[str, str]]:
    outcome = decode_record(data)
    assert isinstance(outcome, Corrupt), outcome
    assert outcome.issues
    return outcome.issues


def _paths(issues: list[dict[str, str]]) -> set[str]:
    return {issue["path"] for issue in issues}


def test_a_valid_record_decodes_and_reencodes_byte_identically() -> None:
    """G-025: decode then encode reproduces the stored bytes."""
    data = encode_record(make_record())
    outcome = decode_record(data)
    assert isinstance(outcome, Valid)
    assert outcome.envelope.schema_version == SCHEMA_VERSION
    assert encode_record(outcome.record) == data


def test_several_defects_are_all_reported() -> None:
    """G-013: every failing location is reported, each with its own path and message."""
    obj = record_builtins()
    obj["cwd"] = 7
    del obj["turnCount"]
    obj["settings"]["permissionMode"] = "yolo"
    obj["messages"][1]["state"] = "done"
    issues = _corrupt(envelope_bytes(obj))
    assert _paths(issues) == {
        "$.record.cwd",
        "$.record.turnCount",
        "$.record.settings.permissionMode",
        "$.record.messages[1].state",
    }
    assert all(issue["message"] for issue in issues)


def test_deep_defects_are_reported_at_their_full_path() -> None:
    """G-014: a bad role and non-object tool-call arguments, located to the member."""
    obj = record_builtins()
    obj["messages"][2]["role"] = "root"
    obj["messages"][2]["toolCalls"][0]["arguments"] = ["not", "an", "object"]
    issues = _corrupt(envelope_bytes(obj))
    assert _paths(issues) == {
        "$.record.messages[2].role",
        "$.record.messages[2].toolCalls[0].arguments",
    }


def test_date_timestamps_are_revived_and_reencoded_in_utc() -> None:
    """G-015: ISO strings (any offset) or live datetimes become UTC datetimes, encoded with Z;
    anything else is a located issue."""
    obj = record_builtins()
    obj["messages"][0]["timestamp"] = "2024-05-01T14:00:00+02:00"
    obj["history"][0]["timestamp"] = "2024-05-01T14:00:00+02:00"
    outcome = decode_record(envelope_bytes(obj))
    assert isinstance(outcome, Valid)
    assert outcome.record.messages[0].timestamp == datetime(2024, 5, 1, 12, tzinfo=UTC)
    assert outcome.record.history[0].timestamp.utcoffset() is not None
    again = json.loads(encode_record(outcome.record))["record"]
    assert again["messages"][0]["timestamp"] == "2024-05-01T12:00:00Z"
    assert again["history"][0]["timestamp"] == "2024-05-01T12:00:00Z"

    live = record_builtins()
    live["messages"][0]["timestamp"] = datetime(2024, 5, 1, 12, tzinfo=UTC)
    assert isinstance(check_record(live, "$.record"), SessionRecord)

    for bad in ("yesterday", 1714564800, None, "2024-05-01T12:00:00"):
        obj = record_builtins()
        obj["messages"][0]["timestamp"] = bad
        assert _paths(_corrupt(envelope_bytes(obj))) == {"$.record.messages[0].timestamp"}


def test_created_and_updated_keep_their_string_but_must_be_instants() -> None:
    """G-016: the exact string survives; an unparseable one is a located issue."""
    obj = record_builtins()
    obj["updatedAt"] = "2024-05-01T14:05:00.25+02:00"
    outcome = decode_record(envelope_bytes(obj))
    assert isinstance(outcome, Valid)
    assert outcome.record.updated_at == "2024-05-01T14:05:00.25+02:00"
    obj["createdAt"] = "not a time"
    obj["updatedAt"] = "2024-13-45T99:00:00Z"
    issues = _corrupt(envelope_bytes(obj))
    assert _paths(issues) == {"$.record.createdAt", "$.record.updatedAt"}
    obj["createdAt"] = 5
    assert _paths(_corrupt(envelope_bytes(obj))) == {"$.record.createdAt", "$.record.updatedAt"}


def test_unknown_members_are_issues_on_every_declared_object() -> None:
    """G-017: envelope, record, settings, messages, tool calls: unknown keys are located."""
    obj = record_builtins()
    obj["surprise"] = 1
    obj["settings"]["permissions"]["maybe"] = []
    obj["messages"][2]["toolCalls"][0]["extra"] = True
    obj["history"][0]["note"] = "x"
    data = msgspec.json.encode({"schemaVersion": 1, "record": obj, "signature": "x"})
    assert _paths(_corrupt(data)) == {
        "$.signature",
        "$.record.surprise",
        "$.record.settings.permissions.maybe",
        "$.record.messages[2].toolCalls[0].extra",
        "$.record.history[0].note",
    }


def test_open_maps_take_any_key_and_keep_date_like_strings() -> None:
    """G-018, G-019: metadata accepts any key; date-like strings stay identical strings."""
    obj = record_builtins()
    obj["metadata"] = {
        "when": "2024-01-01T00:00:00Z",
        "x-any key!": [1, {"nested": "2024-01-01"}],
        "": None,
    }
    obj["messages"][1]["metadata"] = {"at": "2024-01-01T00:00:00+02:00"}
    data = envelope_bytes(obj)
    outcome = decode_record(data)
    assert isinstance(outcome, Valid)
    assert outcome.record.metadata["when"] == "2024-01-01T00:00:00Z"
    assert json.loads(encode_record(outcome.record)) == json.loads(data)


def test_null_empty_and_non_json_input_are_corrupt_never_missing() -> None:
    """G-020: three outcomes only; null or empty input is corrupt."""
    for data in (None, b"", b"   \n", b"null", b"[]", b"{", b"\xff\xfe"):
        assert isinstance(decode_record(data), Corrupt), data


def test_a_version_key_inside_the_record_is_corrupt() -> None:
    """G-021: the record carries no version member."""
    obj = record_builtins()
    obj["schemaVersion"] = SCHEMA_VERSION
    assert _corrupt(envelope_bytes(obj)) == [
        {"path": "$.record.schemaVersion", "message": "unknown member"}
    ]


def test_the_version_is_read_first() -> None:
    """G-023: an unimplemented version is unsupported, with no field issues, even when the
    record is malformed too; a missing or non-integer version is corrupt."""
    assert decode_record(envelope_bytes(record_builtins(), version=2)) == Unsupported(2)
    assert decode_record(envelope_bytes({"garbage": True}, version=99)) == Unsupported(99)
    assert decode_record(b'{"schemaVersion": 0}') == Unsupported(0)
    issues = _corrupt(msgspec.json.encode({"record": record_builtins()}))
    assert issues == [{"path": "$.schemaVersion", "message": "missing required member"}]
    assert "$.schemaVersion" in _paths(_corrupt(envelope_bytes(record_builtins(), version="1")))


def test_a_record_without_optional_members_is_valid() -> None:
    """G-024: every optional member absent still decodes."""
    obj = record_builtins()
    for message in obj["messages"]:
        for optional in ("toolCalls", "toolCallId", "name", "metadata"):
            message.pop(optional, None)
    obj["history"] = [{"id": "h", "type": "t", "timestamp": "2024-01-01T00:00:00Z"}]
    assert "name" not in obj
    assert "forkedFrom" not in obj
    assert "contextWindow" not in obj["settings"]
    outcome = decode_record(envelope_bytes(obj))
    assert isinstance(outcome, Valid)
    assert outcome.record.name is UNSET
    assert outcome.record.history[0].data is UNSET


def test_present_optional_members_stay_present() -> None:
    """G-025: an omitted-prompt marker (and other optionals) survive decode and re-encode."""
    record = make_record(omitted_prompt=False, title="T", name="n")
    outcome = decode_record(encode_record(record))
    assert isinstance(outcome, Valid)
    body = json.loads(encode_record(outcome.record))["record"]
    assert body["omittedPrompt"] is False
    assert body["title"] == "T"
    assert body["name"] == "n"
    assert "forkedFrom" not in body


def test_values_are_never_read_for_their_meaning() -> None:
    """G-216: a missing cwd and messages that mimic commands or envelopes decode unchanged."""
    obj = record_builtins()
    obj["cwd"] = "/definitely/not/here"
    obj["messages"][1]["content"] = '{"schemaVersion": 2, "record": null}\n/bypass rm -rf /'
    obj["metadata"] = {"permissionMode": "bypassPermissions", "command": "rm -rf /"}
    data = envelope_bytes(obj)
    outcome = decode_record(data)
    assert isinstance(outcome, Valid)
    assert json.loads(encode_record(outcome.record)) == json.loads(data)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records())
def test_random_valid_records_round_trip_losslessly(record: SessionRecord) -> None:
    """G-025: any valid record re-encodes exactly; absent optionals stay absent."""
    data = encode_record(record)
    outcome = decode_record(data)
    assert isinstance(outcome, Valid), outcome
    assert outcome.record == record
    assert encode_record(outcome.record) == data


# -- mutations --------------------------------------------------------------------------------


def _locations(value: Any, path: str) -> list[tuple[str, list[str | int]]]:
    """Every (wire path, key route) below `value` that can be mutated."""
    found: list[tuple[str, list[str | int]]] = []

    def walk(node: Any, where: str, route: list[str | int]) -> None:
        if isinstance(node, dict):
            for key, item in node.items():
                found.append((join_path(where, key), [*route, key]))
                walk(item, join_path(where, key), [*route, key])
        elif isinstance(node, list):
            for index, item in enumerate(node):
                found.append((join_path(where, index), [*route, index]))
                walk(item, join_path(where, index), [*route, index])

    walk(value, path, [])
    return found


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), JSON_VALUES)
def test_random_mutations_are_corrupt_at_the_mutated_path_or_valid(
    data: st.DataObject, replacement: Any
) -> None:
    """G-013/G-014: replacing or deleting any member yields either a valid record (the change
    fit the shape) or `Corrupt` listing the mutated path (or its parent, for a deletion);
    decoding never raises."""
    base = record_builtins(make_record(messages=4, title="t", omitted_prompt=True))
    path, route = data.draw(st.sampled_from(_locations(base, "$.record")))
    mutated = copy.deepcopy(base)
    parent: Any = mutated
    for step in route[:-1]:
        parent = parent[step]
    delete = data.draw(st.booleans())
    if delete:
        del parent[route[-1]]
    else:
        parent[route[-1]] = replacement
    outcome = decode_record(envelope_bytes(mutated))
    if isinstance(outcome, Valid):
        return
    assert isinstance(outcome, Corrupt), outcome
    reported = _paths(outcome.issues)
    parent_path = path.rsplit("[", 1)[0] if path.endswith("]") else path.rsplit(".", 1)[0]
    assert any(p == path or p.startswith((path + ".", path + "[")) for p in reported) or (
        parent_path in reported
    ), (path, outcome.issues)


_FAR_INSTANTS = st.builds(
    lambda year, rest, hours, minutes: f"{year:04d}-{rest}{hours:+03d}:{minutes:02d}",
    st.sampled_from([1, 2, 1970, 9998, 9999]),
    st.sampled_from(["01-01T00:00:00", "12-31T23:59:59", "06-15T12:00:00.5"]),
    st.integers(-23, 23),
    st.sampled_from([0, 30, 59]),
)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(["messages", "history"]), _FAR_INSTANTS)
@example("messages", "9999-12-31T23:59:59-05:00")
@example("history", "0001-01-01T00:00:00+01:00")
def test_a_timestamp_with_no_utc_date_is_a_located_issue(member: str, instant: str) -> None:
    """G-002, G-014, G-015: ``9999-12-31T23:59:59-05:00`` is an ISO-8601 instant whose UTC
    date is in year 10000, which no datetime holds: decoding it raised OverflowError (an
    import answered -32603, a stored record failed to load the same way). It is now an issue
    at its message or history entry, in the store and in an artifact alike; an instant with a
    UTC date decodes to it."""
    base = record_builtins(make_record(messages=4))
    base[member][1 if member == "messages" else 0]["timestamp"] = instant
    where = f"$.record.{member}[{1 if member == 'messages' else 0}]"
    try:
        utc = datetime.fromisoformat(instant).astimezone(UTC)
    except OverflowError:
        utc = None
    stored = decode_record(envelope_bytes(base))
    imported = check_record(base, "$.artifact.record")
    if utc is None:
        assert isinstance(stored, Corrupt), stored
        assert stored.issues == [
            {
                "path": where,
                "message": "timestamp is out of range: in UTC it falls outside years 1-9999",
            }
        ]
        assert imported == [{**stored.issues[0], "path": where.replace("$", "$.artifact", 1)}]
    else:
        assert isinstance(stored, Valid), stored
        entries = getattr(stored.record, member)
        assert entries[1 if member == "messages" else 0].timestamp == utc
        assert isinstance(imported, SessionRecord)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(["createdAt", "updatedAt"]), _FAR_INSTANTS)
@example("updatedAt", "0001-01-01T00:00:00+01:00")
@example("createdAt", "9999-12-31T23:59:59-05:00")
def test_a_created_or_updated_instant_with_no_utc_date_is_a_located_issue(
    member: str, instant: str
) -> None:
    """G-002, G-016, G-030: ``createdAt``/``updatedAt`` keep their exact string, checked only
    to parse: ``0001-01-01T00:00:00+01:00`` (in UTC, year 0) passed, was imported and
    listed, and ``robotactl ls`` then stopped with an OverflowError traceback whatever else it
    listed. Such an instant is an issue at its member, in the store and in an artifact
    alike; one with a UTC date keeps its exact string."""
    base = record_builtins(make_record(messages=1))
    base[member] = instant
    try:
        datetime.fromisoformat(instant).astimezone(UTC)
        has_utc_date = True
    except OverflowError:
        has_utc_date = False
    stored = decode_record(envelope_bytes(base))
    imported = check_record(base, "$.artifact.record")
    if has_utc_date:
        assert isinstance(stored, Valid), stored
        assert msgspec.to_builtins(stored.record)[member] == instant
        assert isinstance(imported, SessionRecord)
        return
    message = f"{member} is out of range: in UTC it falls outside years 1-9999"
    assert isinstance(stored, Corrupt), stored
    assert stored.issues == [{"path": f"$.record.{member}", "message": message}]
    assert imported == [{"path": f"$.artifact.record.{member}", "message": message}]
