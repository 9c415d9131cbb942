"""A history whose tool-call ids a vendor refuses, run through a real robotad against a fake
API on 127.0.0.1 that refuses them as the real one does.

A history's call ids are whatever server made each reply chose. Sent to a vendor that refuses
one — Anthropic an id outside ``^[a-zA-Z0-9_-]+$`` (``functions.Glob:0``, as Kimi-style
servers make), OpenAI one over 40 characters (vLLM's ``chatcmpl-tool-…``) — the request
failed, and since the id is in the history, every later turn of the session: it was stuck.
Such a history comes from an imported artifact (the session's provider is the artifact's), or
from a named provider whose ``kind`` changed between daemon runs. Now each request sends a
refused id's replacement, the call and its result alike, and the history keeps the original.

An imported history may also hold one id in several rounds (a server that numbers each reply's
calls ``call_0``…), which Anthropic refuses as a repeated ``tool_use`` id: from its second round
on, a repeated id is sent as a replacement, with the results of its own round.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import trio

from robotad.providers.sent_ids import ANTHROPIC_CALL_IDS, OPENAI_CALL_IDS
from tests.daemon_helpers import IO_TIMEOUT, DaemonHome, connect, running_daemon
from tests.providers.fake_servers import (
    FakeModelServer,
    RecordedRequest,
    Reply,
    anthropic_error,
    anthropic_stream,
    openai_error,
    openai_stream,
)

#: A Kimi-style id, which Anthropic refuses.
COLON_ID = "functions.Glob:0"
#: A vLLM id: 46 characters, which OpenAI refuses.
LONG_ID = "chatcmpl-tool-" + "0123456789abcdef" * 2
GLOB = {"name": "Glob", "arguments": {"pattern": "*"}}


def anthropic_ids(body: dict[str, Any]) -> list[tuple[str, str]]:
    """``(where, id)`` of each ``tool_use`` id and ``tool_result`` id of a Messages body."""
    found = []
    for n, turn in enumerate(body["messages"]):
        for m, block in enumerate(turn["content"] if isinstance(turn["content"], list) else []):
            for key in ("id", "tool_use_id"):
                if block.get("type") in ("tool_use", "tool_result") and key in block:
                    found.append((f"messages.{n}.content.{m}.{block['type']}.{key}", block[key]))
    return found


def openai_ids(body: dict[str, Any]) -> list[tuple[str, str]]:
    """``(where, id)`` of each tool call's id and tool message's ``tool_call_id``."""
    found = []
    for n, message in enumerate(body["messages"]):
        for m, call in enumerate(message.get("tool_calls") or []):
            found.append((f"messages[{n}].tool_calls[{m}].id", call["id"]))
        if message["role"] == "tool":
            found.append((f"messages[{n}].tool_call_id", message["tool_call_id"]))
    return found


def anthropic_judge(request: RecordedRequest) -> Reply | None:
    """The API's 400 for the first id outside its pattern, for a ``tool_use`` id that an
    earlier one of the request has, or for a ``tool_result`` that answers no ``tool_use`` of
    the message right before it."""
    used: set[str] = set()
    for where, call_id in anthropic_ids(request.body):
        if not re.fullmatch(r"[a-zA-Z0-9_-]+", call_id):
            return anthropic_error(400, f"{where}: String should match pattern '^[a-zA-Z0-9_-]+$'")
        if where.endswith("tool_use.id"):
            if call_id in used:
                block = where.removesuffix(".tool_use.id")
                return anthropic_error(400, f"{block}: `tool_use` ids must be unique")
            used.add(call_id)
    turns = request.body["messages"]
    for n, turn in enumerate(turns):
        blocks = turn["content"] if isinstance(turn["content"], list) else []
        before = turns[n - 1]["content"] if n and isinstance(turns[n - 1]["content"], list) else []
        calls = {block["id"] for block in before if block.get("type") == "tool_use"}
        for m, block in enumerate(blocks):
            if block.get("type") == "tool_result" and block["tool_use_id"] not in calls:
                return anthropic_error(
                    400,
                    f"messages.{n}.content.{m}: unexpected `tool_use_id` found in `tool_result` "
                    f"blocks: {block['tool_use_id']}. Each `tool_result` block must have a "
                    "corresponding `tool_use` block in the previous message.",
                )
    return None


def openai_judge(request: RecordedRequest) -> Reply | None:
    """The API's 400 for the first id over 40 characters, or for a tool message whose
    ``tool_call_id`` an earlier one has (reported for two tool messages of one round; held here
    across rounds too, the strictest reading)."""
    answered: dict[str, str] = {}
    for where, call_id in openai_ids(request.body):
        if len(call_id) > 40:
            return openai_error(
                400,
                f"Invalid '{where}': string too long. Expected a string with maximum length "
                f"40, but got a string with length {len(call_id)} instead.",
            )
        if where.endswith(".tool_call_id"):
            at = where.removesuffix(".tool_call_id")
            if call_id in answered:
                return openai_error(
                    400,
                    f"Invalid parameter: Duplicate value for 'tool_call_id' of '{call_id}', in "
                    f"{answered[call_id]} and {at}.",
                )
            answered[call_id] = at
    return None


VENDORS = {
    "anthropic": (anthropic_judge, anthropic_ids, lambda: anthropic_stream([{"text": ["fine"]}])),
    "openai": (openai_judge, openai_ids, lambda: openai_stream(["fine"])),
}


def sent_pairs(ids: list[tuple[str, str]], originals: list[str]) -> dict[str, str]:
    """Each original id with the one id sent for it, in the request's order of ids."""
    pairs: dict[str, str] = {}
    for (_, sent), original in zip(ids, originals, strict=True):
        assert pairs.setdefault(original, sent) == sent, f"{original!r} sent two ways"
    return pairs


def with_round_ids(artifact: dict[str, Any], rounds: list[list[str]]) -> dict[str, Any]:
    """`artifact` of a scripted session whose rounds made len(`rounds[r]`) calls each, each
    round's calls and their results under `rounds[r]`, its provider ``fake``."""
    record = artifact["record"]
    messages = record["messages"]
    made = [n for n, m in enumerate(messages) if m.get("toolCalls")]
    assert len(made) == len(rounds)
    for n, ids in zip(made, rounds, strict=True):
        calls = messages[n]["toolCalls"]
        results = messages[n + 1 : n + 1 + len(calls)]
        assert [r["toolCallId"] for r in results] == [c["id"] for c in calls]
        for call, result, new in zip(calls, results, ids, strict=True):
            call["id"] = result["toolCallId"] = new
    record["settings"].update(provider="fake", model="fake-model")
    record["settings"].pop("script", None)
    return artifact


def with_ids(artifact: dict[str, Any], ids: list[str]) -> dict[str, Any]:
    """`artifact` of a scripted session whose one round made len(`ids`) calls, those calls and
    their results under `ids`, its provider ``fake``."""
    return with_round_ids(artifact, [ids])


@pytest.mark.parametrize("kind", sorted(VENDORS))
async def test_an_imported_history_of_refused_ids_runs_on_the_vendor(
    kind: str, tmp_path: Path, nursery: trio.Nursery
) -> None:
    judge, extract, fine = VENDORS[kind]
    server = FakeModelServer([Reply(events=fine())], judge=judge)
    await nursery.start(server.run)
    home = DaemonHome(tmp_path / "home")
    home.write_config(server.provider_config(kind, model="fake-model"))
    script = [{"toolCalls": [GLOB, GLOB]}, {"text": "found them"}]
    with running_daemon(home) as running, trio.fail_after(IO_TIMEOUT * 3):
        async with connect(running) as client:
            made = await client.call("session/create", {"cwd": str(tmp_path), "script": script})
            await client.call("session/run", {"sessionId": made["sessionId"], "prompt": "look"})
            exported = await client.call("session/export", {"sessionId": made["sessionId"]})
            artifact = with_ids(exported["artifact"], [COLON_ID, LONG_ID])
            await client.call("session/import", {"artifact": artifact, "sessionId": "moved"})
            first = await client.call("session/run", {"sessionId": "moved", "prompt": "and now?"})
            second = await client.call("session/run", {"sessionId": "moved", "prompt": "again"})
            history = await client.call("session/history", {"sessionId": "moved"})
            again = await client.call("session/export", {"sessionId": "moved"})
    assert (first["status"], first["response"]) == ("completed", "fine"), first
    assert (second["status"], second["response"]) == ("completed", "fine"), second
    assert len(server.requests) == 2  # neither refused
    originals = [COLON_ID, LONG_ID] * 2  # the calls, then their results
    sent = [sent_pairs(extract(request.body), originals) for request in server.requests]
    assert sent[0] == sent[1]  # every request the same bytes
    refused, accepted = (COLON_ID, LONG_ID) if kind == "anthropic" else (LONG_ID, COLON_ID)
    assert sent[0][accepted] == accepted
    assert sent[0][refused] != refused
    # The history and the record keep the ids as they came.
    calls = [c["id"] for m in history["messages"] for c in m.get("toolCalls", [])]
    results = [m["toolCallId"] for m in history["messages"] if m["role"] == "tool"]
    assert calls == results == [COLON_ID, LONG_ID]
    assert json.dumps(again["artifact"]["record"]["messages"]).count(json.dumps(COLON_ID)) == 2


async def test_a_named_provider_s_kind_changed_between_runs_takes_the_session_on(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    """A session on an OpenAI-compatible server that made a ``functions.Glob:0`` call, then
    the same provider name configured as Anthropic: its next turns run. A reply is never
    mapped back: Claude's next call, even under the very id its request was sent for the old
    one, is a new call, and the request after it tells the two apart."""
    call = {"index": 0, "id": COLON_ID, "type": "function"}
    call["function"] = {"name": "Glob", "arguments": json.dumps(GLOB["arguments"])}
    calling = Reply(events=openai_stream(tool_deltas=[[call]], finish_reason="tool_calls"))
    local = FakeModelServer([calling, Reply(events=openai_stream(["found it"]))])
    stand_in = ANTHROPIC_CALL_IDS.replacement(COLON_ID)
    echo = {"tool_use": (stand_in, "Glob", [json.dumps(GLOB["arguments"])])}
    claude = FakeModelServer(
        [
            Reply(events=anthropic_stream([{"text": ["fine"]}])),
            Reply(events=anthropic_stream([echo], stop_reason="tool_use")),
            Reply(events=anthropic_stream([{"text": ["found it again"]}])),
        ],
        anthropic_judge,
    )
    await nursery.start(local.run)
    await nursery.start(claude.run)
    home = DaemonHome(tmp_path / "home")
    home.write_config(local.provider_config("openai", name="local", model="fake-model"))
    with running_daemon(home) as running, trio.fail_after(IO_TIMEOUT * 3):
        async with connect(running) as client:
            create = {"cwd": str(tmp_path), "provider": "local", "sessionId": "s"}
            await client.call("session/create", create)
            ran = await client.call("session/run", {"sessionId": "s", "prompt": "look"})
    assert (ran["status"], ran["response"]) == ("completed", "found it"), ran
    home.write_config(claude.provider_config("anthropic", name="local", model="fake-model"))
    with running_daemon(home) as running, trio.fail_after(IO_TIMEOUT * 3):
        async with connect(running) as client:
            await client.call("session/open", {"sessionId": "s"})
            first = await client.call("session/run", {"sessionId": "s", "prompt": "and now?"})
            second = await client.call("session/run", {"sessionId": "s", "prompt": "once more"})
            history = await client.call("session/history", {"sessionId": "s"})
    assert (first["status"], first["response"]) == ("completed", "fine"), first
    assert (second["status"], second["response"]) == ("completed", "found it again"), second
    assert len(claude.requests) == 3  # none refused
    ((_, used), (_, answered)) = anthropic_ids(claude.requests[0].body)
    assert used == answered == stand_in
    # Claude's call under that id is a new call of the history, under its own id ...
    results = [m["toolCallId"] for m in history["messages"] if m["role"] == "tool"]
    assert results == [COLON_ID, stand_in]
    # ... and the last request sends the old call under another: two calls, two ids, paired.
    sent = [call_id for _, call_id in anthropic_ids(claude.requests[-1].body)]
    old = ANTHROPIC_CALL_IDS.replacement(COLON_ID, 1)
    assert sent == [old, old, stand_in, stand_in]


@pytest.mark.parametrize("kind", sorted(VENDORS))
async def test_an_imported_history_repeating_an_id_across_rounds_runs_on_the_vendor(
    kind: str, tmp_path: Path, nursery: trio.Nursery
) -> None:
    """Three rounds of one turn, made by a server numbering each reply's calls from zero:
    ``call_0``; ``call_0``, ``call_1``; ``call_0``. Each later turn's request sends the first
    round as it was, each later ``call_0`` under its own replacement with its own round's
    result, the same bytes every request; the history, the record and the log keep
    ``call_0``."""
    judge, extract, fine = VENDORS[kind]
    rule = ANTHROPIC_CALL_IDS if kind == "anthropic" else OPENAI_CALL_IDS
    server = FakeModelServer([Reply(events=fine())], judge=judge)
    await nursery.start(server.run)
    home = DaemonHome(tmp_path / "home")
    home.write_config(server.provider_config(kind, model="fake-model"))
    rounds = [["call_0"], ["call_0", "call_1"], ["call_0"]]
    script = [{"toolCalls": [GLOB] * len(ids)} for ids in rounds] + [{"text": "found them"}]
    with running_daemon(home) as running, trio.fail_after(IO_TIMEOUT * 3):
        async with connect(running) as client:
            made = await client.call("session/create", {"cwd": str(tmp_path), "script": script})
            await client.call("session/run", {"sessionId": made["sessionId"], "prompt": "look"})
            exported = await client.call("session/export", {"sessionId": made["sessionId"]})
            artifact = with_round_ids(exported["artifact"], rounds)
            await client.call("session/import", {"artifact": artifact, "sessionId": "moved"})
            first = await client.call("session/run", {"sessionId": "moved", "prompt": "and now?"})
            second = await client.call("session/run", {"sessionId": "moved", "prompt": "again"})
            history = await client.call("session/history", {"sessionId": "moved"})
    assert (first["status"], first["response"]) == ("completed", "fine"), first
    assert (second["status"], second["response"]) == ("completed", "fine"), second
    assert len(server.requests) == 2  # neither refused
    sent = [[call_id for _, call_id in extract(request.body)] for request in server.requests]
    assert sent[0] == sent[1]  # every request the same bytes
    again, third = rule.replacement("call_0", repeat=1), rule.replacement("call_0", repeat=2)
    # Each round's calls, then its results (the next message's, for either vendor).
    assert sent[0] == ["call_0", "call_0", again, "call_1", again, "call_1", third, third]
    assert len({again, third, "call_0", "call_1"}) == 4
    # The history keeps the ids as they came, and the log the history's.
    calls = [c["id"] for m in history["messages"] for c in m.get("toolCalls", [])]
    results = [m["toolCallId"] for m in history["messages"] if m["role"] == "tool"]
    assert calls == results == ["call_0", "call_0", "call_1", "call_0"]
    log = (home.state_dir / "logs" / "moved.jsonl").read_text()
    assert '"call_0"' in log
    assert again not in log
    assert third not in log
