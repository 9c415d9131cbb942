"""Context figures: the estimate, provider usage, percentages and the auto-compact threshold."""

from __future__ import annotations

import math

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.shapes import ContextState, Message, ToolCall, Usage, utc_now
from robotad.session.context_window import (
    AUTO_COMPACT_THRESHOLD,
    DEFAULT_CONTEXT_WINDOW,
    ContextTracker,
    estimate_tokens,
    parse_auto_compact_threshold,
    should_auto_compact,
)
from robotad.session.errors import InvalidSetting


def history_of(*texts: str) -> list[Message]:
    return [Message.system("you help")] + [Message.user(text) for text in texts]


def test_estimate_is_a_quarter_of_the_compact_json() -> None:
    """G-046: the estimate is ceil(length of the compact JSON history / 4)."""
    history = history_of("héllo", "a" * 101)
    history.append(Message.assistant(None, [ToolCall("c1", "Read", {"file_path": "/x"})]))
    history.append(Message.tool("c1", "Read", "text\nmore", ok=True))
    expected = math.ceil(len(msgspec.json.encode(history)) / 4)
    assert estimate_tokens(history) == expected
    assert ContextTracker().estimate(history) == expected
    assert estimate_tokens([]) == 1


def test_usage_on_the_last_message_is_the_figure() -> None:
    """G-046: when the last message carries usage, usedTokens is its totalTokens, else
    input + output."""
    tracker = ContextTracker()
    history = history_of("x" * 4000)
    history.append(Message.assistant("hi", usage=Usage(10, 5, 20)))
    assert tracker.state(history).used_tokens == 20
    history[-1] = Message.assistant("hi", usage=Usage(10, 5))
    assert tracker.state(history).used_tokens == 15


def test_a_stored_negative_usage_is_no_usage() -> None:
    """G-046: a record saved before negative counts were refused may still hold one; it is
    no `Usage`, so the figure is the estimate, never a negative ``usedTokens``."""
    tracker = ContextTracker()
    history = history_of("x" * 4000)
    stored = {"usage": {"inputTokens": -999_999, "outputTokens": 0}}
    history.append(Message("m-9", "assistant", "hi", "complete", utc_now(), metadata=stored))
    assert history[-1].usage is None
    assert tracker.state(history).used_tokens == estimate_tokens(history)


def test_without_usage_the_larger_of_estimate_and_latest_usage() -> None:
    """G-046: otherwise usedTokens is the larger of the estimate and the latest usage seen."""
    tracker = ContextTracker()
    history = history_of("short")
    estimate = estimate_tokens(history)
    assert tracker.state(history).used_tokens == estimate
    tracker.update_from_reply(Usage(5000, 100))
    assert tracker.state(history).used_tokens == 5100
    history.append(Message.user("y" * 40_000))
    assert tracker.state(history).used_tokens == estimate_tokens(history)
    tracker.reset()
    assert tracker.latest_usage is None


def test_percentages_and_default_window() -> None:
    """G-047: maxTokens defaults to 200 000; percentages lie in 0–100 with two decimals."""
    tracker = ContextTracker()
    assert tracker.max_tokens == DEFAULT_CONTEXT_WINDOW == 200_000
    history = history_of("z")
    history.append(Message.assistant("ok", usage=Usage(1234, 0)))
    state = tracker.state(history)
    assert state == ContextState(1234, 200_000, 0.62, 99.38)
    small = ContextTracker(1000)
    history.append(Message.assistant("more", usage=Usage(5000, 0)))
    assert small.state(history) == ContextState(5000, 1000, 100.0, 0.0)


def _message(seed: int) -> Message:
    return Message.user("m" * (seed % 97) + "\u2028é\n" * (seed % 3))


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["append", "edit-last", "replace", "drop"]), st.integers(0, 500)),
        max_size=30,
    )
)
def test_incremental_estimate_equals_a_full_recount(ops: list[tuple[str, int]]) -> None:
    """G-046: the cached estimate always equals the estimate of the whole history."""
    tracker = ContextTracker()
    history: list[Message] = [Message.system("s")]
    for op, seed in ops:
        if op == "append":
            history.append(_message(seed))
        elif op == "edit-last" and history:
            history[-1].content = f"edited {seed}" * (seed % 5)
        elif op == "replace":
            history = [Message.system("s"), _message(seed)]
        elif op == "drop" and history:
            history = history[: seed % len(history)]
        assert tracker.estimate(history) == estimate_tokens(history)


@pytest.mark.parametrize("value", [0.5, 1, 1.0, 0.0001, False])
def test_threshold_accepts_fractions_and_false(value: float | bool) -> None:
    """G-052: a threshold is a number in (0, 1] or false."""
    assert parse_auto_compact_threshold(value) == value


@pytest.mark.parametrize("value", [0, -0.1, 1.01, 2, True, "0.5", None, float("nan")])
def test_threshold_refuses_everything_else(value: object) -> None:
    """G-052: 0, negatives, values above 1 and other types are refused, located (the daemon
    answers -32602)."""
    with pytest.raises(InvalidSetting) as caught:
        parse_auto_compact_threshold(value, "$.autoCompactThreshold")
    assert caught.value.issues[0]["path"] == "$.autoCompactThreshold"


def test_auto_compact_threshold() -> None:
    """G-052, G-053, G-188: the default is 0.835 of the window; usage at or above the
    threshold compacts, below does not, and false never does."""
    assert AUTO_COMPACT_THRESHOLD == 0.835
    at = ContextState.of(835, 1000)
    below = ContextState.of(834, 1000)
    assert should_auto_compact(at, AUTO_COMPACT_THRESHOLD)
    assert not should_auto_compact(below, AUTO_COMPACT_THRESHOLD)
    assert not should_auto_compact(ContextState.of(1000, 1000), False)
