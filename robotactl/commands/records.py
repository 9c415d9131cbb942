"""``export``, ``import``, ``history`` and ``log``: sessions as files, prompts, and logs.

``export`` writes the artifact (``{schemaVersion, kind, exportedAt, record}``) — the file
``import`` reads back; a session too large for one reply of robotad (16 MiB) is refused
saying how to make it smaller. Without ``--redact`` the artifact holds everything, secrets included,
so ``-o FILE`` creates the file owner-only (0600) and replaces it atomically. ``import``
accepts the bare artifact or ``export --json``'s ``{"artifact": …}`` and prints the new
session's id. ``history`` searches the prompts of every session; ``log`` checks that a
session's log replays completely and exits 1 when it does not.
"""

from __future__ import annotations

import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from robotactl.cli import ClientOptions, CommandFailed, call_daemon
from robotactl.exit_codes import ExitCode
from robotactl.sessions import checked_session_id, resolve_session, session_option

if TYPE_CHECKING:
    from protocol.blocking_client import BlockingClient
    from protocol.methods import HistoryEntry, LogResult

__all__ = ["export", "history", "history_rows", "import_", "log", "log_lines", "write_private"]

#: Widest prompt shown by ``history``.
PROMPT_WIDTH = 80


@click.command(short_help="Export a session as a JSON artifact.")
@session_option
@click.option("--redact", is_flag=True, help="Blank the value of every sensitive key.")
@click.option(
    "-o",
    "--output",
    "path",
    type=click.Path(dir_okay=False, writable=True, allow_dash=True),
    default=None,
    metavar="FILE",
    callback=lambda ctx, param, value: _output_path(value, ctx, param),
    help="Write to FILE (created 0600) instead of stdout (`-`: stdout).",
)
@click.pass_obj
def export(options: ClientOptions, session: str | None, redact: bool, path: str | None) -> None:
    """Export the session — its whole record — as a JSON artifact that `robotactl import`
    reads. Unless --redact, secrets in it are kept: keep the file private.

    With --json, prints the session/export result ({"artifact": …}) on stdout.
    """
    from protocol.methods import ExportResult

    def fetch(client: BlockingClient) -> tuple[str, ExportResult]:
        from protocol.blocking_client import MalformedResponse

        session_id = resolve_session(client, session)
        params = {"sessionId": session_id, "redact": redact}
        try:
            return session_id, client.request("session/export", params, result_type=ExportResult)
        except MalformedResponse as exc:
            if "larger than" not in str(exc):
                raise
            raise CommandFailed(
                f"session {session_id} is more than one reply of robotad carries (16 MiB), so "
                "it cannot be exported whole: compact it (`robotactl compact -s "
                f"{session_id}`) and export again, or fork it at an earlier message "
                f"(`robotactl fork -s {session_id} --at MESSAGE_ID`) and export the fork"
            ) from None

    session_id, result = call_daemon(options, fetch)
    import msgspec

    from robotactl.render import format_json

    artifact = msgspec.to_builtins(result.artifact)
    if path is not None:
        try:
            write_private(Path(path), format_json(artifact) + "\n")
        except OSError as exc:
            raise CommandFailed(f"cannot write {path}: {exc.strerror or exc}") from None
    if options.output.json_mode:
        options.output.json({"artifact": artifact})
    elif path is None:
        options.output.json(artifact)
    else:
        redacted = " (redacted)" if redact else ""
        options.output.notice(f"exported {session_id}{redacted} to {path}")


def _output_path(value: str | None, ctx: click.Context, param: click.Parameter) -> str | None:
    """``-o``'s file: None for stdout (not given, or ``-``); an empty name is a usage error."""
    if value == "":
        raise click.BadParameter("is empty: give a file name, or - for stdout", ctx, param)
    return None if value == "-" else value


def write_private(path: Path, text: str) -> None:
    """Replace `path` with `text` atomically: a 0600 temporary file beside it, fsync'd,
    renamed over it. Nothing partial ever appears under its name."""
    import tempfile

    directory = path.parent if str(path.parent) else Path(".")
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=directory)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


@click.command("import", short_help="Import a session from an exported artifact.")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, allow_dash=True))
@click.option(
    "--id",
    "session_id",
    metavar="ID",
    callback=checked_session_id,
    help="Id of the new session (default: kept).",
)
@click.pass_obj
def import_(options: ClientOptions, file: str, session_id: str | None) -> None:
    """Create a session from FILE, an artifact `robotactl export` wrote (`-` reads stdin),
    and print its id. A defective artifact is refused with every problem located.

    With --json, prints the session/import result (SessionInfo).
    """
    from protocol.shapes import SessionInfo
    from robotactl.commands.call import parse_json

    where = "stdin" if file == "-" else file
    try:
        text = sys.stdin.read() if file == "-" else Path(file).read_text(encoding="utf-8")
        document = parse_json(text, where)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise click.BadParameter(str(exc), param_hint="FILE") from None
    if isinstance(document, dict) and set(document) == {"artifact"}:
        document = document["artifact"]  # what `export --json` prints
    if not isinstance(document, dict):
        raise click.BadParameter(
            f"{where}: expected a JSON object (an artifact)", param_hint="FILE"
        )
    params: dict[str, Any] = {"artifact": document}
    if session_id is not None:
        params["sessionId"] = session_id

    def create(client: BlockingClient) -> SessionInfo:
        return client.request("session/import", params, result_type=SessionInfo)

    info = call_daemon(options, create)
    if options.output.json_mode:
        import msgspec

        options.output.json(msgspec.to_builtins(info))
    else:
        options.output.line(info.session_id)


@click.command(short_help="Search the prompts of every session.")
@click.argument("query", required=False)
@click.option(
    "--cwd",
    type=click.Path(file_okay=False, resolve_path=True),
    default=None,
    help="Only prompts of sessions working in this directory.",
)
@click.option(
    "-n",
    "--limit",
    type=click.IntRange(min=0),
    default=None,
    metavar="N",
    help="At most N prompts (daemon default: 50).",
)
@click.pass_obj
def history(options: ClientOptions, query: str | None, cwd: str | None, limit: int | None) -> None:
    """List past prompts, newest first: all of them, or those containing QUERY.

    With --json, prints the history/search result.
    """
    from protocol.methods import SearchResult

    params: dict[str, Any] = {}
    for key, value in (("query", query), ("cwd", cwd), ("limit", limit)):
        if value is not None:
            params[key] = value

    def search(client: BlockingClient) -> SearchResult:
        return client.request("history/search", params, result_type=SearchResult)

    result = call_daemon(options, search)
    output = options.output
    if output.json_mode:
        import msgspec

        output.json(msgspec.to_builtins(result))
        return
    if result.entries:
        output.columns(("WHEN", "SESSION", "PROMPT"), history_rows(result.entries))
    elif limit != 0:  # `-n 0` asked for none, as `head -n 0` does: "none found" would mislead
        output.notice("no prompts found")
    if result.unreadable_lines:
        output.notice(f"({result.unreadable_lines} unreadable lines of the prompt history skipped)")


def history_rows(entries: list[HistoryEntry]) -> list[tuple[str, str, str]]:
    """``history`` rows: when, session id, the prompt on one line."""
    from robotactl.formatting import format_when, shorten

    now = datetime.now(UTC)
    return [
        (
            format_when(entry.timestamp, now=now),
            entry.session_id,
            shorten(entry.prompt, PROMPT_WIDTH),
        )
        for entry in entries
    ]


@click.command(short_help="Check that the session's log replays completely.")
@session_option
@click.pass_obj
def log(options: ClientOptions, session: str | None) -> None:
    """Replay the session's log and report: how many entries decoded, and every problem
    (line, event, message). Exits 1 when the log is incomplete.

    With --json, prints the session/log result (then exits 1 if incomplete).
    """
    from protocol.methods import LogResult

    def check(client: BlockingClient) -> tuple[str, LogResult]:
        session_id = resolve_session(client, session)
        params = {"sessionId": session_id}
        return session_id, client.request("session/log", params, result_type=LogResult)

    session_id, result = call_daemon(options, check)
    output = options.output
    if output.json_mode:
        import msgspec

        output.json(msgspec.to_builtins(result))
    else:
        for line in log_lines(session_id, result):
            output.line(line)
    if not result.complete:
        raise click.exceptions.Exit(ExitCode.ERROR)


def log_lines(session_id: str, result: LogResult) -> list[str]:
    """The human report of ``session/log``, each problem made visible (it may quote the log).
    The header counts every problem the log has, those the daemon left out of its list too."""
    from msgspec import UNSET

    from robotactl.terminal_text import visible

    state = "complete" if result.complete else f"INCOMPLETE, {problem_count(result)}"
    lines = [f"log of {session_id}: {result.entries} entries, {state}"]
    for problem in result.problems:
        where = [] if problem.line is UNSET else [f"line {problem.line}"]
        if problem.event is not UNSET:
            where.append(f"({problem.event})")
        prefix = " ".join(where)
        lines.append(visible(f"  {prefix + ': ' if prefix else ''}{problem.message}"))
    return lines


def problem_count(result: LogResult) -> str:
    """How many problems `result` reports, as its header says it: "3 problems", or, when
    the daemon listed only the first ones and said how many more there are (its last problem,
    without line or event: `protocol.log_report`), "1500 problems, the first 1000 listed"."""
    from msgspec import UNSET

    from protocol.log_report import left_out_count

    listed = len(result.problems)
    last = result.problems[-1] if result.problems else None
    left_out = None
    if last is not None and last.line is UNSET and last.event is UNSET:
        left_out = left_out_count(last.message)
    if left_out is None:
        return f"{listed} {'problem' if listed == 1 else 'problems'}"
    return f"{listed - 1 + left_out} problems, the first {listed - 1} listed"
