"""The agent loop's own cost: rounds per second and overhead per round.

1. Scripted throughput — `run_turn` over the offline scripted provider with zero delay, one tool
   call per round to a trivial tool, committing into a list: rounds per second (best and median
   of a few turns).
2. Loop overhead — the same shape with a provider that returns a prepared reply at once, a tool
   that returns at once and a commit that does nothing, so what is left is the loop: building
   the request, committing the reply, admitting, running and committing the call (a nursery, a
   capacity limiter, events). Per-round time is measured between successive provider requests;
   the median must stay under 1 ms (the process exits 1 otherwise).
3. Through a real provider — when `robotad.providers.openai` and the loopback fake server of
   ``tests/providers/fake_servers.py`` are present, text deltas per second that reach the loop's
   `on_text` from `OpenAIProvider` streaming over 127.0.0.1 (``bench/providers.py`` measures the
   provider alone).

Run: ``.venv/bin/python bench/loop.py [ROUNDS]``.
"""

from __future__ import annotations

import itertools
import statistics
import sys
import time
from pathlib import Path
from typing import Any, ClassVar

import trio
from msgspec import Struct

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from protocol.shapes import Message, ToolCall
from robotad.agent import AdmitAll, TurnCallbacks, run_turn
from robotad.agent.provider import ModelReply, ModelRequest, Provider, StreamObserver
from robotad.agent.tool import Tool, ToolContext, ToolProfile, ToolResult, TypedTool
from robotad.providers.scripted import ScriptedProvider, decode_script

RUNS = 5
BUDGET_SECONDS = 0.001
CTX = ToolContext(cwd=Path("/"), session_id="bench")


class _Args(Struct, forbid_unknown_fields=True):
    value: str = ""


class Noop(TypedTool[_Args]):
    name: ClassVar[str] = "noop"
    description: ClassVar[str] = "Returns at once."
    profile: ClassVar[ToolProfile] = ToolProfile(risk="inspect")
    Arguments: ClassVar[type[Struct]] = _Args

    async def run(self, arguments: _Args, ctx: ToolContext) -> ToolResult:
        return ToolResult(True, arguments.value)


class Prepared:
    """Replies with one tool call per round for `rounds` rounds, then text; never yields."""

    name = "prepared"
    kind = "bench"
    model = "bench"
    context_window: int | None = None

    def __init__(self, rounds: int) -> None:
        self._left = rounds

    async def complete(self, request: ModelRequest, observer: StreamObserver) -> ModelReply:
        if self._left == 0:
            return ModelReply("done", [])
        self._left -= 1
        return ModelReply("", [ToolCall(f"c{self._left}", "noop", {"value": "x"})])

    async def aclose(self) -> None:
        pass


async def _turn(
    provider: Provider, tools: dict[str, Tool], callbacks: TurnCallbacks | None = None
) -> int:
    history = [Message.system("bench"), Message.user("go")]

    async def commit(message: Message) -> None:
        history.append(message)

    outcome = await run_turn(
        provider=provider,
        tools=tools,
        history=list(history),
        commit=commit,
        gate=AdmitAll(),
        ctx=CTX,
        callbacks=callbacks,
    )
    return getattr(outcome, "rounds", 0)


async def scripted_throughput(rounds: int) -> None:
    steps: list[dict[str, Any]] = [
        {"toolCalls": [{"name": "noop", "arguments": {"value": str(n)}}]} for n in range(rounds)
    ]
    script = decode_script([*steps, {"text": "done"}])
    tools: dict[str, Tool] = {"noop": Noop()}
    rates = []
    for _ in range(RUNS):
        start = time.perf_counter()
        done = await _turn(ScriptedProvider(script), tools)
        rates.append(done / (time.perf_counter() - start))
    print(
        f"{'scripted provider, 1 call/round':<36} {max(rates):>10,.0f} rounds/s best"
        f"  {statistics.median(rates):>10,.0f} median  ({rounds:,} rounds/turn)"
    )


async def loop_overhead(rounds: int) -> float:
    stamps: list[float] = []

    async def on_request(request: ModelRequest) -> None:
        stamps.append(time.perf_counter())

    tools: dict[str, Tool] = {"noop": Noop()}
    await _turn(Prepared(rounds), tools, TurnCallbacks(on_request=on_request))  # warm-up
    stamps.clear()
    await _turn(Prepared(rounds), tools, TurnCallbacks(on_request=on_request))
    per_round = sorted(b - a for a, b in itertools.pairwise(stamps))
    median = statistics.median(per_round)
    p99 = per_round[int(len(per_round) * 0.99)]
    verdict = "ok" if median < BUDGET_SECONDS else "OVER BUDGET"
    print(
        f"{'loop overhead per round':<36} {median * 1e6:>10,.1f} µs median"
        f"  {p99 * 1e6:>10,.1f} µs p99  (budget 1,000 µs: {verdict})"
    )
    return median


async def openai_delta_throughput(deltas: int) -> None:
    try:
        from robotad.providers.openai import OpenAIProvider
        from tests.providers.fake_servers import FakeModelServer, Reply, openai_stream
    except ImportError as exc:
        print(f"{'openai provider through the loop':<36} skipped ({exc.name} not available)")
        return
    counted = 0

    def on_text(delta: str) -> None:
        nonlocal counted
        counted += 1

    async with trio.open_nursery() as nursery:
        server = FakeModelServer([Reply(events=openai_stream(["x"] * deltas))])
        await nursery.start(server.run)
        provider = OpenAIProvider(
            name="bench",
            model="gpt-4o-mini",
            base_url=server.base_url + "/v1",
            api_key="sk-bench",
            context_window=None,
        )
        try:
            rates = []
            for _ in range(RUNS + 1):  # the first run warms up the connection
                counted = 0
                start = time.perf_counter()
                await _turn(provider, {}, TurnCallbacks(on_text=on_text))
                if counted != deltas:
                    raise SystemExit(f"expected {deltas} deltas, got {counted}")
                rates.append(deltas / (time.perf_counter() - start))
        finally:
            await provider.aclose()
        nursery.cancel_scope.cancel()
    rates = rates[1:]
    print(
        f"{'openai provider through the loop':<36} {max(rates):>10,.0f} deltas/s best"
        f"  {statistics.median(rates):>10,.0f} median  ({deltas:,} deltas)"
    )


async def main(rounds: int) -> None:
    await scripted_throughput(rounds)
    median = await loop_overhead(rounds)
    await openai_delta_throughput(20_000)
    if median >= BUDGET_SECONDS:
        raise SystemExit(1)


if __name__ == "__main__":
    trio.run(main, int(sys.argv[1]) if len(sys.argv) > 1 else 2_000)
