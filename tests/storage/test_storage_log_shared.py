"""A provider request's tools go to the session log once: a sidecar per distinct tool set,
each ``provider_request`` line naming it (G-144, G-153), redacted as any member (G-152); a
reader decodes the same entries as when the tools were written inline."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from robotad.storage.log_files import FileLogSink, FileLogSource, log_paths
from robotad.storage.session_log import SessionLogger, decode_log
from robotad.storage.sidecars import SIDECAR_KEY

SID = "s-shared"
T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def logs(tmp_path: Path) -> Path:
    return tmp_path / "state" / "logs"


def _logger(logs: Path, *, limit: int = 64 * 1024) -> SessionLogger:
    sink = FileLogSink.for_session(logs, SID)
    return SessionLogger(SID, sink, clock=lambda: T0, spill_limit=limit)


def _tool(name: str, **properties: Any) -> dict[str, Any]:
    return {
        "name": name,
        "description": f"The {name} tool: " + "a long description. " * 20,
        "input_schema": {
            "type": "object",
            "properties": properties or {"path": {"type": "string"}},
        },
    }


def _request(index: int, tools: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "requestId": f"req-{index}",
        "provider": "scripted",
        "model": "scripted",
        "request": {"history_prefix": {"count": index}, "tools": tools, "tool_choice": "auto"},
    }


def _raw_lines(logs: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log_paths(logs, SID)[0].read_text().splitlines()]


def _sidecars(logs: Path) -> list[Path]:
    payloads = log_paths(logs, SID)[1]
    return sorted(payloads.iterdir()) if payloads.exists() else []


def _logged_tools(logs: Path) -> list[Any]:
    source = FileLogSource.for_session(logs, SID)
    return [e.data["request"]["tools"] for e in decode_log(source)]


def test_a_tool_set_is_stored_once_and_every_request_names_it(logs: Path) -> None:
    built_in = [_tool("Read"), _tool("Write"), _tool("Grep")]
    with_mcp = [*built_in, _tool("mcp__docs__search")]
    logger = _logger(logs)
    for index, tools in enumerate([built_in, built_in, built_in, with_mcp, built_in]):
        logger.log("provider_request", _request(index, tools))

    raw = [line["data"]["request"]["tools"] for line in _raw_lines(logs)]
    assert all(set(tools) == {SIDECAR_KEY} for tools in raw)
    assert raw[0] == raw[1] == raw[2] != raw[3]
    assert raw[4] == raw[0]  # the built-in set again: its sidecar, stored anew under its name
    assert len(_sidecars(logs)) == 2
    assert b"a long description" not in log_paths(logs, SID)[0].read_bytes()
    assert _logged_tools(logs) == [built_in, built_in, built_in, with_mcp, built_in]


def test_shared_tools_are_redacted_as_any_member(logs: Path) -> None:
    """G-152: a schema member under a sensitive key is redacted in the sidecar as it was
    inline; the secret is in no byte the log wrote."""
    tools = [_tool("Deploy", api_key={"type": "string", "default": "sk-live-123"})]
    _logger(logs).log("provider_request", _request(0, tools))
    written = log_paths(logs, SID)[0].read_bytes() + b"".join(
        p.read_bytes() for p in _sidecars(logs)
    )
    assert b"sk-live-123" not in written
    (logged,) = _logged_tools(logs)
    assert logged[0]["input_schema"]["properties"]["api_key"] == "[REDACTED]"


def test_tools_that_spell_a_sidecar_key_stay_inline_and_literal(logs: Path) -> None:
    """A schema naming a property ``$sidecar`` cannot be a sidecar of its own: it is logged
    in the line, escaped, and read back as it was."""
    tools = [_tool("Odd", **{SIDECAR_KEY: {"type": "string"}})]
    _logger(logs).log("provider_request", _request(0, tools))
    assert _sidecars(logs) == []
    assert _logged_tools(logs) == [tools]


def test_a_request_spilled_whole_keeps_its_tools(logs: Path) -> None:
    """With a spill limit so low that the request itself goes to a sidecar, the tools go
    with it (as any oversized member) and read back whole."""
    tools = [_tool("Read"), _tool("Write")]
    entry = _request(0, tools)
    entry["request"] |= {f"option_{n}": n for n in range(40)}  # small members, many of them
    _logger(logs, limit=200).log("provider_request", entry)
    assert set(_raw_lines(logs)[0]["data"]["request"]) == {SIDECAR_KEY}
    assert _logged_tools(logs) == [tools]


def test_no_tools_stay_in_the_line(logs: Path) -> None:
    _logger(logs).log("provider_request", _request(0, []))
    assert _raw_lines(logs)[0]["data"]["request"]["tools"] == []
    assert _sidecars(logs) == []


def test_a_tool_set_is_stored_again_when_its_sidecar_has_gone(logs: Path) -> None:
    """G-153: every line that names a sidecar has it. The logger used to remember a tool set
    it had stored and never store it again, so once the log was removed or rotated with its
    sidecars (the sink then opens a new file) each later request named a sidecar that did
    not exist, and the new log never decoded again."""
    tools = [_tool("Read"), _tool("Write")]
    logger = _logger(logs)
    logger.log("provider_request", _request(0, tools))
    log_file, payloads = log_paths(logs, SID)
    log_file.rename(log_file.with_name("rotated.jsonl"))
    payloads.rename(payloads.with_name("rotated.payloads"))

    logger.log("provider_request", _request(1, tools))

    assert len(_sidecars(logs)) == 1
    assert _logged_tools(logs) == [tools]
