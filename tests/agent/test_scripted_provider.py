"""The offline scripted provider, exactly as PROTOCOL.md §7 describes it."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.shapes import Message, ToolCall, Usage
from protocol.validate import ValidationFailed
from robotad.agent.provider import ModelReply, ModelRequest, Provider, ProviderError
from robotad.providers.scripted import ScriptedProvider, SummaryStep, TurnStep, decode_script


class Tap:
    """A StreamObserver that records deltas, activity and (virtual) arrival times."""

    def __init__(self) -> None:
        self.deltas: list[str] = []
        self.times: list[float] = []
        self.activity = 0

    def on_text(self, delta: str) -> None:
        self.deltas.append(delta)
        self.times.append(trio.current_time())

    def on_activity(self, chars: int = 0) -> None:
        self.activity += 1


def _request(*messages: Message, purpose: str = "turn") -> ModelRequest:
    return ModelRequest(list(messages), [], purpose=purpose)  # type: ignore[arg-type]


def _turn(prompt: str = "hi") -> ModelRequest:
    return _request(Message.system("sys"), Message.user(prompt))


async def _complete(provider: ScriptedProvider, request: ModelRequest) -> tuple[ModelReply, Tap]:
    tap = Tap()
    return await provider.complete(request, tap), tap


def _provider(*steps: dict[str, Any]) -> ScriptedProvider:
    return ScriptedProvider(decode_script(list(steps)))


def test_it_is_a_provider() -> None:
    provider = ScriptedProvider()
    assert isinstance(provider, Provider)
    assert (provider.name, provider.kind, provider.model) == ("scripted", "scripted", "scripted")


@pytest.mark.parametrize(
    ("text", "chunks", "pieces"),
    [
        ("abcdefg", 3, ["abc", "de", "fg"]),
        ("abcdef", 3, ["ab", "cd", "ef"]),
        ("abc", 1, ["abc"]),
        ("ab", 5, ["a", "b"]),
        ("", 4, []),
    ],
)
async def test_text_streams_in_nearly_equal_chunks(
    text: str, chunks: int, pieces: list[str]
) -> None:
    reply, tap = await _complete(_provider({"text": text, "chunks": chunks}), _turn())
    assert tap.deltas == pieces
    assert reply.text == text
    assert reply.tool_calls == []


async def test_chunks_arrive_delay_ms_apart(autojump_clock: trio.testing.MockClock) -> None:
    start = trio.current_time()
    _, tap = await _complete(_provider({"text": "aabbcc", "chunks": 3, "delayMs": 250}), _turn())
    assert [round(t - start, 3) for t in tap.times] == [0.25, 0.5, 0.75]


async def test_error_fails_the_call_with_its_reason_after_streaming_the_text() -> None:
    provider = _provider(
        {"text": "partial", "chunks": 2, "error": "rate limited"}, {"text": "next"}
    )
    tap = Tap()
    with pytest.raises(ProviderError) as caught:
        await provider.complete(_turn(), tap)
    assert caught.value.reason == "rate limited"
    assert "".join(tap.deltas) == "partial"
    reply, _ = await _complete(provider, _turn())
    assert reply.text == "next"


async def test_usage_and_tool_calls_with_fresh_ids() -> None:
    provider = _provider(
        {
            "toolCalls": [{"name": "Read", "arguments": {"file_path": "a"}}, {"name": "Glob"}],
            "usage": {"inputTokens": 100, "outputTokens": 7},
        }
    )
    reply, tap = await _complete(provider, _turn())
    assert reply.usage == Usage(100, 7)
    assert [(c.name, c.arguments) for c in reply.tool_calls] == [
        ("Read", {"file_path": "a"}),
        ("Glob", {}),
    ]
    ids = [c.id for c in reply.tool_calls]
    assert len(set(ids)) == 2
    assert all(ids)
    assert tap.activity == 1
    assert reply.stop_reason == "tool_use"


async def test_no_step_left_echoes_the_last_user_message() -> None:
    provider = _provider({"text": "first"})
    await _complete(provider, _turn())
    request = _request(
        Message.user("older"),
        Message.assistant("x"),
        Message.user("latest"),
        Message.tool("c", "t", "r", ok=True),
    )
    reply, tap = await _complete(provider, request)
    assert reply.text == "echo: latest"
    assert tap.deltas == ["echo: latest"]
    reply, _ = await _complete(ScriptedProvider(), _turn("no script"))
    assert reply.text == "echo: no script"


async def test_a_turn_call_takes_the_first_non_summary_step_and_keeps_summaries() -> None:
    provider = _provider({"summary": "S1"}, {"text": "T1"}, {"summary": "S2"})
    reply, _ = await _complete(provider, _turn())
    assert reply.text == "T1"
    assert provider.remaining_steps() == [{"summary": "S1"}, {"summary": "S2"}]
    summary, _ = await _complete(provider, _request(Message.user("x"), purpose="compaction"))
    assert summary.text == "S1"


async def test_a_compaction_call_takes_a_leading_summary_step_only(
    autojump_clock: trio.testing.MockClock,
) -> None:
    provider = _provider({"text": "T1"}, {"summary": "never reached"})
    conversation = [Message.system("sys"), Message.user("fix the bug"), Message.assistant("done")]
    first, _ = await _complete(provider, _request(*conversation, purpose="compaction"))
    again, _ = await _complete(provider, _request(*conversation, purpose="compaction"))
    assert first.text == again.text == "Summary of 2 messages: user: fix the bug; assistant: done"
    assert len(provider.remaining_steps()) == 2  # nothing consumed

    delayed = _provider({"summary": "S", "delayMs": 2000})
    start = trio.current_time()
    reply, _ = await _complete(delayed, _request(Message.user("x"), purpose="compaction"))
    assert reply.text == "S"
    assert trio.current_time() - start == pytest.approx(2.0)


async def test_an_empty_summary_step_is_returned_as_is() -> None:
    provider = _provider({"summary": ""})
    reply, tap = await _complete(provider, _request(Message.user("x"), purpose="compaction"))
    assert reply.text == ""
    assert tap.deltas == []


def test_deterministic_summary_mentions_tool_calls_and_is_bounded() -> None:
    from robotad.providers.scripted import _deterministic_summary

    call = ToolCall("c1", "Bash", {"command": "ls"})
    text = _deterministic_summary(
        [
            Message.user("x" * 1000),
            Message.assistant(None, [call]),
            Message.tool("c1", "Bash", "ok", ok=True),
        ]
    )
    assert text.startswith("Summary of 3 messages: user: xxx")
    assert len(text) < 460
    assert _deterministic_summary([Message.system("only")]) == "Summary of 0 messages."


def test_invalid_steps_are_located_errors_listing_every_problem() -> None:
    script = [
        {"text": "ok"},
        {"text": 5, "chunks": 0, "colour": "red"},
        "not a step",
        {"summary": "s", "text": "both"},
        {"toolCalls": [{"arguments": {}}], "delayMs": -1, "usage": {"inputTokens": 1}},
    ]
    with pytest.raises(ValidationFailed) as caught:
        decode_script(script, path="$.script")
    issues = {(i["path"], i["message"]) for i in caught.value.issues}
    paths = {path for path, _ in issues}
    assert paths == {
        "$.script[1].text",
        "$.script[1].chunks",
        "$.script[1].colour",
        "$.script[2]",
        "$.script[3].text",
        "$.script[4].toolCalls[0].name",
        "$.script[4].delayMs",
        "$.script[4].usage.outputTokens",
    }
    with pytest.raises(ValidationFailed) as not_a_list:
        decode_script({"text": "x"})
    assert not_a_list.value.issues == [{"path": "$", "message": "expected array of steps"}]


async def test_remaining_steps_round_trip_so_the_cursor_survives_a_restart() -> None:
    script = [
        {"text": "a", "chunks": 2, "delayMs": 5},
        {
            "toolCalls": [{"name": "Read", "arguments": {"file_path": "x"}}],
            "usage": {"inputTokens": 1, "outputTokens": 2},
        },
        {"summary": "s", "delayMs": 1},
        {"error": "boom"},
    ]
    provider = ScriptedProvider(decode_script(script))
    assert provider.remaining_steps() == script
    await _complete(provider, _turn())
    restored = ScriptedProvider(decode_script(provider.remaining_steps()))
    assert restored.remaining_steps() == script[1:]
    assert isinstance(decode_script(script)[2], SummaryStep)
    assert isinstance(decode_script(script)[0], TurnStep)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                ["text", "toolCalls", "chunks", "delayMs", "error", "usage", "summary", "name", "x"]
            ),
            inner,
            max_size=4,
        )
    ),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_json, max_size=4))
def test_any_json_script_decodes_or_fails_with_located_issues(script: list[Any]) -> None:
    issues: list[dict[str, str]] = []
    try:
        assert len(decode_script(script, path="$.script")) == len(script)
    except ValidationFailed as exc:
        issues = exc.issues
        failed = True
    else:
        failed = False
    assert failed == bool(issues)
    assert all(issue["path"].startswith("$.script[") for issue in issues)
