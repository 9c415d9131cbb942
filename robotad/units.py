"""The systemd user units that run robotad on demand (PROTOCOL §1).

`robotad.socket` owns the listening socket at ``%t/robota/robotad.sock`` (``%t`` is
``$XDG_RUNTIME_DIR`` in a user unit); the first client to connect starts `robotad.service`,
which receives the listener as fd 3 (socket activation), reports ``READY=1`` and pings the
watchdog. After ``systemctl --user enable --now robotad.socket`` nobody has to start the daemon.

`render_units` returns the text of both units; `install_units` writes them (atomically) into
``$XDG_CONFIG_HOME/systemd/user/``. ``ExecStart`` always names the real, absolute command of
this installation: the ``robotad`` script beside the running interpreter (same virtual
environment), else the one on ``PATH``, else ``<python> -P -m robotad`` with ``PYTHONPATH``
pointing at this source tree, so an uninstalled checkout works too. Nothing here starts,
enables or reloads anything: the caller runs ``systemctl --user daemon-reload`` afterwards.

The hardening stays within what a *user* manager can apply without user namespaces:
seccomp-based restrictions, ``NoNewPrivileges`` and a private umask. The service reads
``EnvironmentFile=-%h/.config/robota/env`` (optional), the place to give robotad API keys
(PROTOCOL §10.3), since it never sees the variables of a person's shell. Filesystem sandboxing
(``ProtectSystem``, ``ProtectHome``, ``PrivateTmp``) is deliberately absent: the tools a
session runs must see the user's own files, and clients fall back to a socket under ``/tmp``.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from robotad.storage.fsio import atomic_write

#: Unit files are read by the user's systemd manager; nothing in them is secret.
UNIT_MODE = 0o644

__all__ = ["SERVICE_NAME", "SOCKET_UNIT_NAME", "exec_command", "install_units", "render_units"]

SOCKET_UNIT_NAME = "robotad.socket"
SERVICE_NAME = "robotad.service"

_SOCKET_UNIT = """\
# robotad's listening socket; `robotad install-units` installs it with robotad.service.
[Unit]
Description=robota agent-session daemon (listening socket)

[Socket]
ListenStream=%t/robota/robotad.sock
SocketMode=0600
DirectoryMode=0700
RemoveOnStop=yes

[Install]
WantedBy=sockets.target
"""

_SERVICE_UNIT = """\
# robotad, started by robotad.socket. `robotad install-units` writes this file with ExecStart
# naming this installation's absolute command; run it again after moving the installation.
[Unit]
Description=robota agent-session daemon
Requires=robotad.socket
After=robotad.socket

[Service]
Type=notify
NotifyAccess=main
# Keys and other variables for robotad (API keys: robotad reads its own environment, never
# your shell's): NAME=value lines; the leading "-" makes the file optional.
EnvironmentFile=-%h/.config/robota/env
{environment}ExecStart={exec_start}
WatchdogSec=30
Restart=on-failure
RestartSec=1
# SIGTERM reaches robotad alone, so running turns get their shutdown grace before the
# tools and hooks they spawned are killed.
KillMode=mixed
TimeoutStopSec=30
UMask=0077
NoNewPrivileges=yes
LockPersonality=yes
RestrictRealtime=yes
RestrictSUIDSGID=yes
SystemCallArchitectures=native

[Install]
Also=robotad.socket
"""


def exec_command(exec_path: str | None = None) -> tuple[list[str], dict[str, str]]:
    """The command (argv) and extra environment that start this installation's robotad.

    An explicit `exec_path` is used as the whole command, made absolute. Otherwise: the
    ``robotad`` script beside ``sys.executable``, then ``shutil.which("robotad")``, then
    ``sys.executable -P -m robotad`` (``-P`` keeps the working directory off ``sys.path``, so a
    ``protocol`` package in the user's home cannot shadow ours) with ``PYTHONPATH`` set to the
    directory that holds the ``robotad`` package.
    """
    if exec_path is not None:
        return [os.path.abspath(exec_path)], {}
    sibling = Path(sys.executable).parent / "robotad"
    if sibling.is_file() and os.access(sibling, os.X_OK):
        return [os.path.abspath(sibling)], {}
    found = shutil.which("robotad")
    if found is not None:
        return [os.path.abspath(found)], {}
    package_root = Path(__file__).resolve().parent.parent
    return [os.path.abspath(sys.executable), "-P", "-m", "robotad"], {
        "PYTHONPATH": str(package_root)
    }


def render_units(*, exec_path: str | None = None) -> dict[str, str]:
    """The text of both units, keyed by file name (`SOCKET_UNIT_NAME`, `SERVICE_NAME`).

    `exec_path` as in `exec_command`. Raises ValueError for a command no unit file can carry
    (a control character such as a newline).
    """
    argv, environment = exec_command(exec_path)
    env_lines = "".join(
        f"Environment={_quote_word(f'{name}={value}')}\n" for name, value in environment.items()
    )
    service = _SERVICE_UNIT.format(environment=env_lines, exec_start=_exec_start(argv))
    return {SOCKET_UNIT_NAME: _SOCKET_UNIT, SERVICE_NAME: service}


def install_units(unit_dir: Path | None = None, *, exec_path: str | None = None) -> list[Path]:
    """Write both units into `unit_dir` (default ``$XDG_CONFIG_HOME/systemd/user``).

    Creates the directory when missing. Each file is replaced atomically (temporary file in
    the same directory, fsync, rename, fsync of the directory), so a unit is never seen half
    written. Returns the written paths, socket first. Existing units of the same names are
    overwritten; nothing else in the directory is touched.
    """
    if unit_dir is None:
        from xdg_base_dirs import xdg_config_home

        unit_dir = xdg_config_home() / "systemd" / "user"
    units = render_units(exec_path=exec_path)
    unit_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in units.items():
        atomic_write(unit_dir / name, text.encode("utf-8"), mode=UNIT_MODE)
        written.append(unit_dir / name)
    return written


def _exec_start(argv: list[str]) -> str:
    """The ExecStart value for `argv`, escaped for systemd's unit-file parser.

    systemd takes the executable's name literally except for ``%`` specifiers, and refuses
    quotes and backslashes in it outright; the other words also expand ``$``.
    """
    executable, *arguments = argv
    if any(char in executable for char in "\"'\\"):
        raise ValueError(
            f"cannot write ExecStart for {executable!r}: systemd refuses quotes and backslashes "
            "in an executable's path; pass exec_path naming a link to it"
        )
    words = [_quote_word(executable)]
    words += [_quote_word(argument.replace("$", "$$")) for argument in arguments]
    return " ".join(words)


def _quote_word(word: str) -> str:
    """One word of an ExecStart or Environment line: specifiers doubled, quoted when needed."""
    if any(ord(char) < 0x20 or char == "\x7f" for char in word):
        raise ValueError(f"cannot write {word!r} into a unit file: it contains a control character")
    escaped = word.replace("%", "%%")
    if not escaped or any(char in escaped for char in " \t\"'\\;"):
        escaped = escaped.replace("\\", "\\\\").replace('"', '\\"')
        return f'"{escaped}"'
    return escaped
