"""The ``robotad`` command.

``robotad [OPTIONS]`` or ``robotad run [OPTIONS]`` serves until ``daemon/shutdown``, SIGTERM or
SIGINT, then exits 0; one of those signals during start-up ends it with 0 too, before it
serves and leaving nothing behind. It exits 1 with a one-line reason when it cannot start
(another daemon holds the socket, an unsafe runtime directory, a bad ``--ready-fd``), 2 on a
usage error.
``robotad install-units`` writes the systemd user units.

The serving options are accepted before or after ``run``; when given in both places the later
(``run``'s) wins.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
import trio

from protocol.framing import DEFAULT_MAX_FRAME_BYTES
from robotad import startup_signals

__all__ = ["main"]


def _not_empty(ctx: click.Context, param: click.Parameter, value: Path | None) -> Path | None:
    """An empty ``--socket`` is a usage error (click would make it ``.``), not the folder."""
    if value is not None and str(value) in ("", "."):
        raise click.BadParameter("is empty: give the socket's path, or leave it out", ctx, param)
    return value


F = TypeVar("F", bound=Callable[..., Any])

#: What ``robotad --help`` and ``robotad run --help`` end with: where robotad reads and keeps
#: things, and what its exit statuses mean (``\b`` keeps click from re-flowing it).
_EPILOG = (
    "\b\nFiles and environment:\n"
    "  ROBOTA_CONFIG     config file (default: $XDG_CONFIG_HOME/robota/config.toml,\n"
    "                    ~/.config/robota/config.toml; read once, at start)\n"
    "  ROBOTA_STATE_DIR  sessions, journals and logs (default: $XDG_STATE_HOME/robota,\n"
    "                    ~/.local/state/robota)\n"
    "  ROBOTA_SOCKET     socket path when --socket is not given\n"
    "\n\b\nExit codes:\n"
    "  0  stopped (daemon/shutdown, SIGTERM or SIGINT)\n"
    "  1  could not start (a config error, another robotad, an unsafe folder)\n"
    "  2  usage (bad options)"
)

_DEFAULTS: dict[str, Any] = {
    "socket": None,
    "log_level": "info",
    "max_message_bytes": DEFAULT_MAX_FRAME_BYTES,
    "event_buffer": 10_000,
    "ready_fd": None,
    "trace": False,
}


def _serve_options(command: F) -> F:
    """The serving options, every default None so that "not given" is visible when merging."""
    options = [
        click.option(
            "--socket",
            type=click.Path(dir_okay=False, path_type=Path),
            default=None,
            callback=_not_empty,
            help="Socket path (default: ROBOTA_SOCKET, $XDG_RUNTIME_DIR/robota/robotad.sock, "
            "/tmp/robota-$UID/robotad.sock). Optional under socket activation.",
        ),
        click.option(
            "--log-level",
            type=click.Choice(["debug", "info", "warning", "error"], case_sensitive=False),
            default=None,
            help="Least severe level written to stderr (default: info).",
        ),
        click.option(
            "--max-message-bytes",
            type=click.IntRange(min=1),
            default=None,
            metavar="N",
            help=f"Largest accepted frame in bytes (default: {DEFAULT_MAX_FRAME_BYTES}).",
        ),
        click.option(
            "--event-buffer",
            type=click.IntRange(min=1),
            default=None,
            metavar="N",
            help="Events kept per session for replay to late subscribers (default: 10000).",
        ),
        click.option(
            "--ready-fd",
            type=click.IntRange(min=0),
            default=None,
            metavar="FD",
            help='Once serving, write "\\n" to this descriptor and close it.',
        ),
        click.option(
            "--trace",
            is_flag=True,
            default=None,
            help="Set TRACEPARENT for hooks on a turn's path.",
        ),
        click.option(
            "--idle-unload-seconds",
            type=click.FloatRange(min=0),
            default=None,
            metavar="S",
            help="Unload a session nobody uses or watches after S seconds; it reloads on its "
            "next use (default: 600; 0: never).",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """``robotad --version``: the version robotad reports in ``daemon/status``."""
    if not value or ctx.resilient_parsing:
        return
    from robotad.server.daemon_methods import daemon_version

    click.echo(f"robotad {daemon_version()}")
    ctx.exit()


@click.group(
    invoke_without_command=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog=_EPILOG,
)
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_version,
    help="Print the version and exit.",
)
@_serve_options
@click.pass_context
def main(ctx: click.Context, /, **options: Any) -> None:
    """robotad — the per-user daemon that owns every AI-agent session of its user.

    Without a command, serves (same as `robotad run`).
    """
    ctx.obj = options
    if ctx.invoked_subcommand is None:
        _serve(_merge(options))


@main.command("run", epilog=_EPILOG, short_help="Serve on the socket (what plain robotad does).")
@_serve_options
@click.pass_context
def run_command(ctx: click.Context, /, **options: Any) -> None:
    """Serve on the socket until daemon/shutdown, SIGTERM or SIGINT."""
    outer: dict[str, Any] = ctx.obj or {}
    _serve(_merge(outer, options))


@main.command("install-units", short_help="Write the systemd user units.")
def install_units_command() -> None:
    """Write robotad.socket and robotad.service to the systemd user unit directory."""
    from robotad.units import install_units  # lazy: only this command needs it

    for path in install_units():
        click.echo(path)


def _merge(*layers: dict[str, Any]) -> dict[str, Any]:
    merged = dict(_DEFAULTS)
    for layer in layers:
        merged.update({key: value for key, value in layer.items() if value is not None})
    return merged


def _serve(options: dict[str, Any]) -> None:
    startup_signals.hold()  # before the imports below: a stop asked for meanwhile is obeyed
    from robotad.daemon.app import session_application_factory
    from robotad.log import configure_logging
    from robotad.server.lifecycle import DaemonSettings, StartupError, serve_daemon

    configure_logging(options["log_level"])
    settings = DaemonSettings(
        socket=options["socket"],
        max_message_bytes=options["max_message_bytes"],
        event_buffer=options["event_buffer"],
        ready_fd=options["ready_fd"],
        trace=bool(options["trace"]),
        settle_heap=True,
    )
    idle = options.get("idle_unload_seconds")  # absent unless given: the manager's default
    app_factory = (
        session_application_factory()
        if idle is None
        else session_application_factory(idle_unload_seconds=idle)
    )
    try:
        trio.run(functools.partial(serve_daemon, settings, app_factory=app_factory))
    except StartupError as exc:
        raise click.ClickException(str(exc)) from None
