"""What a soak does and what it counts: its shape, its script, its approver, its statistics.

Shape (`SoakShape`): `clients` clients share `sessions` sessions (client ``c`` works on session
``c % sessions``) and each runs `turns_per_client` turns; `kills` SIGKILLs of the daemon fall
on the running workload. Every session is created with the offline scripted provider and a
script (`session_script`) that cycles through five kinds of turn (`TURN_KINDS`):

- ``plain``  — streamed text, no tool;
- ``read``   — a Read of ``seed.txt`` (inspect: allowed in default mode);
- ``note``   — a Write under ``notes/`` (allowed by the session rule ``Write(notes/**)``);
- ``effect`` — a Bash ``echo MARKER >> effects.log`` (execute: asks → the turn waits);
- ``write``  — a Write under ``out/`` beside a Read (modify: asks → waits); files whose name
  holds ``deny-`` are refused by the approver (`approves`), the others granted.

`SoakStats` is everything a run counts; `tests/system/soak_workload.py` runs it.
"""

from __future__ import annotations

import json
import re
import statistics
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from tests.system.daemon_process import Scale

__all__ = [
    "CRASH_SHAPES",
    "SOAK_SHAPES",
    "TURN_KINDS",
    "SoakShape",
    "SoakStats",
    "approves",
    "effect_marker",
    "session_script",
]


@dataclass(frozen=True)
class SoakShape:
    clients: int
    turns_per_client: int
    sessions: int
    kills: int = 0
    #: Each session's context window in tokens: small enough that its history compacts
    #: every few dozen turns, as a long agent session's does (None: the provider's).
    context_window: int | None = None

    @property
    def turns(self) -> int:
        return self.clients * self.turns_per_client

    def session_of(self, client: int) -> str:
        return f"soak-{client % self.sessions}"

    def turns_of_session(self, index: int) -> int:
        owners = len(range(index, self.clients, self.sessions))
        return owners * self.turns_per_client


SOAK_SHAPES: dict[Scale, SoakShape] = {
    "full": SoakShape(clients=50, turns_per_client=200, sessions=20, context_window=16_000),
    "reduced": SoakShape(clients=8, turns_per_client=10, sessions=4, context_window=3_000),
}
CRASH_SHAPES: dict[Scale, SoakShape] = {
    "full": SoakShape(clients=20, turns_per_client=60, sessions=10, kills=20, context_window=6_000),
    "reduced": SoakShape(clients=6, turns_per_client=8, sessions=3, kills=3, context_window=2_000),
}

TURN_KINDS = ("plain", "read", "note", "effect", "write")
_MARKER = re.compile(r"echo (\S+) >> effects\.log")


# -- the script ---------------------------------------------------------------------------


def session_script(session_id: str, turns: int) -> list[dict[str, Any]]:
    """The scripted provider's steps for `turns` turns of one session (see the module
    docstring); a tool turn takes two steps: the call, then the text after its result."""
    steps: list[dict[str, Any]] = []
    for k in range(turns):
        kind = TURN_KINDS[k % len(TURN_KINDS)]
        if kind == "plain":
            steps.append({"text": f"turn {k} of {session_id}: nothing to do", "chunks": 4})
            continue
        if kind == "read":
            calls = [_call("Read", file_path="seed.txt")]
        elif kind == "note":
            calls = [_call("Write", file_path=f"notes/n{k}.txt", content=f"note {k}\n")]
        elif kind == "effect":
            calls = [_call("Bash", command=f"echo {session_id}.{k} >> effects.log")]
        else:
            verdict = "deny" if (k // len(TURN_KINDS)) % 2 else "keep"
            calls = [
                _call("Write", file_path=f"out/{verdict}-{k}.txt", content=f"out {k}\n"),
                _call("Read", file_path="seed.txt"),
            ]
        steps.append({"toolCalls": calls})
        steps.append({"text": f"{kind} {k} done", "chunks": 2})
    return steps


def _call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def approves(request: dict[str, Any]) -> bool:
    """The approver's one rule: grant every action except files named ``deny-…``."""
    return "deny-" not in json.dumps(request.get("arguments"))


def effect_marker(request: dict[str, Any]) -> str | None:
    """The marker a Bash effect appends, when `request` is one."""
    if request.get("tool") != "Bash":
        return None
    found = _MARKER.search(str(request.get("arguments", {}).get("command", "")))
    return found.group(1) if found else None


# -- statistics ---------------------------------------------------------------------------


@dataclass
class SoakStats:
    turns_completed: int = 0
    turns_waited: int = 0
    resumes: int = 0
    helper_resumes: int = 0
    busy_refusals: int = 0
    pending_refusals: int = 0
    idempotent_redeliveries: int = 0
    slow_approvals: int = 0
    interrupted_calls: int = 0
    abandoned: set[str] = field(default_factory=set)
    refused: set[str] = field(default_factory=set)
    settled: int = 0
    waits_checked_after_restart: int = 0
    kills: int = 0
    lost_responses: list[str] = field(default_factory=list)
    anomalies: list[str] = field(default_factory=list)
    resume_failures: list[str] = field(default_factory=list)
    storage_faults: list[str] = field(default_factory=list)
    granted_effects: dict[str, str] = field(default_factory=dict)
    #: Requests answered (each counted once, however many clients answered it).
    approved: set[str] = field(default_factory=set)
    denied: set[str] = field(default_factory=set)
    completed_by_session: Counter[str] = field(default_factory=Counter)
    run_seconds: list[float] = field(default_factory=list)
    #: The daemon's RSS once the sessions exist, before the first turn.
    rss_start_kib: int | None = None
    #: The daemon's RSS sampled every 1/40 of the turns.
    rss_kib: list[int] = field(default_factory=list)
    events: int = 0
    text_deltas: int = 0
    #: (session, seq) of every completed compaction a subscriber saw.
    compactions: set[tuple[str, int]] = field(default_factory=set)
    overflows: int = 0
    stream_faults: list[str] = field(default_factory=list)
    wall_seconds: float = 0.0

    def rss_growth(self) -> float | None:
        """Mean RSS of the last quarter of the samples taken under load over that of the
        first quarter, minus one."""
        if len(self.rss_kib) < 8:
            return None
        quarter = len(self.rss_kib) // 4
        first = statistics.mean(self.rss_kib[:quarter])
        last = statistics.mean(self.rss_kib[-quarter:])
        return last / first - 1.0
