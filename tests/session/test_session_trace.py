"""W3C trace context for hook children (G-135…G-138)."""

from __future__ import annotations

import pytest

from robotad.session.hooks.trace import TraceContext


def test_root_and_child_spans() -> None:
    """G-138: a tool call's context is a child span of the turn's root, in the same trace."""
    root = TraceContext.new_root()
    child = root.child()
    assert child.trace_id == root.trace_id
    assert child.span_id != root.span_id
    version, trace_id, span_id, flags = root.traceparent.split("-")
    assert (version, flags) == ("00", "01")
    assert (len(trace_id), len(span_id)) == (32, 16)
    assert TraceContext.parse(root.traceparent) == root
    assert TraceContext.parse(child.traceparent) == child
    assert TraceContext.new_root(sampled=False).traceparent.endswith("-00")


@pytest.mark.parametrize(
    "header",
    [
        "",
        "00-" + "0" * 32 + "-" + "1" * 16 + "-01",
        "00-" + "1" * 32 + "-" + "0" * 16 + "-01",
        "ff-" + "1" * 32 + "-" + "1" * 16 + "-01",
        "00-" + "A" * 32 + "-" + "1" * 16 + "-01",
        "00-" + "1" * 31 + "-" + "1" * 16 + "-01",
        "00-" + "1" * 32 + "-" + "1" * 16 + "-01-extra",
    ],
)
def test_invalid_traceparents_are_refused(header: str) -> None:
    """G-135: only a valid traceparent is ever read back."""
    assert TraceContext.parse(header) is None
