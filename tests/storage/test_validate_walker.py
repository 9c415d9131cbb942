"""The two-speed strict decoder (architecture decision 3): every type kind, every issue at once."""

from __future__ import annotations

import enum
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

import msgspec
import pytest
from msgspec import UNSET, Meta, Struct, UnsetType

from protocol.shapes import Message, TurnResult
from protocol.validate import ValidationFailed, collect_issues, convert, decode_json, join_path


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Inner(Struct, rename="camel", forbid_unknown_fields=True):
    short_name: Annotated[str, Meta(min_length=1, max_length=3)]
    count: Annotated[int, Meta(ge=0, lt=10)] = 0


class Outer(Struct, rename="camel", forbid_unknown_fields=True):
    name: Annotated[str, Meta(pattern="^[a-z]+$")]
    ratio: Annotated[float, Meta(gt=0.0, le=1.0)]
    flag: bool
    nothing: None
    when: Annotated[datetime, Meta(tz=True)]
    inner: Inner
    items: Annotated[list[int], Meta(max_length=2)]
    table: dict[str, Inner]
    maybe: int | None
    mode: Literal["a", "b"]
    color: Color
    anything: Any
    open_map: dict[str, Any]
    pair: tuple[int, str]
    keyed: dict[int, str]
    later: str | UnsetType = UNSET


class Lenient(Struct):
    a: int


def _valid_outer() -> dict[str, Any]:
    return {
        "name": "abc",
        "ratio": 0.5,
        "flag": True,
        "nothing": None,
        "when": "2024-05-01T10:00:00Z",
        "inner": {"shortName": "x"},
        "items": [1, 2],
        "table": {"k": {"shortName": "y", "count": 3}},
        "maybe": None,
        "mode": "a",
        "color": "red",
        "anything": {"deep": [1, {"x": None}]},
        "openMap": {"date": "2024-01-01"},
        "pair": [1, "x"],
        "keyed": {"1": "one"},
    }


def _issues(data: bytes | str, type_: Any) -> list[dict[str, str]]:
    with pytest.raises(ValidationFailed) as caught:
        decode_json(data, type_)
    assert caught.value.issues, "a rejection always carries at least one issue"
    return caught.value.issues


def _paths(issues: list[dict[str, str]]) -> set[str]:
    return {issue["path"] for issue in issues}


def test_valid_value_takes_the_fast_path_and_keeps_absent_members_absent() -> None:
    value = decode_json(msgspec.json.encode(_valid_outer()), Outer)
    assert value.later is UNSET
    assert value.when == datetime(2024, 5, 1, 10, tzinfo=UTC)
    assert value.keyed == {1: "one"}
    assert value.color is Color.RED


@pytest.mark.parametrize(
    ("member", "bad", "message_part"),
    [
        ("name", 3, "expected string, got integer"),
        ("name", "ABC", "pattern"),
        ("ratio", "x", "expected number, got string"),
        ("ratio", 0, "expected > 0.0"),
        ("ratio", 2.5, "expected <= 1.0"),
        ("flag", 1, "expected boolean, got integer"),
        ("nothing", False, "expected null, got boolean"),
        ("when", "2024-05-01T10:00:00", "timezone-aware"),
        ("when", "yesterday", "date-time"),
        ("when", 17, "got integer"),
        ("inner", [], "expected object, got array"),
        ("items", [1, 2, 3], "at most 2 items"),
        ("items", {"a": 1}, "expected array, got object"),
        ("maybe", 1.5, "expected integer or null, got number"),
        ("mode", "c", 'expected one of "a", "b"'),
        ("mode", 1, "got integer"),
        ("color", "green", 'expected one of "red", "blue"'),
        ("openMap", [], "expected object, got array"),
        ("pair", [1], "expected array of 2 items"),
        ("later", None, "expected string, got null"),
    ],
)
def test_each_kind_reports_a_located_human_issue(member: str, bad: Any, message_part: str) -> None:
    data = _valid_outer()
    data[member] = bad
    issues = _issues(msgspec.json.encode(data), Outer)
    assert [i["path"] for i in issues] == [f"$.{member}"]
    assert message_part in issues[0]["message"]


def test_nested_constraints_and_map_keys_are_located() -> None:
    data = _valid_outer()
    data["inner"] = {"shortName": "", "count": 10}
    data["table"] = {"key with spaces": {"shortName": "toolong"}}
    data["keyed"] = {"x": "one"}
    issues = _issues(msgspec.json.encode(data), Outer)
    assert issues == [
        {"path": "$.inner.shortName", "message": "expected at least 1 character"},
        {"path": "$.inner.count", "message": "expected < 10"},
        {
            "path": '$.table["key with spaces"].shortName',
            "message": "expected at most 3 characters",
        },
        {"path": "$.keyed.x", "message": "key: expected integer"},
    ]


def test_every_issue_is_collected_at_once() -> None:
    data = _valid_outer()
    del data["flag"]
    data["name"] = 1
    data["items"] = [1, "two"]
    data["surplus"] = True
    data["x-api-key"] = "hidden"
    issues = _issues(msgspec.json.encode(data), Outer)
    assert _paths(issues) == {"$.name", "$.flag", "$.items[1]", "$.surplus", '$["x-api-key"]'}
    by_path = {i["path"]: i["message"] for i in issues}
    assert by_path["$.flag"] == "missing required member"
    assert by_path["$.surplus"] == "unknown member"


def test_messages_never_echo_the_offending_value() -> None:
    data = _valid_outer()
    data["mode"] = "sk-secret-value"
    data["name"] = "sk-secret-value"
    issues = _issues(msgspec.json.encode(data), Outer)
    assert all("sk-secret-value" not in issue["message"] for issue in issues)


def test_syntax_error_is_one_issue_at_the_root() -> None:
    assert _issues(b'{"name": ', Outer) == [
        {"path": "$", "message": "invalid JSON: Input data was truncated"}
    ]
    assert _issues("", Outer)[0]["path"] == "$"


def test_a_number_no_value_holds_is_located_where_it_stands() -> None:
    """Valid JSON the untyped decode cannot hold (``1e400``) is named at its member, as the
    typed decode found it (it was one issue at ``$``, "invalid JSON")."""

    class Page(Struct):
        offset: int = 0
        limits: list[int] = []

    for text, path in (
        (b'{"offset": 1e400}', "$.offset"),
        (b'{"limits": [1, -1e999]}', "$.limits[1]"),
    ):
        with pytest.raises(ValidationFailed) as refused:
            decode_json(text, Page)
        assert refused.value.issues == [{"path": path, "message": "number out of range"}]


def test_unknown_members_are_ignored_unless_forbidden() -> None:
    assert decode_json(b'{"a": 1, "b": 2}', Lenient) == Lenient(1)
    assert _issues(b'{"b": 2}', Lenient) == [{"path": "$.a", "message": "missing required member"}]


def test_tagged_union_dispatches_on_the_tag() -> None:
    issues = _issues(b'{"status": "waiting", "turnId": 1}', TurnResult)
    assert issues == [
        {"path": "$.turnId", "message": "expected string, got integer"},
        {"path": "$.executionId", "message": "missing required member"},
        {"path": "$.requests", "message": "missing required member"},
    ]
    assert _issues(b'{"status": "gone"}', TurnResult) == [
        {"path": "$.status", "message": 'expected one of "completed", "waiting"'}
    ]
    assert _issues(b'{"turnId": "t"}', TurnResult) == [
        {"path": "$.status", "message": "missing required member"}
    ]


def test_message_shape_from_protocol() -> None:
    data = {
        "id": "m-1",
        "role": "robot",
        "content": 5,
        "state": "complete",
        "timestamp": "2024-01-01T00:00:00Z",
        "toolCalls": [{"id": "c", "name": "Read", "arguments": [], "rawArguments": 3}],
    }
    issues = _issues(msgspec.json.encode(data), Message)
    assert _paths(issues) == {
        "$.role",
        "$.content",
        "$.toolCalls[0].arguments",
        "$.toolCalls[0].rawArguments",
    }


def test_convert_runs_the_same_walker_on_builtins() -> None:
    good = {"id": "m", "role": "user", "content": "hi", "state": "complete"}
    good["timestamp"] = "2024-01-01T00:00:00+02:00"
    message = convert(good, Message)
    assert message.timestamp == datetime(2023, 12, 31, 22, tzinfo=UTC)
    with pytest.raises(ValidationFailed) as caught:
        convert({**good, "role": None, "state": 1}, Message)
    assert _paths(caught.value.issues) == {"$.role", "$.state"}


def test_walker_falls_back_to_msgspecs_message_when_it_has_nothing_to_say() -> None:
    class Checked(Struct):
        n: int

        def __post_init__(self) -> None:
            if self.n == 13:
                raise ValueError("unlucky")

    issues = _issues(b'{"n": 13}', Checked)
    assert issues == [{"path": "$", "message": "unlucky"}]
    # Duplicate keys: msgspec sees the first, the parsed dict keeps the last.
    issues = _issues(b'{"a": "x", "a": 1}', dict[str, int])
    assert issues == [{"path": "$[...]", "message": "Expected `int`, got `str`"}]


def test_collect_issues_is_empty_for_a_valid_value() -> None:
    assert collect_issues(_valid_outer(), Outer) == []
    assert collect_issues({"x": [1, 2]}, dict[str, list[int]]) == []


def test_paths_quote_non_identifier_keys() -> None:
    assert join_path("$", "member") == "$.member"
    assert join_path("$", 3) == "$[3]"
    assert join_path("$.m", "key with spaces") == '$.m["key with spaces"]'
    assert join_path("$", "1st") == '$["1st"]'
    assert join_path("$", 'a"b') == '$["a\\"b"]'


def test_validation_failed_summarises_the_first_issue() -> None:
    exc = ValidationFailed([{"path": "$.a", "message": "m"}, {"path": "$.b", "message": "n"}])
    assert str(exc) == "$.a: m (and 1 more)"


def test_boolean_literal_in_a_union() -> None:
    threshold = Annotated[float, Meta(gt=0.0, le=1.0)] | Literal[False]
    assert decode_json(b"false", threshold) is False
    assert decode_json(b"0.5", threshold) == 0.5
    assert _issues(b"true", threshold) == [
        {"path": "$", "message": "expected number or one of false, got another boolean"}
    ]
    assert _issues(b"0", threshold) == [{"path": "$", "message": "expected > 0.0"}]
    assert _issues(b'"x"', threshold) == [
        {"path": "$", "message": "expected number or one of false, got string"}
    ]
