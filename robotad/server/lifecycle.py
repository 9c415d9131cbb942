"""The daemon's life, start to exit: claim the socket, serve, announce, shut down cleanly.

`serve_daemon` is what ``robotad run`` does, in this order:

1. find the listener — systemd's fd 3 when socket-activated, else the path from ``--socket`` /
   ``ROBOTA_SOCKET`` / ``$XDG_RUNTIME_DIR/robota`` / ``/tmp/robota-$UID``;
2. check (or create, 0700) the directory that holds it, take the instance lock beside it, and
   only then bind — a stale socket is replaced, a live one is never touched; then the same
   lock in the state folder, so that one daemon owns a state folder whatever its socket. A
   lock held by a daemon that is shutting down (it marked it so) is waited for, at most
   `PREDECESSOR_WAIT` seconds: its socket is gone, and a daemon started meanwhile (the next
   robotactl command after ``robotactl shutdown``) must not refuse as "already running"
   (`claims`);
3. open the application, add the daemon methods to its router, start the server;
4. announce readiness: one byte on ``--ready-fd`` (then closed), ``READY=1`` to systemd, and the
   watchdog if systemd asked for one; the allocator, tuned before anything else, is trimmed
   periodically from now on, and what start-up made is exempted from the garbage collector's
   walks (`allocator`);
5. serve until ``daemon/shutdown``, a signal, or the removal of the socket file it bound
   (nobody can reach it then; under socket activation the file is systemd's, neither watched
   nor removed), then shut down gracefully (see `Server`), close the application, remove the
   socket file it bound and release the lock. Returning means exit 0.

Any reason not to start is raised as `StartupError` before a byte of readiness is announced,
with a message fit to print as is. SIGTERM and SIGINT are received from the first step on
(``robotad run`` holds them from before its imports, `startup_signals`): one that comes before
step 4 stops the start-up at its next wait (a write under way is finished first) and undoes
what it made: no socket file is left, no lock held; `serve_daemon` returns without announcing
anything. After step 4 a signal is a graceful shutdown; a second one during it stops it now.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import MutableMapping
from contextlib import ExitStack, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import trio

from protocol.framing import DEFAULT_MAX_FRAME_BYTES
from protocol.shapes import utc_now
from protocol.socket_path import resolve_socket_path
from robotad import open_files, startup_signals
from robotad.config import state_dir
from robotad.log import fields
from robotad.server import allocator
from robotad.server.app import (
    Application,
    ApplicationFactory,
    DaemonContext,
    standalone_application,
)
from robotad.server.claims import claim_socket_folder, claim_state_folder, mark_stopping
from robotad.server.daemon_methods import (
    DEFAULT_GRACE_SECONDS,
    DaemonInfo,
    daemon_version,
    register_daemon_methods,
)
from robotad.server.errors import StartupError
from robotad.server.listener import (
    Listener,
    ListenerError,
    activated_listener,
    bind_listener,
    refuse_non_socket,
)
from robotad.server.lock import InstanceLock
from robotad.server.notify import Notifier
from robotad.server.paths import RuntimeDirError, check_socket_path
from robotad.server.serve import Server
from robotad.server.signals import DaemonSignals

__all__ = ["DEFAULT_EVENT_BUFFER", "DaemonSettings", "StartupError", "serve_daemon"]

log = logging.getLogger("robotad.server")

#: Events buffered per session for replay (``--event-buffer``), PROTOCOL.md §5.
DEFAULT_EVENT_BUFFER: Final = 10_000
#: How often the daemon checks that its socket file is still there (one lstat).
_SOCKET_CHECK_INTERVAL: Final = 5.0


@dataclass(frozen=True)
class DaemonSettings:
    """The command-line settings of one daemon run."""

    socket: Path | None = None
    max_message_bytes: int = DEFAULT_MAX_FRAME_BYTES
    event_buffer: int = DEFAULT_EVENT_BUFFER
    ready_fd: int | None = None
    trace: bool = False
    #: The process is the daemon's alone (``robotad run``): once ready, exempt what start-up
    #: made from the garbage collector's walks (`allocator.settle`; process-wide, so not for
    #: a daemon served inside another program, such as a test).
    settle_heap: bool = False


async def serve_daemon(
    settings: DaemonSettings,
    *,
    app_factory: ApplicationFactory = standalone_application,
    environ: MutableMapping[str, str] | None = None,
    task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run the daemon until it has shut down cleanly (see the module docstring).

    `task_status.started(socket_name)` once serving, right after readiness was announced.
    Runs in the main thread only: it receives SIGTERM and SIGINT from its first moment to its
    last, a signal `startup_signals` held before it included. One that comes before serving
    stops the start-up: what it made (socket file, locks) is undone and it returns without
    announcing anything. `environ` defaults to `os.environ`; the activation and notification
    variables are removed from it once read. Raises `StartupError` when the daemon cannot
    start.
    """
    env = os.environ if environ is None else environ
    failure: Exception | None = None
    with trio.open_signal_receiver(*startup_signals.HELD_SIGNALS) as received:
        signals = DaemonSignals()
        held = startup_signals.take()
        if held is not None:
            signals.deliver(held)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(signals.listen, received)
            try:
                with signals.start_scope:
                    await _serve(settings, app_factory, env, signals, task_status)
            except Exception as exc:  # raised as itself below, not in the nursery's group
                failure = exc
            nursery.cancel_scope.cancel()
    if failure is not None:
        raise failure
    log.info("stopped" if signals.server is not None else "stopped before serving")


async def _serve(
    settings: DaemonSettings,
    app_factory: ApplicationFactory,
    env: MutableMapping[str, str],
    signals: DaemonSignals,
    task_status: trio.TaskStatus[str],
) -> None:
    """`serve_daemon`'s start, serving life and shutdown; `signals.server` is set once
    serving."""
    await trio.lowlevel.checkpoint()  # a signal held already stops the start before it acts
    started_at = utc_now()
    allocator.tune()
    open_files.raise_limit()
    with ExitStack() as cleanup:
        ready_pipe = _ReadyPipe.claim(settings.ready_fd)
        cleanup.callback(ready_pipe.close)
        notifier = Notifier.from_environ(env)
        cleanup.callback(notifier.close)
        listener, socket_lock = await _open_listener(settings, env, cleanup)
        socket_name = _socket_name(listener)
        state = state_dir(env)
        state_lock = await claim_state_folder(state, socket_lock.path, cleanup)
        locks = [lock for lock in (socket_lock, state_lock) if lock is not None]
        context = DaemonContext(
            state_dir=state,
            socket_path=socket_name,
            event_buffer=settings.event_buffer,
            trace=settings.trace,
        )
        async with app_factory(context) as app:
            server = Server(
                listener,
                app,
                max_message_bytes=settings.max_message_bytes,
                notifier=notifier,
                on_stopping=functools.partial(mark_stopping, locks),
            )
            info = DaemonInfo(
                version=daemon_version(),
                pid=os.getpid(),
                started_at=started_at,
                socket_path=socket_name,
                state_dir=context.state_dir,
            )
            register_daemon_methods(app.router, info, app, server.request_shutdown)
            async with trio.open_nursery() as nursery:

                async def serve_then_stop(*, task_status: trio.TaskStatus[None]) -> None:
                    await server.run(task_status=task_status)
                    nursery.cancel_scope.cancel()

                await nursery.start(serve_then_stop)
                signals.server = server  # no checkpoint from here to the announcement
                if settings.settle_heap:
                    allocator.settle()
                ready_pipe.announce()
                notifier.ready(f"serving on {socket_name}")
                nursery.start_soon(notifier.run_watchdog)
                nursery.start_soon(allocator.trim_periodically)
                if listener.owned:  # systemd's socket file is systemd's to watch
                    nursery.start_soon(_stop_when_unreachable, listener, server)
                task_status.started(socket_name)
                _log_serving(info, listener, app)


def _log_serving(info: DaemonInfo, listener: Listener, app: Application) -> None:
    """The ``serving`` line: the server's facts, then the application's own (the config
    file it read: the server cannot know whether there was one)."""
    log.info(
        "serving",
        extra=fields(
            socket=info.socket_path,
            pid=info.pid,
            activated=listener.activated,
            state_dir=str(info.state_dir),
            **app.serving_fields(),
        ),
    )


async def _open_listener(
    settings: DaemonSettings, env: MutableMapping[str, str], cleanup: ExitStack
) -> tuple[Listener, InstanceLock]:
    """The listener, with the instance lock held beside it (released by `cleanup`), and that
    lock."""
    try:
        listener = activated_listener(env)
    except ListenerError as exc:
        raise StartupError(str(exc)) from exc
    if listener is not None:
        cleanup.callback(listener.sock.close)
        if settings.socket is not None and listener.path not in (None, settings.socket):
            log.warning(
                "socket-activated: serving the listener systemd passed, not --socket",
                extra=fields(listener=listener.path, ignored=settings.socket),
            )
        base = listener.path or resolve_socket_path(settings.socket, env)
        return listener, await claim_socket_folder(base.parent, cleanup)
    path = resolve_socket_path(settings.socket, env)
    try:
        check_socket_path(path)
        refuse_non_socket(path)  # before the lock file is made beside it
    except (RuntimeDirError, ListenerError) as exc:
        raise StartupError(str(exc)) from exc
    lock = await claim_socket_folder(path.parent, cleanup)
    try:
        listener = bind_listener(path)
    except ListenerError as exc:
        raise StartupError(str(exc)) from exc
    cleanup.callback(listener.sock.close)
    cleanup.callback(listener.remove_socket_file)
    return listener, lock


def _socket_name(listener: Listener) -> str:
    """The listener's path, ``@name`` for an abstract socket."""
    if listener.path is not None:
        return os.fspath(listener.path)
    name = listener.sock.getsockname()
    if isinstance(name, bytes):
        name = os.fsdecode(name)
    return "@" + name[1:] if name.startswith("\0") else name or "(unnamed)"


class _ReadyPipe:
    """``--ready-fd``: one byte is written once serving, then the descriptor is closed.

    A client that started the daemon waits on the other end instead of sleeping; if the daemon
    fails to start, the descriptor is closed without a byte (the client sees end-of-file).
    """

    def __init__(self, fd: int | None) -> None:
        self._fd = fd

    @classmethod
    def claim(cls, fd: int | None) -> _ReadyPipe:
        """Check that `fd` is open and keep it from leaking into child processes."""
        if fd is not None:
            try:
                os.fstat(fd)
                os.set_inheritable(fd, False)
            except OSError as exc:
                raise StartupError(f"--ready-fd {fd} is not an open file descriptor") from exc
        return cls(fd)

    def announce(self) -> None:
        if self._fd is not None:
            try:
                os.write(self._fd, b"\n")
            except OSError as exc:
                log.warning("cannot signal readiness on --ready-fd: %s", exc.strerror or exc)
        self.close()

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            with suppress(OSError):
                os.close(fd)


async def _stop_when_unreachable(listener: Listener, server: Server) -> None:
    """Shut down gracefully once the socket file we bound is removed or replaced (logind
    removes the runtime folder at logout; systemd-tmpfiles ages files out of /tmp): nobody
    can connect any more, yet the daemon would hold the state folder's lock, so the next
    robotactl could start none and ``robotactl shutdown`` would find nothing to stop."""
    while True:
        await trio.sleep(_SOCKET_CHECK_INTERVAL)  # a polled file: no event to wait on
        if listener.socket_file_is_gone():
            break
    log.warning(
        "socket file removed or replaced: nobody can connect; shutting down",
        extra=fields(socket=listener.path),
    )
    server.request_shutdown(DEFAULT_GRACE_SECONDS)
