"""Bash: run a shell command in the session's cwd and report its output and exit status.

The command runs as ``/bin/bash -c COMMAND`` (``/bin/sh`` where bash is missing) with stdin from
``/dev/null``, stdout and stderr merged into one captured stream, and the daemon's environment
minus every variable whose name is secret-bearing (``OPENAI_API_KEY``, ``GITHUB_TOKEN``,
``DB_PASSWORD`` … by `is_sensitive_key`): the model must not be able to read the provider's key
with ``echo``. It leads a new session and process group, and the call owns that whole tree: when
the command exits, times out (`timeout` ms, default `DEFAULT_TIMEOUT_MS`, at most
`MAX_TIMEOUT_MS`) or the call is cancelled, every process still in the group or descended from
the command is stopped (SIGTERM, then SIGKILL after `KILL_GRACE_S`). A job meant to outlive the
call must detach itself (``setsid``) and redirect its output. Cancellation propagates only after
the tree is gone. The group is tethered to robotad (`robotad.tools.tether`): a robotad that
dies, however it dies, takes the whole group with it.

The answer holds the output (its head and tail when over `MAX_OUTPUT_CHARS`, with a marker
saying how much was left out) and a last line ``exit status N`` (128 + signal number for a
command killed by a signal), preceded by ``timed out after N ms`` when the time ran out. A
non-zero status or a timeout makes a failed result. `metadata["exit_code"]` holds the status.
"""

from __future__ import annotations

import codecs
import os
import re
import signal
import subprocess
from typing import Annotated

import msgspec
import trio
from msgspec import UNSET, Meta, Struct, UnsetType

from robotad.agent.tool import ToolContext, ToolProfile, ToolResult, TypedTool
from robotad.sandbox.confinement import Confinement, SandboxUnavailable
from robotad.storage.scrub import is_sensitive_key
from robotad.tools.process_group import KILL_GRACE_S, terminate_process_tree
from robotad.tools.tether import open_tethered_process

__all__ = [
    "DEFAULT_TIMEOUT_MS",
    "MAX_COMMAND_CHARS",
    "MAX_OUTPUT_CHARS",
    "MAX_TIMEOUT_MS",
    "BashArguments",
    "BashTool",
    "OutputCapture",
]

DEFAULT_TIMEOUT_MS = 120_000
#: The longest command: Linux takes at most 128 KiB in one argument (``MAX_ARG_STRLEN``, with
#: its NUL), and ``bash -c COMMAND`` is one. Refused before the rules read it: reading a
#: longer one (Python's shlex is quadratic in a token's length) held the daemon for seconds.
MAX_COMMAND_CHARS = 128 * 1024 - 1
MAX_TIMEOUT_MS = 600_000

MAX_OUTPUT_CHARS = 30_000
"""Output kept in the answer: half from the start, half from the end."""

DRAIN_GRACE_S = 1.0
"""After the tree is gone, how long to wait for a detached process to release the output pipe."""

_READ_SIZE = 65536


class BashArguments(Struct, forbid_unknown_fields=True, frozen=True):
    """Run a shell command."""

    command: Annotated[
        str,
        Meta(
            min_length=1,
            max_length=MAX_COMMAND_CHARS,
            description="The command line to run "
            f"(at most {MAX_COMMAND_CHARS:,} bytes in UTF-8: the system's limit for one argument).",
        ),
    ]
    timeout: (
        Annotated[
            int,
            Meta(
                ge=1,
                le=MAX_TIMEOUT_MS,
                description=f"Time limit in milliseconds (default {DEFAULT_TIMEOUT_MS}).",
            ),
        ]
        | UnsetType
    ) = UNSET
    description: (
        Annotated[str, Meta(description="A short note of what the command does.")] | UnsetType
    ) = UNSET

    def __post_init__(self) -> None:
        # The system's limit is in bytes: 100,000 characters of Cyrillic are 200,000 of them,
        # which passed the length check and failed at the spawn as "Argument list too long".
        size = len(self.command.encode("utf-8", "surrogatepass"))
        if size > MAX_COMMAND_CHARS:
            raise ValueError(
                f"the command is {size:,} bytes in UTF-8; the system runs at most "
                f"{MAX_COMMAND_CHARS:,} in one argument - at `$.command`"
            )


class OutputCapture:
    """Keeps the first and last `limit // 2` bytes of a stream, counting what falls between."""

    def __init__(self, limit: int = MAX_OUTPUT_CHARS) -> None:
        self._half = limit // 2
        self._head = bytearray()
        self._tail = bytearray()
        self._total = 0

    def feed(self, data: bytes | bytearray) -> None:
        self._total += len(data)
        room = self._half - len(self._head)
        if room > 0:
            self._head += data[:room]
            data = data[room:]
        if data:
            self._tail += data
            del self._tail[: max(0, len(self._tail) - self._half)]

    def render(self) -> str:
        """The captured text; undecodable bytes become U+FFFD. When the middle was dropped, a
        character cut in two at either edge is left out rather than shown as U+FFFD."""
        omitted = self._total - len(self._head) - len(self._tail)
        if omitted <= 0:
            return (self._head + self._tail).decode("utf-8", "replace")
        head = codecs.getincrementaldecoder("utf-8")("replace").decode(self._head, final=False)
        tail = bytes(self._tail)
        for _ in range(3):  # at most three continuation bytes start a cut character
            if tail[:1] and 0x80 <= tail[0] <= 0xBF:
                tail = tail[1:]
        text = tail.decode("utf-8", "replace")
        return f"{head}\n[… {omitted} bytes of output omitted …]\n{text}"


class BashTool(TypedTool[BashArguments]):
    """The built-in Bash tool (risk ``execute``; permission argument ``command``)."""

    name = "Bash"
    description = (
        "Run a shell command with bash in the session's working directory and return its "
        "combined stdout and stderr plus the exit status. stdin is empty. Default time limit "
        f"{DEFAULT_TIMEOUT_MS // 1000} s (timeout in ms, at most {MAX_TIMEOUT_MS // 1000} s); "
        "on timeout the command and everything it started are killed. Processes left running "
        "in the background are stopped when the command exits."
    )
    profile = ToolProfile(risk="execute", argument_key="command", argument_kind="command")
    Arguments = BashArguments

    def __init__(
        self, confinement: Confinement | None = None, hidden: frozenset[str] = frozenset()
    ) -> None:
        self.confinement = confinement or Confinement()
        #: Variables no command gets, besides the secret-looking ones (`command_environment`).
        self.hidden = hidden
        if self.confinement.confined:
            self.profile = msgspec.structs.replace(self.profile, confined=True)

    async def run(self, arguments: BashArguments, ctx: ToolContext) -> ToolResult:
        timeout_ms = DEFAULT_TIMEOUT_MS if arguments.timeout is UNSET else arguments.timeout
        if not await trio.Path(ctx.cwd).is_dir():
            return ToolResult(
                ok=False, content=f"the session's working directory {ctx.cwd} does not exist"
            )
        try:
            async with self.confinement.exclusive(ctx.cwd):
                return await self._run(arguments, ctx, timeout_ms)
        except SandboxUnavailable as exc:
            return ToolResult(ok=False, content=str(exc), metadata={"sandbox": "unavailable"})

    async def _run(self, arguments: BashArguments, ctx: ToolContext, timeout_ms: int) -> ToolResult:
        """Start the command (confined when the session is) and collect its result. Raises
        `SandboxUnavailable` when it cannot start confined."""
        shell = "/bin/bash" if os.access("/bin/bash", os.X_OK) else "/bin/sh"
        launch = await self.confinement.launch([shell, "-c", arguments.command], ctx.cwd)
        try:
            with launch:  # the sandbox's descriptors are the child's once it has started
                process = await open_tethered_process(  # dies with robotad, whole group
                    launch.argv,
                    cwd=ctx.cwd,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    env=command_environment(hidden=self.hidden),
                    pass_fds=launch.pass_fds,
                )
        except OSError as exc:
            return ToolResult(ok=False, content=f"could not start {shell}: {exc.strerror or exc}")

        capture = OutputCapture()
        try:
            timed_out, released = await _supervise(process, capture, timeout_ms / 1000)
        finally:
            # Whatever ends the call (cancellation included), the tree does not outlive it.
            with trio.CancelScope(shield=True):
                await terminate_process_tree(process, grace=KILL_GRACE_S)
                if process.stdout is not None:
                    await process.stdout.aclose()
        result = _result(process, capture, timeout_ms, timed_out, released)
        if launch.held:
            notes = "\n".join(f"note: {reason}" for reason in launch.held)
            result = ToolResult(
                ok=result.ok, content=f"{result.content}\n{notes}", metadata=result.metadata
            )
        made = await self.confinement.repositories_made(launch)
        if made:
            # Nothing protected them while the command ran: say so where a person reads it.
            notes = "\n".join(
                f"note: this command made the git repository {entry}; the sandbox keeps it "
                "read-only from the next command on, but git runs its hooks and config for "
                "whoever uses git there"
                for entry in made
            )
            result = ToolResult(
                ok=result.ok,
                content=f"{result.content}\n{notes}",
                metadata={**result.metadata, "repositories_made": made},
            )
        return result


async def _supervise(
    process: trio.Process, capture: OutputCapture, timeout_s: float
) -> tuple[bool, bool]:
    """Collect output until the command exits or times out, then stop its tree and drain the
    pipe. Returns (timed out, output stream reached its end)."""
    stream = process.stdout
    assert stream is not None  # opened with stdout=PIPE
    drained = trio.Event()

    async def collect() -> None:
        while data := await stream.receive_some(_READ_SIZE):
            capture.feed(data)
        drained.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(collect)
        with trio.move_on_after(timeout_s) as deadline:
            await process.wait()
        await terminate_process_tree(process, grace=KILL_GRACE_S)
        with trio.move_on_after(DRAIN_GRACE_S):
            await drained.wait()
        nursery.cancel_scope.cancel()
    return deadline.cancelled_caught, drained.is_set()


def _result(
    process: trio.Process,
    capture: OutputCapture,
    timeout_ms: int,
    timed_out: bool,
    released: bool,
) -> ToolResult:
    code = process.returncode
    assert code is not None  # terminate_process_tree reaped it
    lines = []
    output = capture.render()
    if output:
        lines.append(output.removesuffix("\n"))
    if not released:
        lines.append("[output stream still held by a detached process; stopped reading]")
    if timed_out:
        lines.append(f"timed out after {timeout_ms} ms")
    metadata: dict[str, object] = {"exit_code": code if code >= 0 else 128 - code}
    if code < 0:
        name = _signal_name(-code)
        lines.append(f"exit status {128 - code} (killed by {name})")
        metadata["signal"] = name
    else:
        lines.append(f"exit status {code}")
    metadata["timed_out"] = timed_out
    return ToolResult(ok=code == 0 and not timed_out, content="\n".join(lines), metadata=metadata)


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


#: A URL carrying a password (``postgres://app:hunter2@db/x``), or any credentials at all in
#: a web URL (``https://ghp_…@github.com``), whatever its variable's name.
_CREDENTIAL_URL = re.compile(
    r"[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*:[^/\s@]+@|https?://[^/\s@]+@", re.IGNORECASE
)
#: A variable's last word that names a secret on its own (``MYSQL_PWD``, ``GITHUB_PAT``,
#: ``OPENAI_KEY``, ``SENTRY_DSN``), or that a secret word ends (``PGPASSWORD``).
_SECRET_LAST_WORDS = frozenset({"key", "pwd", "pat", "jwt", "dsn", "auth"})
_SECRET_ENDINGS = ("password", "passwd", "secret", "token")
_NAME_WORDS = re.compile(r"[a-z0-9]+")


def _secret_variable(name: str) -> bool:
    if is_sensitive_key(name):
        return True
    words = _NAME_WORDS.findall(name.lower())
    return bool(words) and (words[-1] in _SECRET_LAST_WORDS or words[-1].endswith(_SECRET_ENDINGS))


def command_environment(
    environ: dict[str, str] | None = None, hidden: frozenset[str] = frozenset()
) -> dict[str, str]:
    """The environment a model-driven command gets: the daemon's, without secret-named
    variables (API keys, tokens, passwords), the variables named in `hidden` (the providers'
    ``api_key_env``, whatever they are called) and any whose value is a URL with credentials
    in it (``DATABASE_URL``), so no key is one ``echo`` away from the model."""
    source = dict(os.environ) if environ is None else environ
    return {
        name: value
        for name, value in source.items()
        if name not in hidden
        and not _secret_variable(name)
        and _CREDENTIAL_URL.search(value) is None
    }
