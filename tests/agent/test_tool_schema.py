"""A typed tool's JSON Schema is generated from its argument Struct once per Struct type (every
session lists its tools), and each reader gets a dict of its own."""

from __future__ import annotations

from typing import ClassVar

import msgspec
import pytest
from msgspec import Struct

from robotad.agent import tool as tool_module
from robotad.agent.tool import TypedTool


class _Arguments(Struct, forbid_unknown_fields=True):
    path: str
    limit: int | None = None


class _Tool(TypedTool[_Arguments]):
    name: ClassVar[str] = "probe"
    description: ClassVar[str] = "probe"
    Arguments: ClassVar[type[Struct]] = _Arguments


def test_the_schema_is_generated_once_and_each_reader_gets_its_own_copy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    generated: list[type] = []
    real = msgspec.json.schema

    def counting(struct: type) -> object:
        generated.append(struct)
        return real(struct)

    monkeypatch.setattr(tool_module.msgspec.json, "schema", counting)
    tool_module._encoded_schema.cache_clear()
    first = _Tool().schema.input_schema
    first["properties"]["path"]["type"] = "changed"  # a reader's own copy
    second = _Tool().schema.input_schema
    assert generated == [_Arguments]
    assert second["properties"]["path"] == {"type": "string"}
    assert second["required"] == ["path"]
    assert "title" not in second
    assert "$defs" not in second
