"""``new``, ``ls``, ``fork``, ``close`` and ``rm``: sessions as things to create and manage.

``new`` and ``fork`` print only the new session's id (PROTOCOL.md §9), so
``sid=$(robotactl new)`` works; ``--json`` prints the ``SessionInfo`` instead. ``ls`` shows
every stored session — damaged records too, marked, never hidden — newest first.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from robotactl.cli import ClientOptions, RpcFailed, call_daemon
from robotactl.seconds import Seconds
from robotactl.sessions import checked_session_id, resolve_session, session_option

if TYPE_CHECKING:
    from protocol.blocking_client import BlockingClient
    from protocol.methods import SearchResult, SessionSummary
    from protocol.shapes import SessionInfo

__all__ = ["close", "first_prompts", "fork", "list_rows", "ls", "new", "rm", "session_state"]

#: Permission modes (PROTOCOL.md §5, ``session/setPermissionMode``).
MODES = ("default", "acceptEdits", "plan", "bypassPermissions", "auto")
#: Sandbox modes (PROTOCOL.md §10.4, ``session/create {sandbox}``).
SANDBOX_MODES = ("off", "read-only", "workspace-write")
#: Widest title shown by ``ls``.
TITLE_WIDTH = 40
#: Prompts ``ls`` reads from the prompt history to title untitled sessions.
PROMPT_SCAN = 5000


@click.command(short_help="Create a session; print its id.")
@click.option(
    "--cwd",
    type=click.Path(exists=True, file_okay=False, resolve_path=True),
    default=None,
    help="Working directory of the session's tools (default: the current directory).",
)
@click.option("--provider", metavar="NAME", help="Provider name (default: robotad's config).")
@click.option("--model", metavar="MODEL", help="Model (default: the provider's).")
@click.option(
    "--mode",
    type=click.Choice(MODES),
    default=None,
    help="Permission mode (default: default).",
)
@click.option(
    "--sandbox",
    type=click.Choice(SANDBOX_MODES),
    default=None,
    help="Confine the session's commands (default: robotad's [sandbox] mode).",
)
@click.option(
    "--id",
    "session_id",
    metavar="ID",
    callback=checked_session_id,
    help="Session id (default: generated).",
)
@click.option(
    "--script",
    type=click.Path(exists=True, dir_okay=False, allow_dash=True),
    default=None,
    metavar="FILE.json",
    help="Steps for the offline scripted provider: a JSON array (`-` reads stdin).",
)
@click.option("--system", metavar="TEXT", help="System message.")
@click.option("--allow", multiple=True, metavar="PATTERN", help="Allow rule (repeatable).")
@click.option("--ask", multiple=True, metavar="PATTERN", help="Ask rule (repeatable).")
@click.option("--deny", multiple=True, metavar="PATTERN", help="Deny rule (repeatable).")
@click.option(
    "--idle-timeout",
    type=Seconds(0.001),
    default=None,
    metavar="SECONDS",
    help="Fail a model call that sends nothing for this long (default: the provider's, "
    "120 s unless robotad's config says otherwise).",
)
@click.pass_obj
def new(
    options: ClientOptions,
    cwd: str | None,
    provider: str | None,
    model: str | None,
    mode: str | None,
    sandbox: str | None,
    session_id: str | None,
    script: str | None,
    system: str | None,
    allow: Sequence[str],
    ask: Sequence[str],
    deny: Sequence[str],
    idle_timeout: float | None,
) -> None:
    """Create a session working in --cwd (default: here) and print its id.

    \b
    Examples:
      robotactl new
      robotactl new --provider local --model qwen2.5-coder --mode acceptEdits
      robotactl new --script examples/demo-script.json --allow 'Read(*)'
      robotactl new --provider local --idle-timeout 300
      robotactl new --sandbox workspace-write

    A malformed --allow/--ask/--deny pattern is a usage error (exit 2), each one named.
    With --json, prints the session/create result (SessionInfo).
    """
    params: dict[str, Any] = {"cwd": cwd or os.path.realpath(os.getcwd())}
    optional = {
        "sessionId": session_id,
        "provider": provider,
        "model": model,
        "permissionMode": mode,
        "sandbox": sandbox,
        "systemMessage": system,
    }
    params.update({key: value for key, value in optional.items() if value is not None})
    rules = {
        name: list(values) for name, values in (("allow", allow), ("ask", ask), ("deny", deny))
    }
    if any(rules.values()):
        params["permissions"] = {name: values for name, values in rules.items() if values}
    if script is not None:
        params["script"] = _read_script(script)
    if idle_timeout is not None:
        params["idleTimeoutMs"] = max(1, round(idle_timeout * 1000))

    def create(client: BlockingClient) -> SessionInfo:
        from protocol.shapes import SessionInfo

        return client.request("session/create", params, result_type=SessionInfo)

    from robotactl.usage import as_usage_error

    try:
        info = call_daemon(options, create)
    except RpcFailed as exc:
        raise as_usage_error(exc, _OPTION_OF_PATH) from None
    _print_new_session(options, info)


#: Where session/create's params hold what `new`'s options gave, for usage errors.
_OPTION_OF_PATH = {
    "$.permissions.allow": "--allow",
    "$.permissions.ask": "--ask",
    "$.permissions.deny": "--deny",
    "$.idleTimeoutMs": "--idle-timeout",
    "$.script": "--script",
}


def _read_script(path: str) -> list[Any]:
    """The JSON array in `path` (stdin for ``-``); anything else is a located usage error.
    The steps themselves are checked by robotad, which names every bad member."""
    import sys

    from robotactl.commands.call import parse_json

    where = "stdin" if path == "-" else path
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
        steps = parse_json(text, where)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise click.BadParameter(str(exc), param_hint="--script") from None
    if not isinstance(steps, list):
        raise click.BadParameter(f"{where}: expected a JSON array of steps", param_hint="--script")
    return steps


def _print_new_session(options: ClientOptions, info: SessionInfo) -> None:
    if options.output.json_mode:
        import msgspec

        options.output.json(msgspec.to_builtins(info))
    else:
        options.output.line(info.session_id)


@click.command(short_help="List sessions, newest first.")
@click.pass_obj
def ls(options: ClientOptions) -> None:
    """List every stored session, newest first: id, title (its first prompt), working
    directory, last update, message count and state. Damaged records are listed as
    `corrupt` or `unsupported`; a fork is marked with the session it came from.

    With --json, prints the session/list result.
    """
    from protocol.methods import SearchResult, SessionList

    def listing(client: BlockingClient) -> tuple[SessionList, dict[str, str]]:
        result = client.request("session/list", {}, result_type=SessionList)
        prompts: dict[str, str] = {}
        if not options.output.json_mode and any(s.title is UNSET for s in result.sessions):
            # Untitled sessions are shown by their first prompt, from the prompt history
            # (which, unlike reading each session, loads nothing).
            search = client.request(
                "history/search", {"limit": PROMPT_SCAN}, result_type=SearchResult
            )
            prompts = first_prompts(search)
        return result, prompts

    from msgspec import UNSET

    result, prompts = call_daemon(options, listing)
    output = options.output
    if output.json_mode:
        import msgspec

        output.json(msgspec.to_builtins(result))
        return
    if not result.sessions:
        output.notice("no sessions yet; create one with `robotactl new`")
        return
    header = ("ID", "TITLE", "CWD", "UPDATED", "MSGS", "STATE")
    output.columns(header, list_rows(result.sessions, now=datetime.now(UTC), prompts=prompts))


def first_prompts(search: SearchResult) -> dict[str, str]:
    """Session id → its earliest prompt among `search`'s entries (which come newest first)."""
    earliest: dict[str, str] = {}
    for entry in search.entries:
        earliest[entry.session_id] = entry.prompt  # later entries are older: they win
    return earliest


def session_state(summary: SessionSummary) -> str:
    """``running``, ``waiting``, ``loaded`` or ``idle`` — or the damage (``corrupt``,
    ``unsupported``), which is all that is known of such a record."""
    if summary.status != "ok":
        return summary.status
    if summary.running:
        return "running"
    if summary.waiting:
        return "waiting"
    return "loaded" if summary.loaded else "idle"


def list_rows(
    sessions: Sequence[SessionSummary],
    *,
    now: datetime,
    prompts: Mapping[str, str] | None = None,
) -> list[tuple[str, ...]]:
    """``ls`` rows: id, title (else the first prompt in `prompts` of a session that kept a
    message, not a lost turn's; ``↳ from X:`` before a fork's), cwd, updated, messages, state."""
    from msgspec import UNSET

    from robotactl.formatting import format_when, home_relative, shorten

    rows: list[tuple[str, ...]] = []
    for summary in sessions:
        if summary.title is UNSET:
            title = (prompts or {}).get(summary.session_id, "") if summary.message_count else ""
        else:
            title = summary.title
        if summary.forked_from is not UNSET:
            title = f"↳ from {summary.forked_from}: {title}".rstrip(": ")
        count = "?" if summary.message_count is None else str(summary.message_count)
        rows.append(
            (
                summary.session_id,
                shorten(title, TITLE_WIDTH) or "—",
                home_relative(summary.cwd),
                format_when(summary.updated_at, now=now),
                count,
                session_state(summary),
            )
        )
    return rows


@click.command(short_help="Fork a session; print the new id.")
@session_option
@click.option(
    "--at",
    "at_message",
    metavar="MESSAGE_ID",
    help="Last message to keep (default: the whole history; `robotactl show` lists ids).",
)
@click.option(
    "--id",
    "new_id",
    metavar="NEW_ID",
    callback=checked_session_id,
    help="Id of the fork (default: generated).",
)
@click.pass_obj
def fork(
    options: ClientOptions, session: str | None, at_message: str | None, new_id: str | None
) -> None:
    """Start a new session from this one's history (up to --at), same cwd, provider, model,
    mode and rules, and print its id. The source is left untouched; a pending approval is
    not carried over.

    With --json, prints the session/fork result (SessionInfo).
    """
    from protocol.shapes import SessionInfo

    def branch(client: BlockingClient) -> SessionInfo:
        params: dict[str, Any] = {"sessionId": resolve_session(client, session)}
        if at_message is not None:
            params["atMessageId"] = at_message
        if new_id is not None:
            params["newSessionId"] = new_id
        return client.request("session/fork", params, result_type=SessionInfo)

    _print_new_session(options, call_daemon(options, branch))


@click.command(short_help="Close a session (persist and unload it).")
@session_option
@click.pass_obj
def close(options: ClientOptions, session: str | None) -> None:
    """Let the session finish what it is doing (on a terminal, the wait is shown), persist
    it and unload it from robotad. It stays stored: any later command on it loads it again.

    With --json, prints the session/close result.
    """

    from protocol.methods import CloseResult

    def unload(client: BlockingClient) -> tuple[str, CloseResult]:
        session_id = resolve_session(client, session)
        params = {"sessionId": session_id}
        # Closing drains a running turn first, which takes as long as the turn does.
        return session_id, client.request(
            "session/close", params, result_type=CloseResult, timeout=None
        )

    session_id, result = call_daemon(options, unload)
    if options.output.json_mode:
        options.output.json({"closed": result.closed})
    else:
        options.output.line(f"closed {session_id}")


@click.command(short_help="Delete a stored session.")
@click.argument("session_arg", metavar="[ID]", required=False, callback=checked_session_id)
@click.option(
    "-s",
    "--session",
    "session_opt",
    metavar="ID",
    callback=checked_session_id,
    help="The session to delete (an id or a unique prefix, as for every command); or give ID.",
)
@click.option("-f", "--force", is_flag=True, help="Close the session first if it is loaded.")
@click.pass_obj
def rm(
    options: ClientOptions, session_arg: str | None, session_opt: str | None, force: bool
) -> None:
    """Delete session ID (or -s ID; a unique prefix will do): its record, log and journal. A
    loaded session is refused unless --force (which closes it first). Never guessed: name it.

    With --json, prints the session/delete result.
    """
    if session_arg is not None and session_opt is not None and session_arg != session_opt:
        raise click.UsageError("name the session once: either ID or -s ID")
    given = session_arg or session_opt
    if given is None:
        raise click.UsageError("name the session to delete: robotactl rm -s ID")

    from protocol.methods import DeleteResult

    def delete(client: BlockingClient) -> tuple[str, DeleteResult]:
        session_id = resolve_session(client, given)
        if force:
            from protocol.errors import SessionNotFound
            from protocol.methods import SessionList

            listing = client.request("session/list", {}, result_type=SessionList)
            if any(s.session_id == session_id and s.running for s in listing.sessions):
                options.output.notice(
                    f"waiting for the running turn of {session_id} to end before closing it "
                    "(Ctrl-C stops waiting; `robotactl abort -s ID` ends the turn)…"
                )
            with contextlib.suppress(SessionNotFound):  # the delete below reports it
                # Closing drains a running turn first: no bound on the wait.
                client.request("session/close", {"sessionId": session_id}, timeout=None)
        params = {"sessionId": session_id}
        return session_id, client.request("session/delete", params, result_type=DeleteResult)

    try:
        session_id, result = call_daemon(options, delete)
    except RpcFailed as exc:
        if exc.code == -32014 and not force:
            exc.hint = f"close it first (`robotactl close -s {given}`), or use `rm --force`"
        raise
    if options.output.json_mode:
        options.output.json({"deleted": result.deleted})
    else:
        options.output.line(f"deleted {session_id}")
