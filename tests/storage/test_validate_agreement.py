"""The slow walker agrees with msgspec: it finds an issue exactly when msgspec rejects."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from msgspec import UNSET, Meta, Struct, UnsetType

from protocol.shapes import Message, TurnResult
from protocol.validate import ValidationFailed, collect_issues, decode_json


class Leaf(Struct, rename="camel", forbid_unknown_fields=True):
    short_name: Annotated[str, Meta(max_length=4)]
    level: Annotated[int, Meta(ge=0)] = 0


class Tree(Struct, rename="camel", forbid_unknown_fields=True):
    name: str
    score: float | None
    kind: Literal["x", "y"]
    when: Annotated[datetime, Meta(tz=True)]
    leaves: list[Leaf]
    table: dict[str, int]
    extra: dict[str, Any] | UnsetType = UNSET
    flag: bool | UnsetType = UNSET


KEYS = [
    "id",
    "role",
    "content",
    "state",
    "timestamp",
    "toolCalls",
    "toolCallId",
    "name",
    "metadata",
    "arguments",
    "rawArguments",
    "score",
    "kind",
    "when",
    "leaves",
    "table",
    "extra",
    "flag",
    "shortName",
    "level",
    "status",
    "turnId",
    "response",
    "executionId",
    "requests",
    "requestId",
    "tool",
    "reason",
]
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-5, max_value=5),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.sampled_from(
        [
            "",
            "x",
            "y",
            "abcde",
            "user",
            "assistant",
            "tool",
            "complete",
            "interrupted",
            "completed",
            "waiting",
            "2024-01-01T00:00:00Z",
            "2024-01-01T00:00:00",
            "2024-13-01T00:00:00Z",
        ]
    ),
    st.text(max_size=5),
)
JSON = st.recursive(
    SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=3),
        st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=3), children, max_size=6),
    ),
    max_leaves=25,
)


def _agrees(value: Any, type_: Any) -> None:
    data = msgspec.json.encode(value)
    try:
        msgspec.json.decode(data, type=type_)
        accepted = True
    except msgspec.ValidationError:
        accepted = False
    walker = collect_issues(msgspec.json.decode(data), type_)
    # Where the walker has nothing to say, decode_json still reports msgspec's message, so
    # agreement means: a valid value has no issues; an invalid one always raises with ≥1 issue.
    if accepted:
        assert walker == [], walker
    else:
        with pytest.raises(ValidationFailed) as caught:
            decode_json(data, type_)
        assert caught.value.issues
        assert walker, f"walker found nothing for {value!r}"


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from(KEYS), JSON, max_size=10))
def test_walker_agrees_with_msgspec_on_random_objects(value: dict[str, Any]) -> None:
    for type_ in (Message, Tree, Leaf, TurnResult):
        _agrees(value, type_)


def _near_valid_message() -> st.SearchStrategy[dict[str, Any]]:
    base = {
        "id": st.text(max_size=3),
        "role": st.sampled_from(["user", "assistant", "tool", "system"]),
        "content": st.one_of(st.none(), st.text(max_size=3)),
        "state": st.sampled_from(["complete", "interrupted"]),
        "timestamp": st.just("2024-01-01T00:00:00Z"),
    }
    return st.fixed_dictionaries(
        base,
        optional={
            "toolCalls": st.lists(
                st.fixed_dictionaries(
                    {"id": st.text(max_size=2), "name": st.text(max_size=2)},
                    optional={"arguments": st.dictionaries(st.text(max_size=2), JSON)},
                ),
                max_size=2,
            ),
            "metadata": st.dictionaries(st.text(max_size=3), JSON, max_size=3),
        },
    )


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_near_valid_message(), st.sampled_from(KEYS), JSON, st.booleans())
def test_walker_agrees_with_msgspec_on_mutated_messages(
    message: dict[str, Any], key: str, replacement: Any, delete: bool
) -> None:
    if delete:
        message.pop(key, None)
    else:
        message[key] = replacement
    _agrees(message, Message)
    _agrees([message], list[Message])
