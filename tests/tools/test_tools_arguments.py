"""The built-in tools' contract with the loop and the permission gate (PROTOCOL.md §4):
names, argument decoding, JSON Schemas, risk classes and permission argument keys."""

from __future__ import annotations

from typing import Any

import pytest

from robotad.tools import ArgumentError, Tool, ToolProfile, builtin_tools

EXPECTED = {
    "Read": (
        ToolProfile("inspect", "file_path", "path", stored_results=True),
        {"file_path"},
        {"offset", "limit"},
    ),
    "Write": (ToolProfile("modify", "file_path", "path"), {"file_path", "content"}, set()),
    "Edit": (
        ToolProfile("modify", "file_path", "path"),
        {"file_path", "old_string", "new_string"},
        {"replace_all"},
    ),
    "Bash": (ToolProfile("execute", "command", "command"), {"command"}, {"timeout", "description"}),
    "Glob": (ToolProfile("inspect", "path", "path", anchor_key="pattern"), {"pattern"}, {"path"}),
    "Grep": (ToolProfile("inspect", "path", "path"), {"pattern"}, {"path", "glob"}),
    "WebFetch": (ToolProfile("network", "url", "url"), {"url"}, set()),
}

VALID: dict[str, dict[str, Any]] = {
    "Read": {"file_path": "a.txt", "offset": 3, "limit": 10},
    "Write": {"file_path": "a.txt", "content": ""},
    "Edit": {"file_path": "a.txt", "old_string": "a", "new_string": "b", "replace_all": True},
    "Bash": {"command": "ls", "timeout": 1000, "description": "list"},
    "Glob": {"pattern": "**/*.py", "path": "src"},
    "Grep": {"pattern": "def ", "path": "src", "glob": "*.py"},
    "WebFetch": {"url": "https://example.com/"},
}


def _tools() -> dict[str, Tool]:
    return {tool.name: tool for tool in builtin_tools()}


def test_builtin_tools_are_the_seven_of_the_protocol_in_order() -> None:
    assert [tool.name for tool in builtin_tools()] == list(EXPECTED)


@pytest.mark.parametrize("name", list(EXPECTED))
def test_profile_names_risk_and_argument_key(name: str) -> None:
    assert _tools()[name].profile == EXPECTED[name][0]


@pytest.mark.parametrize("name", list(EXPECTED))
def test_schema_lists_exactly_the_protocol_arguments(name: str) -> None:
    _, required, optional = EXPECTED[name]
    schema = _tools()[name].schema
    assert schema.name == name
    assert schema.description
    body = schema.input_schema
    assert body["type"] == "object"
    assert set(body["properties"]) == required | optional
    assert set(body.get("required", [])) == required
    assert body["additionalProperties"] is False
    assert "$ref" not in body
    assert "$defs" not in body


@pytest.mark.parametrize("name", list(EXPECTED))
def test_full_arguments_decode(name: str) -> None:
    decoded = _tools()[name].decode_arguments(VALID[name])
    for key, value in VALID[name].items():
        assert getattr(decoded, key) == value


@pytest.mark.parametrize("name", list(EXPECTED))
def test_unknown_argument_is_refused(name: str) -> None:
    with pytest.raises(ArgumentError, match="unknown field `bogus`"):
        _tools()[name].decode_arguments({**VALID[name], "bogus": 1})


@pytest.mark.parametrize(
    ("name", "missing"),
    [(name, key) for name, (_, required, _) in EXPECTED.items() for key in sorted(required)],
)
def test_missing_required_argument_is_refused(name: str, missing: str) -> None:
    arguments = {k: v for k, v in VALID[name].items() if k != missing}
    with pytest.raises(ArgumentError, match=f"missing required field `{missing}`"):
        _tools()[name].decode_arguments(arguments)


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("Read", {"file_path": "a", "offset": 0}),
        ("Read", {"file_path": "a", "limit": "10"}),
        ("Read", {"file_path": ""}),
        ("Write", {"file_path": "a", "content": None}),
        ("Edit", {"file_path": "a", "old_string": "x", "new_string": "y", "replace_all": "yes"}),
        ("Bash", {"command": "ls", "timeout": 600_001}),
        ("Bash", {"command": "ls", "timeout": 0}),
        ("Bash", {"command": ""}),
        ("Glob", {"pattern": 7}),
        ("Grep", {"pattern": "x", "glob": ""}),
        ("WebFetch", {"url": ["https://example.com"]}),
    ],
)
def test_mistyped_or_out_of_range_argument_is_refused(name: str, arguments: dict[str, Any]) -> None:
    with pytest.raises(ArgumentError, match=f"invalid arguments for {name}"):
        _tools()[name].decode_arguments(arguments)


def test_optional_arguments_may_be_left_out() -> None:
    tools = _tools()
    read = tools["Read"].decode_arguments({"file_path": "a"})
    assert read.file_path == "a"
    edit = tools["Edit"].decode_arguments({"file_path": "a", "old_string": "x", "new_string": "y"})
    assert edit.replace_all is False
