"""Content-free observations of provider rounds and tool bodies, and harmless observers."""

from __future__ import annotations

import msgspec

from protocol.shapes import ToolCall
from robotad.agent import (
    CompletedTurn,
    EventBus,
    Observation,
    ProviderRoundObserved,
    Refuse,
    ToolBodyObserved,
)
from robotad.agent.gate import Admission, Admit

from .loop_fakes import (
    BrokenTool,
    EchoTool,
    Journal,
    ScriptedGate,
    call_step,
    scripted,
    start_history,
    toolbox,
    turn,
)

SECRET_PROMPT = "prompt-5f1e"
SECRET_ARGUMENT = "argument-9c2d"
SECRET_REPLY = "reply-77ab"


async def test_g042_rounds_and_permitted_tool_bodies_are_observed_without_content() -> None:
    """G-042: each provider round and each permitted tool body's completion is published as
    an observation holding only time, round and outcome."""
    bus = EventBus()
    observed: list[Observation] = []
    bus.subscribe(observed.append)

    def decide(call: ToolCall) -> Admission:
        if call.arguments.get("value") == "refused":
            return Refuse("no")
        return Admit(call.arguments)

    provider = scripted(
        call_step(("echo", {"value": SECRET_ARGUMENT}), ("broken", {})),
        call_step(("echo", {"value": "refused"}), ("missing", {})),
        {"text": SECRET_REPLY},
    )
    await turn(
        provider,
        Journal(start_history(SECRET_PROMPT)),
        toolbox(EchoTool(), BrokenTool()),
        gate=ScriptedGate(decide),
        bus=bus,
    )

    rounds = [(o.round, o.outcome) for o in observed if isinstance(o, ProviderRoundObserved)]
    assert rounds == [(1, "ok"), (2, "ok"), (3, "ok")]
    # Round 2's refused and unknown calls ran no body, so only round 1's two bodies appear
    # (in completion order, which concurrency leaves open).
    bodies = sorted((o.round, o.outcome) for o in observed if isinstance(o, ToolBodyObserved))
    assert bodies == [(1, "failed"), (1, "ok")]
    assert isinstance(observed[0], ProviderRoundObserved)
    assert isinstance(observed[-1], ProviderRoundObserved)
    for observation in observed:
        encoded = msgspec.json.encode(observation).decode()
        assert set(msgspec.json.decode(encoded)) == {"kind", "time", "round", "outcome"}
        for secret in (SECRET_PROMPT, SECRET_ARGUMENT, SECRET_REPLY, "echo", "broken"):
            assert secret not in encoded
        assert observation.time.tzinfo is not None


async def test_g043_a_raising_observer_changes_no_result_and_fails_no_turn() -> None:
    """G-043: an observer that raises can neither change a tool's result nor fail the turn;
    observers after it still see everything."""
    bus = EventBus()

    def explode(observation: Observation) -> None:
        raise RuntimeError("observer bug")

    later: list[Observation] = []
    bus.subscribe(explode)
    bus.subscribe(later.append)
    journal = Journal(start_history())

    outcome = await turn(
        scripted(call_step(("echo", {"value": "x"})), {"text": "fine"}),
        journal,
        toolbox(EchoTool()),
        bus=bus,
    )

    assert outcome == CompletedTurn("fine", rounds=2)
    [result] = journal.tool_results()
    assert result.ok
    assert result.content == "echo:x"
    assert [type(o) for o in later] == [
        ProviderRoundObserved,
        ToolBodyObserved,
        ProviderRoundObserved,
    ]


async def test_unsubscribed_observers_hear_nothing_more() -> None:
    bus = EventBus()
    heard: list[Observation] = []
    unsubscribe = bus.subscribe(heard.append)

    await turn(scripted({"text": "a"}), Journal(start_history()), bus=bus)
    unsubscribe()
    unsubscribe()  # idempotent
    await turn(scripted({"text": "b"}), Journal(start_history()), bus=bus)

    assert len(heard) == 1
