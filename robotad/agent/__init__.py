"""The agent loop the Session wraps: provider rounds, tool rounds, streaming, abort.

The public surface: `run_turn` and its outcomes and errors, the tool-gate port, the abort
signal and the content-free observation bus. The provider port is `robotad.agent.provider`.

Names are resolved on first use: `robotad.tools.base` imports `robotad.agent.provider`, and an
eager import of the loop here would import the tool port back while it is still half-built.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from protocol.lazy import lazy_attributes

if TYPE_CHECKING:
    from robotad.agent.abort import AbortSignal
    from robotad.agent.gate import Admission, Admit, AdmitAll, Park, Refuse, ToolGate
    from robotad.agent.loop import (
        CompletedTurn,
        ParkedCall,
        ParkedTurn,
        ProviderFailure,
        RoundCapReached,
        TurnAbortedError,
        TurnCallbacks,
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

_HOMES = {
    "AbortSignal": ".abort",
    "Admission": ".gate",
    "Admit": ".gate",
    "AdmitAll": ".gate",
    "Park": ".gate",
    "Refuse": ".gate",
    "ToolGate": ".gate",
    "CompletedTurn": ".loop",
    "ParkedCall": ".loop",
    "ParkedTurn": ".loop",
    "ProviderFailure": ".loop",
    "RoundCapReached": ".loop",
    "TurnAbortedError": ".loop",
    "TurnCallbacks": ".loop",
    "TurnOutcome": ".loop",
    "open_calls": ".loop",
    "run_turn": ".loop",
    "EventBus": ".observations",
    "Observation": ".observations",
    "Observer": ".observations",
    "ProviderRoundObserved": ".observations",
    "ToolBodyObserved": ".observations",
    "MAX_CONCURRENT_TOOLS": ".tool_round",
}

__all__ = [
    "MAX_CONCURRENT_TOOLS",
    "AbortSignal",
    "Admission",
    "Admit",
    "AdmitAll",
    "CompletedTurn",
    "EventBus",
    "Observation",
    "Observer",
    "Park",
    "ParkedCall",
    "ParkedTurn",
    "ProviderFailure",
    "ProviderRoundObserved",
    "Refuse",
    "RoundCapReached",
    "ToolBodyObserved",
    "ToolGate",
    "TurnAbortedError",
    "TurnCallbacks",
    "TurnOutcome",
    "open_calls",
    "run_turn",
]


__getattr__ = lazy_attributes(globals(), _HOMES)
