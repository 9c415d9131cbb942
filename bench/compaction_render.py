"""Render time of a 10,000-message history for the summariser, and of its token estimate.

Run: ``.venv/bin/python bench/compaction_render.py``. Prints figures; asserts nothing.
"""

from __future__ import annotations

import time

from protocol.shapes import Message, ToolCall
from robotad.session.compaction.summary import render_conversation, summary_request
from robotad.session.context_window import ContextTracker, estimate_tokens


def history(size: int) -> list[Message]:
    messages = [Message.system("project context")]
    for n in range(size // 4):
        messages.append(Message.user(f"please look at item {n}\nwith a second line"))
        call = ToolCall(f"c{n}", "Read", {"file_path": f"/w/src/file_{n}.py"})
        messages.append(Message.assistant("Reading it.", [call]))
        messages.append(Message.tool(f"c{n}", "Read", "def f():\n    return 1\n" * 20, ok=True))
        messages.append(Message.assistant(f"Item {n} defines f, which returns 1."))
    return messages[: size + 1]


def best_of(runs: int, fn: object) -> float:
    assert callable(fn)
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    messages = history(10_000)
    body = messages[1:]
    rendered = render_conversation(body)
    print(f"history: {len(body):,} messages, rendered {len(rendered) / 1e6:.1f} MB")
    print(f"render_conversation     {best_of(5, lambda: render_conversation(body)) * 1e3:8.1f} ms")
    print(f"summary_request         {best_of(5, lambda: summary_request(messages)) * 1e3:8.1f} ms")
    print(f"estimate_tokens (full)  {best_of(5, lambda: estimate_tokens(messages)) * 1e3:8.1f} ms")
    tracker = ContextTracker()
    tracker.estimate(messages)

    def append_and_estimate() -> None:
        messages.append(Message.user("one more"))
        tracker.estimate(messages)

    print(f"tracker after append    {best_of(5, append_and_estimate) * 1e6:8.1f} µs")


if __name__ == "__main__":
    main()
