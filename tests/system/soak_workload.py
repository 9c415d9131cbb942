"""The soak workload: clients sharing sessions, approvals over the wire, optional SIGKILLs.

`run_soak` creates the sessions of a `soak_plan.SoakShape`, runs every client (and, with
`kills`, the killer) and answers whatever still waits at the end; `SoakRun` is the state they
share. The plan (shape, script, approver) and what is counted (`SoakStats`) live in
`soak_plan`; the file checks in `soak_checks`.

Clients take turns politely: a run refused with SessionBusy waits for the next
``turn_finished`` it sees (bounded) and retries; one refused with ExecutionPending reads
``session/pending`` and answers those requests itself. Answers are deterministic
(``responseId`` derived from the request id, the decision from the action), so two clients
answering one request send identical responses and the redelivery must be idempotent (G-084).
One waiting turn in `SLOW_APPROVER` is answered late by its own client, so that another
client answers first (G-076) or, under crashes, the daemon dies while the wait is parked.

Faults are counted, not hidden: a refusal (busy, pending) is expected and counted; a reply that
never comes is a lost response; an error nobody expects is an anomaly. The killer SIGKILLs the
daemon at random moments (from the run's seed), checks the stored state while it is down,
restarts it and checks every acknowledged wait is still pending (G-075); the clients
reconnect and carry on.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Any

import trio

from protocol.errors import ExecutionPending, RpcError, SessionBusy, StaleResponse
from tests.system.daemon_process import DaemonHome, DaemonProcess
from tests.system.soak_checks import check_storage_offline
from tests.system.soak_client import (
    ConnectionGone,
    LostResponse,
    SoakConnection,
    open_soak_connection,
)
from tests.system.soak_plan import SoakShape, SoakStats, approves, effect_marker, session_script

__all__ = ["SoakHung", "SoakRun", "create_sessions", "run_soak", "still_pending"]


#: Bounds: attempts to get one turn accepted, approval rounds of one turn.
MAX_ATTEMPTS = 5_000
MAX_ROUNDS = 20
#: How long a refused client waits for a turn to finish before it simply retries.
BUSY_WAIT = 0.5
#: One waiting turn in `SLOW_APPROVER` is answered late by its own client: it first waits
#: this long for another client to answer (G-076) or, under crashes, for a restart (G-075).
SLOW_APPROVER = 3
SLOW_APPROVAL_WAIT = 1.0


@dataclass
class SoakRun:
    """Shared state of one soak: the daemon, the shape, statistics, the up/down signal."""

    home: DaemonHome
    daemon: DaemonProcess
    shape: SoakShape
    stats: SoakStats = field(default_factory=SoakStats)
    seed: int = 0
    up: trio.Event = field(default_factory=trio.Event)
    all_done: trio.Event = field(default_factory=trio.Event)
    killer_done: trio.Event = field(default_factory=trio.Event)
    finished: set[str] = field(default_factory=set)
    live: set[SoakConnection] = field(default_factory=set)
    #: Executions a client was told wait and for which no resume was sent yet (G-075).
    parked: dict[str, tuple[str, frozenset[str]]] = field(default_factory=dict)
    #: What each client is doing right now (printed when a run hangs).
    activity: dict[str, str] = field(default_factory=dict)
    #: Replaced by a fresh event at each restart (slow approvers wait for one).
    restarted: trio.Event = field(default_factory=trio.Event)
    #: Executions whose (slow) approver waits for the next restart: the last kill waits for one,
    #: so at least one kill always falls on an acknowledged wait (G-075).
    slow_waits: set[str] = field(default_factory=set)
    slow_wait_added: trio.Event = field(default_factory=trio.Event)
    #: Executions another client than their own answered.
    helped: set[str] = field(default_factory=set)
    waits: int = 0
    connection_of: dict[str, SoakConnection] = field(default_factory=dict)
    _progress: int = 0

    @property
    def crashing(self) -> bool:
        return self.shape.kills > 0

    def describe(self) -> list[str]:
        """What every client is doing (and waiting for), for a hang's report."""
        lines = []
        for client, doing in sorted(self.activity.items()):
            connection = self.connection_of.get(client)
            waiting = connection.in_flight if connection is not None else None
            lines.append(f"{client}: {doing}" + (f", awaiting {waiting}" if waiting else ""))
        return lines

    def client_done(self, turns: int) -> bool:
        """A client stops after its turns — under crashes, only once every kill happened, so
        the kills always fall on a running workload."""
        return turns >= self.shape.turns_per_client and self.killer_done.is_set()

    def progress(self) -> None:
        self._progress += 1
        every = max(1, self.shape.turns // 40)
        if not self.crashing and self._progress % every == 0 and self.daemon.alive():
            self.stats.rss_kib.append(self.daemon.rss_kib())


# -- clients ------------------------------------------------------------------------------


async def _wait_for_turn_end(connection: SoakConnection, session_id: str, seen: int) -> None:
    stream = connection.stream(session_id)
    with trio.move_on_after(BUSY_WAIT):
        while stream.turn_finished <= seen:
            await stream.changed.wait()


def _responses(run: SoakRun, requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    responses = []
    for request in requests:
        approved = approves(request)
        marker = effect_marker(request)
        if approved and marker is not None:
            run.stats.granted_effects[request["requestId"]] = marker
        responses.append(
            {
                "requestId": request["requestId"],
                "responseId": f"answer-{request['requestId']}",
                "approved": approved,
            }
        )
    return responses


async def _resume(
    run: SoakRun,
    connection: SoakConnection,
    session_id: str,
    execution_id: str,
    requests: list[dict[str, Any]],
    *,
    helper: bool,
) -> dict[str, Any] | None:
    """Answer `requests`; the execution's result, or None when a helper found it busy or the
    execution could not be resumed (recorded)."""
    responses = _responses(run, requests)
    run.parked.pop(execution_id, None)
    params = {"sessionId": session_id, "executionId": execution_id, "responses": responses}
    for _ in range(MAX_ATTEMPTS):
        seen = connection.stream(session_id).turn_finished
        try:
            result: dict[str, Any] = await connection.call("session/resume", params)
        except SessionBusy:
            run.stats.busy_refusals += 1
            if helper:
                return None
            await _wait_for_turn_end(connection, session_id, seen)
            continue
        except RpcError as error:
            # After a crash an effect may be uncertain: the resume refuses (never re-runs it)
            # and the session stays blocked until the execution is abandoned.
            run.stats.resume_failures.append(f"{session_id}/{execution_id}: {error!r}")
            run.stats.refused.add(execution_id)
            if not run.crashing:
                run.stats.anomalies.append(f"resume refused: {error!r}")
            await _abandon(run, connection, session_id, execution_id)
            return None
        if helper:
            run.stats.helper_resumes += 1
            run.helped.add(execution_id)
        else:
            run.stats.resumes += 1
            if execution_id in run.helped:
                run.stats.idempotent_redeliveries += 1
        for response in responses:
            answered = run.stats.approved if response["approved"] else run.stats.denied
            answered.add(response["requestId"])
        return result
    run.stats.anomalies.append(f"resume of {execution_id} never accepted")
    return None


async def _abandon(
    run: SoakRun, connection: SoakConnection, session_id: str, execution_id: str
) -> None:
    """Abandon an execution nobody can resume (another client may have done it first)."""
    params = {"sessionId": session_id, "executionId": execution_id}
    for _ in range(MAX_ROUNDS):
        seen = connection.stream(session_id).turn_finished
        try:
            await connection.call("session/abandon", params)
        except SessionBusy:
            await _wait_for_turn_end(connection, session_id, seen)
            continue
        except StaleResponse:
            pass  # abandoned (or finished) meanwhile, by another client
        except RpcError as error:
            run.stats.anomalies.append(f"abandon of {execution_id} refused: {error!r}")
            return
        run.stats.abandoned.add(execution_id)
        return
    run.stats.anomalies.append(f"abandon of {execution_id} never accepted")


async def _help_pending(run: SoakRun, connection: SoakConnection, session_id: str) -> None:
    """Answer whatever waits on the session (any client may, G-076)."""
    pending = (await connection.call("session/pending", {"sessionId": session_id}))["pending"]
    if pending is not None:
        await _resume(
            run,
            connection,
            session_id,
            pending["executionId"],
            pending["requests"],
            helper=True,
        )


async def _answer_late(
    run: SoakRun, connection: SoakConnection, session_id: str, execution_id: str
) -> None:
    """A slow person: give another client the chance to answer first, or (under crashes) the
    daemon the chance to die and come back while the wait is parked."""
    run.stats.slow_approvals += 1
    stream = connection.stream(session_id)
    restarted = run.restarted
    if run.crashing:
        run.slow_waits.add(execution_id)
        run.slow_wait_added.set()
        try:
            with trio.move_on_after(SLOW_APPROVAL_WAIT):
                await restarted.wait()
            if not run.up.is_set():
                await restarted.wait()  # killed meanwhile: answer once it is back
        finally:
            run.slow_waits.discard(execution_id)
        return
    with trio.move_on_after(SLOW_APPROVAL_WAIT):
        while execution_id not in stream.resolved:
            await stream.changed.wait()


async def _one_turn(
    run: SoakRun, connection: SoakConnection, session_id: str, turn_id: str, prompt: str
) -> None:
    stream = connection.stream(session_id)
    for _ in range(MAX_ATTEMPTS):
        if stream.needs_resubscribe:
            await connection.subscribe(session_id)
        seen = stream.turn_finished
        started = time.perf_counter()
        try:
            result: dict[str, Any] | None = await connection.call(
                "session/run", {"sessionId": session_id, "prompt": prompt, "turnId": turn_id}
            )
        except SessionBusy:
            run.stats.busy_refusals += 1
            await _wait_for_turn_end(connection, session_id, seen)
            continue
        except ExecutionPending:
            run.stats.pending_refusals += 1
            await _help_pending(run, connection, session_id)
            continue
        run.stats.run_seconds.append(time.perf_counter() - started)
        waited = False
        for _ in range(MAX_ROUNDS):
            if result is None or result["status"] != "waiting":
                break
            waited = True
            execution_id = result["executionId"]
            requests = result["requests"]
            run.parked[execution_id] = (session_id, frozenset(r["requestId"] for r in requests))
            run.waits += 1
            if run.waits % SLOW_APPROVER == 0:
                await _answer_late(run, connection, session_id, execution_id)
            result = await _resume(
                run, connection, session_id, execution_id, requests, helper=False
            )
        run.stats.turns_waited += waited
        if result is not None and result["status"] == "completed":
            run.stats.turns_completed += 1
            run.stats.completed_by_session[session_id] += 1
        elif result is not None:
            run.stats.anomalies.append(f"{turn_id} ended {result['status']}")
        return
    run.stats.anomalies.append(f"{turn_id} never accepted after {MAX_ATTEMPTS} attempts")


async def _client(run: SoakRun, index: int) -> None:
    """One client: subscribe to its session, run its turns; reconnect after a kill; once its
    turns are done, wait for every other client (`_finish`) — exactly once."""
    session_id = run.shape.session_of(index)
    name = f"client {index:02d} ({session_id})"
    done = 0
    while name not in run.finished:
        try:
            run.activity[name] = "connecting"
            async with open_soak_connection(run.daemon.socket_path) as connection:
                run.live.add(connection)
                run.connection_of[name] = connection
                try:
                    await connection.subscribe(session_id)
                    while not run.client_done(done):
                        turn_id = f"c{index}-t{done}"
                        prompt = f"client {index} turn {done}"
                        run.activity[name] = f"turn {turn_id}"
                        await _one_turn(run, connection, session_id, turn_id, prompt)
                        done += 1
                        run.progress()
                    run.activity[name] = "finishing"
                    await _finish(run, name, connection, session_id)
                    run.activity[name] = "done"
                finally:
                    run.live.discard(connection)
                    _collect(run, connection)
        except ConnectionGone:
            if not run.crashing:
                raise
            run.stats.interrupted_calls += 1
            if name not in run.finished:
                run.activity[name] = "waiting for the daemon to be back"
                await run.up.wait()
        except LostResponse as lost:
            run.stats.lost_responses.append(f"{name}: {lost}")
            await _finish(run, name, None, session_id)


async def _finish(
    run: SoakRun, name: str, connection: SoakConnection | None, session_id: str
) -> None:
    """Count this client finished; once every client is, wait until this connection saw the
    session's last event."""
    run.finished.add(name)
    if len(run.finished) == run.shape.clients:
        run.all_done.set()
    await run.all_done.wait()
    if connection is None or connection.peer.closed:
        return  # killed while it waited for the others: nothing more can arrive
    target = max(
        c.stream(session_id).position
        for c in run.live
        if session_id in c.streams and not c.peer.closed
    )
    with trio.move_on_after(10):
        await connection.wait_for_seq(session_id, target)
    last = connection.stream(session_id).position
    if last < target:
        connection_faults = f"{session_id}: connection stopped at seq {last} of {target}"
        run.stats.stream_faults.append(connection_faults)


def _collect(run: SoakRun, connection: SoakConnection) -> None:
    for stream in connection.streams.values():
        run.stats.events += stream.events
        run.stats.text_deltas += stream.text_deltas
        run.stats.compactions.update((stream.session_id, seq) for seq in stream.compactions)
        run.stats.overflows += stream.overflows
    run.stats.stream_faults.extend(
        f"{f.session_id}: expected seq {f.expected_seq}, got {f.got_seq} ({f.note})"
        for f in connection.faults
    )


# -- set-up, killer, driver -----------------------------------------------------------------


async def create_sessions(run: SoakRun) -> None:
    """Create every session with its workspace (seed file, notes/ and out/) and script."""
    async with open_soak_connection(run.daemon.socket_path) as connection:
        for index in range(run.shape.sessions):
            session_id = f"soak-{index}"
            cwd = run.home.workspace(session_id)
            (cwd / "seed.txt").write_text("seed\n")
            (cwd / "notes").mkdir(exist_ok=True)
            (cwd / "out").mkdir(exist_ok=True)
            # Under crashes clients run on until the last kill: give them script to spare.
            turns = run.shape.turns_of_session(index) * (3 if run.crashing else 1)
            await connection.call(
                "session/create",
                {
                    "cwd": str(cwd),
                    "sessionId": session_id,
                    "provider": "scripted",
                    "script": session_script(session_id, turns + turns // 4),
                    "permissions": {"allow": ["Write(notes/**)"]},
                    **(
                        {"contextWindow": run.shape.context_window}
                        if run.shape.context_window
                        else {}
                    ),
                },
            )


async def _killer(run: SoakRun) -> None:
    """SIGKILL the daemon `kills` times at random moments; check the stored state while it
    is down, restart it, check every acknowledged wait is still pending (G-075)."""
    rng = random.Random(run.seed)
    try:
        for kill in range(run.shape.kills):
            await trio.sleep(rng.uniform(0.05, 0.8))
            if kill == run.shape.kills - 1:
                await _until_a_slow_wait(run)
            run.up = trio.Event()
            run.daemon.kill()
            run.stats.kills += 1
            acknowledged = dict(run.parked)
            run.stats.storage_faults.extend(check_storage_offline(run.home))
            run.daemon.start()
            await _check_parked_survived(run, acknowledged)
            run.up.set()
            run.restarted.set()
            run.restarted = trio.Event()
    finally:
        run.killer_done.set()


async def _until_a_slow_wait(run: SoakRun) -> None:
    """Return once an acknowledged wait's approver waits for the next restart (bounded: a
    workload that parks nothing is caught by the test's own check instead)."""
    with trio.move_on_after(30):
        # Another client may answer a slow approver's wait first (G-076): only one nobody
        # answered yet counts, so look again whenever a slow wait is added, or soon.
        while not run.slow_waits & run.parked.keys():
            run.slow_wait_added = trio.Event()
            with trio.move_on_after(0.02):
                await run.slow_wait_added.wait()


async def _check_parked_survived(
    run: SoakRun, acknowledged: dict[str, tuple[str, frozenset[str]]]
) -> None:
    async with open_soak_connection(run.daemon.socket_path) as connection:
        for execution_id, (session_id, request_ids) in acknowledged.items():
            if execution_id not in run.parked:
                continue  # a resume was sent meanwhile: its fate is the resume's
            run.stats.waits_checked_after_restart += 1
            pending = (await connection.call("session/pending", {"sessionId": session_id}))[
                "pending"
            ]
            listed = (
                pending is not None
                and pending["executionId"] == execution_id
                and {r["requestId"] for r in pending["requests"]} >= request_ids
            )
            if not listed:
                run.stats.storage_faults.append(
                    f"{session_id}: acknowledged wait {execution_id} not pending after restart "
                    f"(session/pending: {pending})"
                )


async def _settle(run: SoakRun) -> None:
    """Answer whatever still waits once the clients are gone (a wait the last kill left, or one
    nobody ran into afterwards): every parked approval must be resumable (G-088) — or, for an
    effect a kill made uncertain, refused and abandoned (G-094)."""
    async with open_soak_connection(run.daemon.socket_path) as connection:
        for index in range(run.shape.sessions):
            session_id = f"soak-{index}"
            for _ in range(MAX_ROUNDS):
                reply = await connection.call("session/pending", {"sessionId": session_id})
                pending = reply["pending"]
                if pending is None:
                    break
                run.stats.settled += 1
                await _resume(
                    run,
                    connection,
                    session_id,
                    pending["executionId"],
                    pending["requests"],
                    helper=False,
                )


class SoakHung(Exception):
    """The soak did not finish in time; the message says what every client was doing."""


async def run_soak(run: SoakRun, *, timeout: float) -> SoakStats:
    """Create the sessions, run every client (and the killer), answer what still waits, and
    return the statistics. `SoakHung` (naming each client's activity) past `timeout`."""
    started = time.perf_counter()
    run.up.set()
    if not run.crashing:
        run.killer_done.set()
    with trio.move_on_after(timeout) as guard:
        await create_sessions(run)
        if not run.crashing and run.daemon.alive():
            run.stats.rss_start_kib = run.daemon.rss_kib()
        async with trio.open_nursery() as nursery:
            if run.crashing:
                nursery.start_soon(_killer, run)
            async with trio.open_nursery() as clients:
                for index in range(run.shape.clients):
                    clients.start_soon(_client, run, index)
            nursery.cancel_scope.cancel()
        await _settle(run)
    if guard.cancelled_caught:
        raise SoakHung("the soak did not finish:\n" + "\n".join(run.describe()))
    run.stats.wall_seconds = time.perf_counter() - started
    return run.stats


async def still_pending(run: SoakRun) -> dict[str, Any]:
    """Every session's pending execution, for the sessions that have one."""
    found: dict[str, Any] = {}
    async with open_soak_connection(run.daemon.socket_path) as connection:
        for index in range(run.shape.sessions):
            session_id = f"soak-{index}"
            reply = await connection.call("session/pending", {"sessionId": session_id})
            if reply["pending"] is not None:
                found[session_id] = reply["pending"]
    return found
