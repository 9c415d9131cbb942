"""The ``robotactl`` command group: global options, command registry, error → exit status.

``robotactl [--socket PATH] [--json] [--no-autostart] [--answer-timeout SECONDS] COMMAND ...``
(PROTOCOL.md §9). Global options come before the command. Each command lives in a module
under `robotactl.commands` and is imported only when it runs (or when ``--help`` lists it), so
adding one is a line in `COMMANDS` plus its module, and ``robotactl --help`` never pays for
trio or msgspec.

A command talks to robotad in one of two ways. `call_daemon` runs a plain function with a
blocking, trio-free client (`protocol.blocking_client`): every command whose requests are
answered one by one uses it, so it starts in the time of click, msgspec and one round trip;
each of its waits for a reply is shown on a terminal and given up on when robotad stays silent
(`robotactl.unanswered`).
`run_with_daemon` runs a coroutine with a trio peer: only the commands that follow robotad's
work as it goes (``run``, ``approve``, ``deny``, ``compact``) pay for trio. Both fail alike, and
both connect alike: a wait for robotad to take the connection (its backlog full) is shown and
given up on as a silence is (`ClientOptions.connect_watch`, decision 82).

Exit statuses (`robotactl.exit_codes`): 0 completed, 1 error, 2 usage, 3 waiting for approval,
4 aborted. A command signals a failure by raising `CommandFailed` (or letting a `protocol`
`RpcError` or a `DaemonUnavailable` escape `call_daemon` or `run_with_daemon`, which turn them
into one); click turns usage errors into status 2 itself.

Its size is one concept: the frame every command runs in — the global options, the lazy
registry, the two ways to reach robotad and the one mapping of what they raise to what a
person reads and to an exit status.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from robotactl import __version__
from robotactl.exit_codes import EXIT_CODES_HELP, ExitCode
from robotactl.render import Output
from robotactl.seconds import Seconds
from robotactl.terminal_text import visible

if TYPE_CHECKING:
    from protocol.blocking_client import BlockingClient
    from protocol.peer import JsonRpcPeer, NotificationCallback
    from robotactl.unanswered import ConnectWatch

__all__ = [
    "ANSWER_TIMEOUT",
    "COMMANDS",
    "FROM_ENVIRONMENT",
    "ClientOptions",
    "CommandFailed",
    "DaemonNotRunningFailed",
    "JsonErrorShown",
    "LazyGroup",
    "RpcFailed",
    "TurnAbortedFailed",
    "call_daemon",
    "cli",
    "first_command",
    "run_with_daemon",
    "session_from_environment",
]

T = TypeVar("T")

#: Seconds robotad may leave a request of a one-shot command unanswered before robotactl asks
#: whether it is alive, and gives up if not (``--answer-timeout``; `robotactl.unanswered`).
ANSWER_TIMEOUT = 30.0

#: command name → ``module:attribute`` of its `click.Command`, imported on first use.
COMMANDS: dict[str, str] = {
    "status": "robotactl.commands.daemon:status",
    "shutdown": "robotactl.commands.daemon:shutdown",
    "call": "robotactl.commands.call:call",
    "new": "robotactl.commands.sessions:new",
    "ls": "robotactl.commands.sessions:ls",
    "show": "robotactl.commands.show:show",
    "fork": "robotactl.commands.sessions:fork",
    "close": "robotactl.commands.sessions:close",
    "rm": "robotactl.commands.sessions:rm",
    "run": "robotactl.commands.turns:run",
    "approve": "robotactl.commands.turns:approve",
    "deny": "robotactl.commands.turns:deny",
    "abort": "robotactl.commands.turns:abort",
    "abandon": "robotactl.commands.abandon:abandon",
    "compact": "robotactl.commands.settings:compact",
    "context": "robotactl.commands.settings:context",
    "mode": "robotactl.commands.settings:mode",
    "rule": "robotactl.commands.settings:rule",
    "export": "robotactl.commands.records:export",
    "import": "robotactl.commands.records:import_",
    "history": "robotactl.commands.records:history",
    "log": "robotactl.commands.records:log",
    "acp": "robotactl.acp.command:acp",
    "chat": "robotactl.chat.command:chat",
    "mcp": "robotactl.commands.mcp:mcp",
}


@dataclass
class ClientOptions:
    """The global options, as every command receives them (``@click.pass_obj``)."""

    socket: str | None = None
    autostart: bool = True
    output: Output = field(default_factory=Output)
    #: ``--answer-timeout``: seconds robotad may stay silent (`robotactl.unanswered`).
    answer_timeout: float = ANSWER_TIMEOUT

    @property
    def socket_path(self) -> Path:
        """The socket to use: ``--socket``, ``ROBOTA_SOCKET``, the runtime dir, /tmp."""
        from protocol.socket_path import resolve_socket_path

        return resolve_socket_path(self.socket)

    def connect_watch(self) -> ConnectWatch:
        """What a connect to robotad is watched by while its backlog is full: shown on a
        terminal after a second, given up on after ``--answer-timeout`` (decision 82)."""
        from robotactl.unanswered import ConnectWatch
        from robotactl.waiting import WaitingLine

        line = WaitingLine.for_terminal(self.output)
        return ConnectWatch(self.socket_path, bound=self.answer_timeout, line=line)


class CommandFailed(click.ClickException):
    """A command failed: `message` goes to stderr as ``robotactl: message``, then exit 1.

    A subclass sets `exit_code` for another status (3 waiting, 4 aborted).
    """

    exit_code = ExitCode.ERROR

    def show(self, file: Any = None) -> None:
        Output().error(self.format_message())

    def document(self) -> dict[str, Any]:
        """The error as ``--json`` prints it on stderr."""
        return {"error": {"message": self.format_message()}}


class JsonErrorShown(click.ClickException):
    """Any click error of a ``--json`` run, shown as one JSON line on stderr (same status):
    ``{"error": {code, message, data}}`` for the daemon's errors (plus ``hint``), else
    ``{"error": {"message"}}``."""

    def __init__(self, original: click.ClickException) -> None:
        super().__init__(original.format_message())
        self.exit_code = original.exit_code  # type: ignore[misc]
        self.original = original

    def show(self, file: Any = None) -> None:
        original = self.original
        if isinstance(original, CommandFailed):
            document = original.document()
        else:
            document = {"error": {"message": original.format_message(), "usage": True}}
        Output().error_json(document)


class DaemonNotRunningFailed(CommandFailed):
    """Nothing listens at `socket_path` and starting robotad was not allowed."""

    def __init__(self, message: str, socket_path: Path) -> None:
        super().__init__(message)
        self.socket_path = socket_path


class RpcFailed(CommandFailed):
    """The daemon answered with a JSON-RPC error: ``error CODE: message`` and its data, then
    `hint` (what to do about it) when the command knows one; all of it made visible."""

    def __init__(self, code: int, message: str, data: Any = None, hint: str | None = None) -> None:
        super().__init__(message)
        self.code, self.data, self.hint = code, data, hint
        if code == -32009:  # a compaction aborted (the history untouched): exit 4, as a turn
            self.exit_code = ExitCode.ABORTED  # type: ignore[misc]

    def show(self, file: Any = None) -> None:
        output = Output()
        output.rpc_error(self.code, self.message, self.data)
        if self.hint:
            output.notice(output.style(f"hint: {visible(self.hint)}", "yellow", err=True))

    def document(self) -> dict[str, Any]:
        from robotactl.render import rpc_error_document

        document = rpc_error_document(self.code, self.message, self.data)
        if self.hint:
            document["hint"] = self.hint
        return document


class TurnAbortedFailed(RpcFailed):
    """The daemon reported the turn aborted (-32006): exit 4 whichever command saw it."""

    exit_code = ExitCode.ABORTED


class LazyGroup(click.Group):
    """A group whose commands are named in `lazy_commands` and imported on first use."""

    def __init__(self, *args: Any, lazy_commands: Mapping[str, str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy_commands = dict(lazy_commands)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy_commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is not None or cmd_name not in self.lazy_commands:
            return command
        module_name, _, attribute = self.lazy_commands[cmd_name].partition(":")
        command = getattr(importlib.import_module(module_name), attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"{self.lazy_commands[cmd_name]} is not a click command")
        self.add_command(command, cmd_name)
        return command

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """Parse the global options; with ``--json`` among them, a usage error there (an
        option without its value, a bad ``ROBOTA_NO_AUTOSTART``) is JSON too."""
        given = list(args)  # click's parser consumes `args`
        try:
            return super().parse_args(ctx, args)
        except click.ClickException as exc:
            if "--json" in given[: first_command(given)]:
                raise JsonErrorShown(exc) from None
            raise

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command; with ``--json``, its error (usage errors included, a missing or
        unknown command too) is JSON, and so is an interruption (Ctrl-C)."""
        try:
            return super().invoke(ctx)
        except click.ClickException as exc:
            if isinstance(exc, click.NoSuchOption) and exc.option_name in _GLOBAL_OPTIONS:
                command = ctx.invoked_subcommand or "COMMAND"
                value = _GLOBAL_VALUES.get(exc.option_name)
                option = exc.option_name + (f" {value}" if value else "")
                exc.message += (  # type: ignore[misc]
                    f" It is a global option, given before the command: robotactl {option} "
                    f"{command} …"
                )
                # Not "Did you mean '--session'?" after that: the option they meant is this.
                exc.possibilities = []  # type: ignore[misc]
            if ctx.params.get("json_mode") and not isinstance(exc, JsonErrorShown):
                raise JsonErrorShown(exc) from None
            if not isinstance(exc, CommandFailed):
                # click quotes some of what was typed as it is ("Got unexpected extra
                # argument (…)"): an escape sequence there would reach the terminal.
                exc.message = visible(exc.message)  # type: ignore[misc]
            raise
        except (click.Abort, KeyboardInterrupt):
            # A prompt's Ctrl-C is Abort; anywhere else (waiting for the daemon, for a key
            # command…) it is still KeyboardInterrupt here: click turns it into "Aborted!"
            # only above this method, which is no JSON.
            if ctx.params.get("json_mode"):
                raise JsonErrorShown(CommandFailed("interrupted")) from None
            raise click.Abort() from None


#: The group's own options that take a value, with the value's name.
_GLOBAL_VALUES = {"--socket": "PATH", "--answer-timeout": "SECONDS"}
#: The group's own options, which a user may well type after the command.
_GLOBAL_OPTIONS = frozenset({"--json", "--no-autostart", *_GLOBAL_VALUES})


def first_command(args: list[str]) -> int:
    """The index of the first argument that is not a global option (or `len(args)`)."""
    index = 0
    while index < len(args) and args[index].startswith("-"):
        index += 2 if args[index] in _GLOBAL_VALUES else 1
    return min(index, len(args))


@click.group(
    cls=LazyGroup,
    lazy_commands=COMMANDS,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog=EXIT_CODES_HELP + "\n\n\b\nEnvironment:\n"
    "  ROBOTA_SOCKET          socket path when --socket is not given\n"
    "  ROBOTA_NO_AUTOSTART=1  same as --no-autostart\n"
    "  ROBOTA_ANSWER_TIMEOUT  --answer-timeout when it is not given\n"
    "  ROBOTA_SESSION         session id, or a unique prefix, when -s is not given\n"
    "  NO_COLOR               never colour the output",
)
@click.option(
    "--socket",
    metavar="PATH",
    callback=lambda ctx, param, value: _socket_given(value, ctx, param),
    help="robotad's socket (default: ROBOTA_SOCKET, $XDG_RUNTIME_DIR/robota/robotad.sock, "
    "/tmp/robota-$UID/robotad.sock).",
)
@click.option(
    "--json",
    "json_mode",
    is_flag=True,
    help="Print results as JSON on stdout (for scripts).",
)
@click.option(
    "--no-autostart",
    is_flag=True,
    envvar="ROBOTA_NO_AUTOSTART",
    help="Fail instead of starting robotad when nothing answers at the socket.",
)
@click.option(
    "--answer-timeout",
    type=Seconds(0.001),
    default=ANSWER_TIMEOUT,
    show_default=True,
    metavar="SECONDS",
    envvar="ROBOTA_ANSWER_TIMEOUT",
    help="Give up (exit 1) when robotad takes no connection this long, or leaves a request "
    "unanswered this long and does not answer daemon/status on a second connection either: "
    "it is stopped or stuck. A robotad that answers is waited for. run, approve, deny, "
    "compact, chat and acp bound only the connection.",
)
@click.version_option(
    __version__, "--version", prog_name="robotactl", message="%(prog)s %(version)s"
)
@click.pass_context
def cli(
    ctx: click.Context,
    socket: str | None,
    json_mode: bool,
    no_autostart: bool,
    answer_timeout: float,
) -> None:
    """robotactl — talk to robotad, the daemon that owns your AI-agent sessions.

    Starts robotad in the background when nothing answers at the socket (unless
    --no-autostart). On a terminal, a connection robotad has not taken, or a request it has
    not answered, within a second is shown as waiting.
    """
    ctx.obj = ClientOptions(
        socket=socket,
        autostart=not no_autostart,
        output=Output(json_mode=json_mode),
        answer_timeout=answer_timeout,
    )


def _socket_given(value: str | None, ctx: click.Context, param: click.Parameter) -> str | None:
    """``--socket`` as given; an empty one is a usage error, not "the default socket"."""
    if value is not None and not value:
        raise click.BadParameter("is empty: give the socket's path, or leave it out", ctx, param)
    return value


def call_daemon(
    options: ClientOptions,
    body: Callable[[BlockingClient], T],
    *,
    autostart: bool | None = None,
    timeout: float | None = None,
    waited_before: float = 0.0,
) -> T:
    """Connect (autostarting per `options` unless `autostart` overrides) and return what
    `body` returns for the blocking client, whose requests wait at most `timeout` seconds by
    default (None, the default: as long as the daemon takes). The client is closed afterwards.

    The connect is watched (`ClientOptions.connect_watch`), and so is each wait for a reply
    (`robotactl.unanswered.AnswerWatch`): shown on a terminal after a second, given up on
    when robotad stays silent for ``--answer-timeout``; `waited_before` is how long the first
    request has been awaited already (``status``'s quick path asked first).

    trio is imported only to start a missing daemon. Failures become `CommandFailed` exactly
    as in `run_with_daemon`, plus a request that timed out or that a silent robotad left
    unanswered (exit 1).
    """
    from robotactl.connection import connect_blocking
    from robotactl.unanswered import AnswerWatch
    from robotactl.waiting import WaitingLine

    path = options.socket_path
    allowed = options.autostart if autostart is None else autostart
    with (
        _failures_explained(path),
        connect_blocking(
            path, autostart=allowed, timeout=timeout, watch=options.connect_watch()
        ) as client,
    ):
        client.watcher = AnswerWatch(
            path,
            bound=options.answer_timeout,
            line=WaitingLine.for_terminal(options.output),
            waited_before=waited_before,
            peer=client.socket,
        )
        return body(client)


def run_with_daemon(
    options: ClientOptions,
    body: Callable[[JsonRpcPeer], Awaitable[T]],
    *,
    autostart: bool | None = None,
    on_notification: NotificationCallback | None = None,
) -> T:
    """Connect (autostarting per `options` unless `autostart` overrides), run `body` with the
    peer under trio, and return its value. `on_notification` receives the daemon's
    notifications on that connection (see `robotactl.turn_stream.EventRelay`). The connect is
    watched as `call_daemon`'s is; the requests are not.

    Failures become `CommandFailed` (exit 1): an unreachable daemon with its explanation, a
    JSON-RPC error as `RpcFailed` (exit 4 for an abort: -32006 as `TurnAbortedFailed`, -32009),
    a connection the daemon dropped. Other exceptions (click's own included) pass unchanged.
    """
    import trio

    from robotactl.connection import connect

    path = options.socket_path
    allowed = options.autostart if autostart is None else autostart
    watch = options.connect_watch()

    async def session() -> T:
        async with connect(
            path, autostart=allowed, on_notification=on_notification, watch=watch
        ) as peer:
            return await body(peer)

    with _failures_explained(path):
        try:
            return trio.run(session)
        except BaseExceptionGroup as group:
            # The connection's nursery wraps whatever the body raised; one leaf is the error.
            raise _sole_exception(group) from None


#: The click context's `meta` key of a session named by ``ROBOTA_SESSION``, not ``-s``
#: (`robotactl.sessions.checked_session_id` sets it): an error about that session then says
#: where its id came from.
FROM_ENVIRONMENT = "robotactl.session_from_environment"


def session_from_environment() -> str | None:
    """The session this command was given by ``ROBOTA_SESSION`` (as typed), or None when it
    was named with ``-s``, not named, or no command is being run."""
    ctx = click.get_current_context(silent=True)
    value = ctx.meta.get(FROM_ENVIRONMENT) if ctx is not None else None
    return value if isinstance(value, str) else None


@contextmanager
def _failures_explained(path: Path) -> Iterator[None]:
    """Turn what talking to the daemon at `path` can raise into the `CommandFailed` a person
    reads; let everything else through."""
    from protocol.blocking_client import RequestTimeout
    from protocol.errors import RpcError, TurnAborted
    from protocol.jsonrpc import ConnectionLost, MalformedResponse
    from robotactl.connection import DaemonNotRunning, DaemonUnavailable, why_closed

    try:
        yield
    except DaemonNotRunning as exc:
        raise DaemonNotRunningFailed(str(exc), exc.socket_path) from None
    except DaemonUnavailable as exc:
        raise CommandFailed(str(exc)) from None
    except TurnAborted as exc:
        raise TurnAbortedFailed(exc.code, exc.message, exc.data) from None
    except RpcError as exc:
        from robotactl.hints import hint_for

        hint = hint_for(exc.code, exc.data, from_environment=session_from_environment())
        raise RpcFailed(exc.code, exc.message, exc.data, hint) from None
    except ConnectionLost as exc:
        raise CommandFailed(why_closed(path, str(exc))) from None
    except MalformedResponse as exc:
        raise CommandFailed(f"robotad at {path} sent an unusable reply: {exc}") from None
    except RequestTimeout as exc:
        raise CommandFailed(
            f"robotad at {path} did not answer {exc.method} within {exc.timeout:g} s"
        ) from None


def _sole_exception(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The one exception inside nested single-member groups, else the group itself."""
    current: BaseException = group
    while isinstance(current, BaseExceptionGroup) and len(current.exceptions) == 1:
        current = current.exceptions[0]
    return current
