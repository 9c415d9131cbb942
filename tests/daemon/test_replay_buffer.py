"""The replay buffer behind ``session/subscribe``'s ``afterSeq``: exactly the last N events,
held compressed (robotad/daemon/replay.py)."""

from __future__ import annotations

import gc
import tracemalloc
from collections import deque
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from robotad.daemon.replay import CHUNK, ReplayBuffer


def event(seq: int) -> dict[str, Any]:
    """An event shaped like the daemon's: repeated ids, a little text, nesting."""
    return {
        "sessionId": "s-0123456789abcdef0123456789abcdef",
        "seq": seq,
        "turnId": f"t-{seq // 7:08d}",
        "type": "text_delta" if seq % 3 else "tool_finished",
        "text": f"chunk {seq} of the reply",
        "detail": {"ok": seq % 2 == 0, "callId": f"c-{seq}", "lines": [seq, seq + 1]},
    }


@settings(max_examples=200, deadline=None)
@given(
    capacity=st.integers(min_value=1, max_value=700),
    first=st.integers(min_value=1, max_value=10_000),
    count=st.integers(min_value=0, max_value=1_500),
    probes=st.lists(st.integers(min_value=-5, max_value=1_600), max_size=6),
)
def test_holds_exactly_what_a_bounded_deque_would(
    capacity: int, first: int, count: int, probes: list[int]
) -> None:
    """Whatever the capacity (below, at and above a chunk) and however many events went in,
    the buffer answers like ``deque(maxlen=capacity)``: same length, same oldest seq, and
    `after(seq)` the same events in order."""
    buffer = ReplayBuffer(capacity)
    model: deque[dict[str, Any]] = deque(maxlen=capacity)
    for seq in range(first, first + count):
        buffer.append(event(seq))
        model.append(event(seq))
    assert len(buffer) == len(model)
    assert buffer.oldest_seq == (model[0]["seq"] if model else None)
    for probe in probes:
        after = first - 1 + probe
        assert buffer.after(after) == [e for e in model if e["seq"] > after]


def test_refuses_a_gap_and_a_bad_capacity() -> None:
    buffer = ReplayBuffer(10)
    buffer.append(event(5))
    with pytest.raises(ValueError, match="does not follow"):
        buffer.append(event(7))
    assert buffer.after(0) == [event(5)]
    with pytest.raises(ValueError, match="at least 1"):
        ReplayBuffer(0)


def test_a_full_buffer_costs_a_fraction_of_its_events_as_dicts() -> None:
    """10,000 buffered events (the PROTOCOL default) take under a quarter of the memory the
    same events take as dicts: only the open chunk is kept as dicts."""

    def traced(fill: Any) -> int:
        gc.collect()
        tracemalloc.start()
        try:
            kept = fill()
            gc.collect()
            size = tracemalloc.get_traced_memory()[0]
        finally:
            tracemalloc.stop()
        del kept
        return size

    def as_dicts() -> deque[dict[str, Any]]:
        kept: deque[dict[str, Any]] = deque(maxlen=10_000)
        for seq in range(1, 20_001):
            kept.append(event(seq))
        return kept

    def as_buffer() -> ReplayBuffer:
        kept = ReplayBuffer(10_000)
        for seq in range(1, 20_001):
            kept.append(event(seq))
        return kept

    assert len(as_buffer()) == 10_000
    assert as_buffer().after(10_000 + CHUNK) == [event(s) for s in range(10_001 + CHUNK, 20_001)]
    assert traced(as_buffer) * 4 < traced(as_dicts)


def test_an_event_that_does_not_encode_never_stops_the_buffer() -> None:
    """A chunk holding a value JSON cannot carry is kept as it is: later appends, the window
    and replays go on exactly as for any other chunk."""
    buffer = ReplayBuffer(CHUNK * 3)
    odd = {**event(5), "detail": object()}
    for seq in range(1, CHUNK * 4 + 1):
        buffer.append(odd if seq == 5 else event(seq))
    assert len(buffer) == CHUNK * 3
    assert buffer.after(CHUNK * 4 - 2) == [event(CHUNK * 4 - 1), event(CHUNK * 4)]
    wide = ReplayBuffer(CHUNK * 2)
    for seq in range(1, CHUNK + 3):
        wide.append(odd if seq == 5 else event(seq))
    replayed = wide.after(0)
    assert [e["seq"] for e in replayed] == list(range(1, CHUNK + 3))
    assert replayed[4] is odd
