"""Delta throughput of the real providers against a loopback fake server.

Streams N tiny text deltas (one character each) through `OpenAIProvider.complete` and
`AnthropicProvider.complete` — SDK, HTTP over 127.0.0.1, SSE parsing, our assembly and the
observer calls — and prints deltas per second (best and median of a few runs). For scale it also
prints the bare SDK iterating the same stream, so our share of the cost is visible.

Run: ``.venv/bin/python bench/providers.py [N]``.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from protocol.shapes import Message
from robotad.agent.provider import ModelRequest
from robotad.providers.anthropic import AnthropicProvider
from robotad.providers.openai import OpenAIProvider
from tests.providers.fake_servers import (
    FakeModelServer,
    Reply,
    anthropic_stream,
    openai_stream,
)

RUNS = 5


class CountingObserver:
    def __init__(self) -> None:
        self.texts = 0
        self.activity = 0

    def on_text(self, delta: str) -> None:
        self.texts += 1

    def on_activity(self) -> None:
        self.activity += 1


async def _measure(label: str, n: int, once: Callable[[], Awaitable[int]]) -> None:
    await once()  # warm-up: connection, imports, caches
    rates = []
    for _ in range(RUNS):
        start = time.perf_counter()
        count = await once()
        elapsed = time.perf_counter() - start
        if count != n:
            raise SystemExit(f"{label}: expected {n} deltas, got {count}")
        rates.append(n / elapsed)
    best, median = max(rates), statistics.median(rates)
    print(f"{label:<34} {best:>10,.0f} deltas/s best  {median:>10,.0f} median  ({n:,} deltas)")


async def main(n: int) -> None:
    request = ModelRequest(messages=[Message.user("go")], tools=[])
    async with trio.open_nursery() as nursery:
        oa_server = FakeModelServer([Reply(events=openai_stream(["x"] * n))])
        an_server = FakeModelServer([Reply(events=anthropic_stream([{"text": ["x"] * n}]))])
        await nursery.start(oa_server.run)
        await nursery.start(an_server.run)
        oa = OpenAIProvider(
            name="bench",
            model="gpt-4o-mini",
            base_url=oa_server.base_url + "/v1",
            api_key="sk-bench",
            context_window=None,
        )
        an = AnthropicProvider(
            name="bench",
            model="claude-bench",
            base_url=an_server.base_url,
            api_key="sk-bench",
            context_window=None,
        )

        async def openai_once() -> int:
            observer = CountingObserver()
            await oa.complete(request, observer)
            return observer.texts

        async def anthropic_once() -> int:
            observer = CountingObserver()
            await an.complete(request, observer)
            return observer.texts

        async def openai_sdk_once() -> int:
            stream = await oa._client.chat.completions.create(**oa.request_params(request))
            count = 0
            async with stream:
                async for chunk in stream:
                    count += bool(chunk.choices and chunk.choices[0].delta.content)
            return count

        async def anthropic_sdk_once() -> int:
            stream = await an._client.messages.create(**an.request_params(request))
            count = 0
            async with stream:
                async for event in stream:
                    count += event.type == "content_block_delta"
            return count

        try:
            await _measure("openai provider (complete)", n, openai_once)
            await _measure("openai SDK alone (iterate)", n, openai_sdk_once)
            await _measure("anthropic provider (complete)", n, anthropic_once)
            await _measure("anthropic SDK alone (iterate)", n, anthropic_sdk_once)
        finally:
            await oa.aclose()
            await an.aclose()
        nursery.cancel_scope.cancel()


if __name__ == "__main__":
    trio.run(main, int(sys.argv[1]) if len(sys.argv) > 1 else 20_000)
