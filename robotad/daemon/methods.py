"""The session methods of PROTOCOL §5 on a `Router`, with their exact params and results.

Where each runs (architecture decision 1): methods that only read in-memory state, or briefly
ask the store, are answered inline in the connection's reader — ``session/get``, ``list``,
``history``, ``context``, ``pending``, ``abort``, ``subscribe``, ``unsubscribe``, ``log``
and ``history/search``. (An inline method on a session that is stored but not loaded loads it
first; that wait holds only this connection's reader.) Methods that wait on a turn, a drain or
a durable write of their own get a task each: ``create``, ``open``, ``close``, ``fork``,
``delete``, ``run``, ``resume``, ``abandon``, ``compact``, ``setPermissionMode``,
``addRule``, ``export`` and ``import``.

The connection is the event subscriber: ``session/subscribe`` and every caller of ``run``,
``resume`` and ``compact`` receive ``session/event`` notifications on it.
"""

from __future__ import annotations

from typing import Any

from protocol.methods import (
    AbandonParams,
    AbandonResult,
    AbortResult,
    AddRuleParams,
    CloseResult,
    CompactParams,
    CompactResult,
    CreateParams,
    DeleteResult,
    Empty,
    ExportParams,
    ExportResult,
    ForkParams,
    HistoryParams,
    HistoryResult,
    ImportParams,
    LogResult,
    OkResult,
    PendingResult,
    PermissionRules,
    ResumeParams,
    RunParams,
    SearchParams,
    SearchResult,
    SessionList,
    SessionRef,
    SetPermissionModeParams,
    SetPermissionModeResult,
    SubscribeParams,
    SubscribeResult,
)
from protocol.methods import Artifact as ArtifactShape
from protocol.peer import CallContext, Router
from protocol.shapes import ContextState, SessionInfo
from robotad.daemon.edge import DomainEdge
from robotad.daemon.operations import RunOutcome, SessionOperations

__all__ = ["register_session_methods"]


def register_session_methods(router: Router, ops: SessionOperations) -> None:
    """Add every session method of PROTOCOL §5 to `router`, served by `ops`; the
    domain's errors answer their wire errors (`DomainEdge`: a refused durable write
    StorageFailed, a malformed setting or input InvalidParams). Registered group by group, in
    this order: a session's lifecycle, its turns, its history and permissions, then its
    events, export, import and logs."""
    edge = DomainEdge(router, ops.manager.state_dir)
    _register_lifecycle(edge, ops)
    _register_turns(edge, ops)
    _register_history_and_permissions(edge, ops)
    _register_events_and_records(edge, ops)


def _register_lifecycle(edge: DomainEdge, ops: SessionOperations) -> None:
    """``session/create``, ``open``, ``get``, ``list``, ``close``, ``fork``, ``delete``."""
    manager = ops.manager

    @edge.method(
        "session/create",
        CreateParams,
        more_issues=manager.assembler.create_issues,
        stand_ins={"cwd": "/"},  # a cwd at fault still lets the patterns be judged
    )
    async def create(params: CreateParams, ctx: CallContext) -> SessionInfo:
        return await ops.create(params)

    @edge.method("session/open", SessionRef)
    async def open_(params: SessionRef, ctx: CallContext) -> SessionInfo:
        return await ops.info(params.session_id)

    @edge.method("session/get", SessionRef, inline=True)
    async def get(params: SessionRef, ctx: CallContext) -> SessionInfo:
        return await ops.info(params.session_id)

    @edge.method("session/list", Empty, inline=True)
    async def list_(params: Empty, ctx: CallContext) -> SessionList:
        return SessionList(sessions=await manager.list())

    @edge.method("session/close", SessionRef)
    async def close(params: SessionRef, ctx: CallContext) -> CloseResult:
        await manager.close(params.session_id)
        return CloseResult()

    @edge.method("session/fork", ForkParams)
    async def fork(params: ForkParams, ctx: CallContext) -> SessionInfo:
        return await ops.fork(params)

    @edge.method("session/delete", SessionRef)
    async def delete(params: SessionRef, ctx: CallContext) -> DeleteResult:
        await manager.delete(params.session_id)
        return DeleteResult()


def _register_turns(edge: DomainEdge, ops: SessionOperations) -> None:
    """``session/run``, ``abort``, ``pending``, ``resume``, ``abandon``, ``compact``."""

    @edge.method("session/run", RunParams)
    async def run(params: RunParams, ctx: CallContext) -> RunOutcome:
        return await ops.run(params, _caller(ctx))

    @edge.method("session/abort", SessionRef, inline=True)
    async def abort(params: SessionRef, ctx: CallContext) -> AbortResult:
        return AbortResult(aborted=await ops.abort(params.session_id))

    @edge.method("session/pending", SessionRef, inline=True)
    async def pending(params: SessionRef, ctx: CallContext) -> PendingResult:
        return PendingResult(pending=await ops.pending(params.session_id))

    @edge.method("session/resume", ResumeParams)
    async def resume(params: ResumeParams, ctx: CallContext) -> RunOutcome:
        return await ops.resume(params, _caller(ctx))

    @edge.method("session/abandon", AbandonParams)
    async def abandon(params: AbandonParams, ctx: CallContext) -> AbandonResult:
        await ops.abandon(params.session_id, params.execution_id)
        return AbandonResult()

    @edge.method("session/compact", CompactParams)
    async def compact(params: CompactParams, ctx: CallContext) -> CompactResult:
        return await ops.compact(params, _caller(ctx))


def _register_history_and_permissions(edge: DomainEdge, ops: SessionOperations) -> None:
    """``session/history``, ``context``, ``setPermissionMode``, ``addRule``."""

    @edge.method("session/history", HistoryParams, inline=True)
    async def history(params: HistoryParams, ctx: CallContext) -> HistoryResult:
        return await ops.history(params)

    @edge.method("session/context", SessionRef, inline=True)
    async def context(params: SessionRef, ctx: CallContext) -> ContextState:
        return await ops.context(params.session_id)

    @edge.method("session/setPermissionMode", SetPermissionModeParams)
    async def set_mode(
        params: SetPermissionModeParams, ctx: CallContext
    ) -> SetPermissionModeResult:
        mode = await ops.set_permission_mode(params.session_id, params.mode)
        return SetPermissionModeResult(mode=mode)  # type: ignore[arg-type]

    @edge.method("session/addRule", AddRuleParams)
    async def add_rule(params: AddRuleParams, ctx: CallContext) -> PermissionRules:
        return await ops.add_rule(params)


def _register_events_and_records(edge: DomainEdge, ops: SessionOperations) -> None:
    """``session/subscribe``, ``unsubscribe``, ``export``, ``import``, ``log`` and
    ``history/search``."""

    @edge.method("session/subscribe", SubscribeParams, inline=True)
    async def subscribe(params: SubscribeParams, ctx: CallContext) -> SubscribeResult:
        after = params.after_seq if isinstance(params.after_seq, int) else None
        latest = await ops.subscribe(params.session_id, ctx.peer, after)
        return SubscribeResult(latest_seq=latest)

    @edge.method("session/unsubscribe", SessionRef, inline=True)
    async def unsubscribe(params: SessionRef, ctx: CallContext) -> OkResult:
        await ops.unsubscribe(params.session_id, ctx.peer)
        return OkResult()

    @edge.method("session/export", ExportParams)
    async def export(params: ExportParams, ctx: CallContext) -> ExportResult:
        artifact: dict[str, Any] = await ops.export(params.session_id, params.redact)
        return ExportResult(
            artifact=ArtifactShape(
                schema_version=artifact["schemaVersion"],
                kind=artifact["kind"],
                exported_at=artifact["exportedAt"],
                record=artifact["record"],
            )
        )

    @edge.method("session/import", ImportParams)
    async def import_(params: ImportParams, ctx: CallContext) -> SessionInfo:
        return await ops.import_session(params)

    @edge.method("session/log", SessionRef, inline=True)
    async def log(params: SessionRef, ctx: CallContext) -> LogResult:
        return await ops.log(params.session_id)

    @edge.method("history/search", SearchParams, inline=True)
    async def search(params: SearchParams, ctx: CallContext) -> SearchResult:
        return await ops.search(params)


def _caller(ctx: CallContext) -> Any:
    """The connection to subscribe a run/resume/compact caller on; None for a notification
    (nobody to deliver to)."""
    return ctx.peer if ctx.request_id is not None else None
