"""Where a provider's API key comes from: `api_key_command`, else robotad's own environment.

PROTOCOL §10.3. `resolve_api_key` is called when a provider is built (each session load):

- ``api_key_command`` runs through ``/bin/sh -c`` with robotad's environment and no stdin;
  the first line it prints is the key. It must exit 0 within `KEY_COMMAND_TIMEOUT` seconds
  and print a non-empty first line, else the provider is refused with a reason that names the
  command's exit status, never its output (which is the key, or part of it). It runs as its
  own process group: one that overruns is killed with everything it started, and only the
  first `KEY_OUTPUT_LIMIT` bytes of its output are kept;
- otherwise the variable ``api_key_env`` names (or the kind's default) is read from *robotad's*
  environment — not the shell a person typed ``export`` in, which robotad never sees. When it
  is unset and a key is required, the refusal says whose environment was searched and the
  ways to give robotad a key.

The key is handed to the provider and to nothing else: never logged, stored or put in a
message.
"""

from __future__ import annotations

import contextlib
import os
import select
import subprocess
import time
from collections.abc import Mapping

from robotad import open_files
from robotad.providers.failures import check_api_key
from robotad.tools.process_group import kill_session

__all__ = [
    "KEY_COMMAND_TIMEOUT",
    "KeyUnavailable",
    "missing_key_message",
    "resolve_api_key",
    "sendable",
]

#: Seconds an ``api_key_command`` may take (a password manager may ask its agent first).
KEY_COMMAND_TIMEOUT = 30.0
#: Bytes of an ``api_key_command``'s output kept (a key is its first line).
KEY_OUTPUT_LIMIT = 64 * 1024


class KeyUnavailable(Exception):
    """The key a provider needs cannot be had; the message says why and what to do."""


def missing_key_message(provider: str, variable: str, *, empty: bool = False) -> str:
    """The refusal for a key variable unset in robotad's environment, or set there to the
    empty string (`empty`: an ``export KEY=$(…)`` whose command printed nothing, a ``KEY=``
    line), which "not set" and the advice about exporting after the start would mislead."""
    where = (
        f"{variable} is set in robotad's environment, but empty (a `{variable}=` line, or "
        "an export of what a command that failed printed)"
        if empty
        else f"{variable} is not set in robotad's environment (robotad does not see "
        "variables exported in your shell after it started)"
    )
    return (
        f"provider {provider!r} needs an API key: {where}. "
        f"Give robotad the key: set api_key_command in [providers.{provider}] "
        f'(e.g. "pass show {provider}"), or put {variable}=… in ~/.config/robota/env '
        "(the systemd unit's EnvironmentFile), or export it before starting robotad"
    )


def resolve_api_key(
    provider: str,
    *,
    command: str | None,
    variable: str | None,
    required: bool,
    environ: Mapping[str, str],
) -> str | None:
    """The key of `provider`: `command`'s first output line when a command is configured,
    else ``environ[variable]``; None when neither gives one and none is `required`.

    Blocking (runs `command`). Raises `KeyUnavailable`, also for a key that cannot travel in
    an HTTP header (`sendable`).
    """
    if command is not None:
        return sendable(_run_key_command(provider, command, environ), provider, "api_key_command")
    if variable is None:
        return None
    key = environ.get(variable) or None
    if key is None and required:
        raise KeyUnavailable(missing_key_message(provider, variable, empty=variable in environ))
    return None if key is None else sendable(key, provider, variable)


def sendable(key: str, provider: str, source: str) -> str:
    """`key` when it can travel in an HTTP header (visible ASCII, no spaces); else a
    `KeyUnavailable` naming where it came from — never the key."""
    try:
        check_api_key(key)
    except ValueError:
        raise KeyUnavailable(
            f"the API key of provider {provider!r} from {source} cannot be sent: a key is "
            "visible ASCII without spaces or control characters (look for a stray quote, "
            "space or pasted character)"
        ) from None
    return key


def _run_key_command(provider: str, command: str, environ: Mapping[str, str]) -> str:
    where = f"api_key_command of provider {provider!r}"
    try:
        process = subprocess.Popen(
            ["/bin/sh", "-c", command],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=dict(environ),
            start_new_session=True,  # its own group: a timeout stops all it started
            preexec_fn=open_files.restore_in_child,
        )
    except OSError as exc:
        raise KeyUnavailable(f"{where} could not start: {exc.strerror}") from None
    try:
        output = _first_output(process, time.monotonic() + KEY_COMMAND_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise KeyUnavailable(f"{where} did not finish within {KEY_COMMAND_TIMEOUT:g} s") from None
    finally:
        _stop_group(process)  # whatever it left running, however it ended
        assert process.stdout is not None
        process.stdout.close()
    if process.returncode != 0:
        raise KeyUnavailable(
            f"{where} exited with status {process.returncode}; run it by hand to see why"
        )
    lines = output.decode(errors="replace").splitlines()
    key = lines[0].strip() if lines else ""
    if not key:
        raise KeyUnavailable(f"{where} printed no key (its first output line is empty)")
    return key


def _first_output(process: subprocess.Popen[bytes], deadline: float) -> bytes:
    """At most `KEY_OUTPUT_LIMIT` bytes of `process`'s output, once it has exited (a child it
    left holding the output open is not waited for). Raises `subprocess.TimeoutExpired` when
    it has not exited by `deadline`."""
    assert process.stdout is not None
    fd = process.stdout.fileno()
    # poll, not select: robotad may hold more than select's 1,024 descriptors (`open_files`).
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    kept = bytearray()
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise subprocess.TimeoutExpired(process.args, KEY_COMMAND_TIMEOUT)
        exited = process.poll() is not None
        ready = poller.poll(0 if exited else min(left, 0.1) * 1000)
        if not ready:
            if exited:
                return bytes(kept)
            continue
        data = os.read(fd, 65536)
        if not data:
            process.wait(timeout=max(left, 0.001))
            return bytes(kept)
        kept += data[: KEY_OUTPUT_LIMIT - len(kept)]


def _stop_group(process: subprocess.Popen[bytes]) -> None:
    """Kill the command's whole session and process group (a child in a group of its own,
    as ``timeout`` makes, too) and reap the shell."""
    kill_session(process.pid)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=5)
