"""``context``, ``compact``, ``mode`` and ``rule``: a session's context window and permissions.

Each prints a short line or two for people; with ``--json`` the daemon's result object
(``mode`` without a MODE prints ``{"mode": …}``, the shape ``session/setPermissionMode``
answers with).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from robotactl.cli import ClientOptions, RpcFailed, call_daemon, run_with_daemon
from robotactl.commands.sessions import MODES
from robotactl.sessions import resolve_session, resolve_session_streaming, session_option

if TYPE_CHECKING:
    import msgspec

    from protocol.blocking_client import BlockingClient
    from protocol.methods import CompactResult, PermissionRules
    from protocol.peer import JsonRpcPeer
    from protocol.shapes import ContextState

__all__ = ["compact", "context", "context_line", "mode", "rule", "rule_rows"]


def context_line(state: ContextState) -> str:
    """``12.3k / 200k tokens (6.15% used, 93.85% free)``."""
    from robotactl.formatting import format_context

    used = format_context(state.used_tokens, state.max_tokens, state.used_percentage)
    return used[:-1] + f", {state.remaining_percentage:.2f}% free)"


@click.command(short_help="Show how full the session's context window is.")
@session_option
@click.pass_obj
def context(options: ClientOptions, session: str | None) -> None:
    """Show the tokens in use against the context window.

    With --json, prints the session/context result (ContextState).
    """
    from protocol.shapes import ContextState

    def ask(client: BlockingClient) -> ContextState:
        params = {"sessionId": resolve_session(client, session)}
        return client.request("session/context", params, result_type=ContextState)

    state = call_daemon(options, ask)
    if options.output.json_mode:
        import msgspec

        options.output.json(msgspec.to_builtins(state))
    else:
        options.output.line(context_line(state))


@click.command(short_help="Summarise the history to free context.")
@session_option
@click.option("--instructions", metavar="TEXT", help="What the summary should keep or stress.")
@click.pass_obj
def compact(options: ClientOptions, session: str | None, instructions: str | None) -> None:
    """Replace the session's history with a summary made by its model (history is left as
    it was if that fails). Says so when there was nothing to summarise.

    While the model summarises, a line on stderr says so (on a terminal, with the seconds
    waited). Ctrl-C aborts the compaction, leaving the history as it was (exit 4).

    With --json, prints the session/compact result.
    """
    from robotactl.compacting import CompactionView, compact_following

    views: list[CompactionView] = []

    def relay(method: str, params: msgspec.Raw) -> None:
        if views:
            views[0](method, params)

    async def summarise(peer: JsonRpcPeer) -> CompactResult:
        session_id = await resolve_session_streaming(peer, session)
        views.append(CompactionView(options.output, session_id))
        params: dict[str, Any] = {"sessionId": session_id}
        if instructions is not None:
            params["instructions"] = instructions
        # The summary is a model call: it takes as long as the model does.
        return await compact_following(peer, views[0], params)

    result = run_with_daemon(options, summarise, on_notification=relay)
    output = options.output
    if output.json_mode:
        import msgspec

        output.json(msgspec.to_builtins(result))
    elif result.compacted:
        output.line(f"compacted: {_compaction_summary(result)}")
    else:
        output.line(f"nothing to compact ({context_line(result.before)})")


def _compaction_summary(result: CompactResult) -> str:
    from robotactl.formatting import format_tokens

    before, after = result.before, result.after
    return (
        f"{format_tokens(before.used_tokens)} → {format_tokens(after.used_tokens)} tokens "
        f"({before.used_percentage:.2f}% → {after.used_percentage:.2f}% used)"
    )


@click.command(short_help="Show or set the permission mode.")
@session_option
@click.argument("new_mode", metavar="[MODE]", required=False, type=click.Choice(MODES))
@click.pass_obj
def mode(options: ClientOptions, session: str | None, new_mode: str | None) -> None:
    """Show the session's permission mode, or set it to MODE.

    \b
    Modes:
      default            reading is automatic; edits and commands ask
      acceptEdits        reading and edits are automatic; commands ask
      plan               reading only; edits and commands are denied
      bypassPermissions  everything automatic (deny rules still win)
      auto               a configured classifier decides where `default` would ask

    With --json, prints {"mode": MODE}.
    """

    def change(client: BlockingClient) -> str:
        from protocol.methods import SetPermissionModeResult
        from protocol.shapes import SessionInfo

        session_id = resolve_session(client, session)
        if new_mode is None:
            info = client.request("session/get", {"sessionId": session_id}, result_type=SessionInfo)
            return info.permission_mode
        params = {"sessionId": session_id, "mode": new_mode}
        result = client.request(
            "session/setPermissionMode", params, result_type=SetPermissionModeResult
        )
        return result.mode

    current = call_daemon(options, change)
    if options.output.json_mode:
        options.output.json({"mode": current})
    else:
        options.output.line(current)


@click.command(short_help="Add an allow, ask or deny rule.")
@session_option
@click.argument("kind", type=click.Choice(["allow", "ask", "deny"]))
@click.argument("pattern")
@click.option(
    "--project",
    is_flag=True,
    help="Keep the rule for every session in this working directory (persisted).",
)
@click.pass_obj
def rule(
    options: ClientOptions, session: str | None, kind: str, pattern: str, project: bool
) -> None:
    """Add a permission rule: KIND is allow, ask or deny; PATTERN is `Tool`,
    `Tool(glob)`, `Bash(prefix:*)` or `WebFetch(domain:host)`; an MCP tool or server is
    named without a pattern (`mcp__SERVER__TOOL`, `mcp__SERVER`). Deny wins over ask, ask
    over allow. Prints the session's rules afterwards.

    \b
    Examples:
      robotactl rule allow 'Write(src/**)'
      robotactl rule deny 'Bash(rm:*)' --project

    With --json, prints the session/addRule result ({allow, ask, deny}).
    """
    from protocol.methods import PermissionRules

    def add(client: BlockingClient) -> PermissionRules:
        params = {
            "sessionId": resolve_session(client, session),
            "rule": pattern,
            "kind": kind,
            "scope": "project" if project else "session",
        }
        return client.request("session/addRule", params, result_type=PermissionRules)

    from robotactl.usage import as_usage_error

    try:
        rules = call_daemon(options, add)
    except RpcFailed as exc:
        raise as_usage_error(exc, {"$.rule": "PATTERN"}) from None
    if options.output.json_mode:
        import msgspec

        options.output.json(msgspec.to_builtins(rules))
    else:
        options.output.table(rule_rows(rules))


def rule_rows(rules: PermissionRules) -> list[tuple[str, str]]:
    """``allow  Read(*), Write(src/**)`` rows; an empty list shows as ``—``."""
    return [
        (name, ", ".join(values) or "—")
        for name, values in (("allow", rules.allow), ("ask", rules.ask), ("deny", rules.deny))
    ]
