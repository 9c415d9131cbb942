"""The agent loop the Session wraps, and the two ports it drives.

- `provider` — the provider port: requests, streamed deltas, usage, tool schemas.
- `tool` — the tool port: a tool's schema, typed arguments, permission profile and result.
- `gate` — the tool-gate port: what decides each call before its body runs (admit, park, refuse).
- `loop` — `run_turn`: provider rounds and tool rounds until the model stops, parks or fails.
- `tool_round` — one round of tool calls, run concurrently and committed in call order.
- `abort`, `observations` — the abort signal and the content-free observation bus.

Implementations live below: `robotad.providers` implements the provider port and
`robotad.tools` the tool port; neither is imported from here.
"""

from __future__ import annotations

from robotad.agent.abort import AbortSignal
from robotad.agent.gate import Admission, Admit, AdmitAll, Park, Refuse, ToolGate
from robotad.agent.loop import (
    CompletedTurn,
    ModelCallFailed,
    ParkedCall,
    ParkedTurn,
    TurnAbortedError,
    TurnCallbacks,
    TurnOptions,
    TurnOutcome,
    open_calls,
    run_turn,
)
from robotad.agent.observations import (
    EventBus,
    Observation,
    Observer,
    ProviderRoundObserved,
    ToolBodyObserved,
)
from robotad.agent.tool_round import MAX_CONCURRENT_TOOLS

__all__ = [
    "MAX_CONCURRENT_TOOLS",
    "AbortSignal",
    "Admission",
    "Admit",
    "AdmitAll",
    "CompletedTurn",
    "EventBus",
    "ModelCallFailed",
    "Observation",
    "Observer",
    "Park",
    "ParkedCall",
    "ParkedTurn",
    "ProviderRoundObserved",
    "Refuse",
    "ToolBodyObserved",
    "ToolGate",
    "TurnAbortedError",
    "TurnCallbacks",
    "TurnOptions",
    "TurnOutcome",
    "open_calls",
    "run_turn",
]
