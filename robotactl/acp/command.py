"""``robotactl acp``: serve an ACP editor (Zed, Neovim, Emacs, JetBrains…) on stdin/stdout.

The editor starts this command as its agent; nothing but ACP goes to stdout, logs go to
stderr. Every session it creates gets the provider, model, mode and script given here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from robotactl.cli import ClientOptions, CommandFailed
from robotactl.commands.sessions import MODES

__all__ = ["acp"]


@click.command(short_help="Serve an ACP editor (Zed, Neovim, Emacs, JetBrains) on stdio.")
@click.option("--provider", metavar="NAME", help="Provider of new sessions (default: robotad's).")
@click.option("--model", metavar="MODEL", help="Model of new sessions (default: the provider's).")
@click.option(
    "--mode",
    type=click.Choice(MODES),
    default=None,
    help="Permission mode of new sessions (default: default).",
)
@click.option(
    "--script",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    metavar="FILE.json",
    help="Steps for the offline scripted provider, for every new session.",
)
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"]),
    default="warning",
    show_default=True,
    help="What to log on stderr.",
)
@click.pass_obj
def acp(
    options: ClientOptions,
    provider: str | None,
    model: str | None,
    mode: str | None,
    script: str | None,
    log_level: str,
) -> None:
    """Be an Agent Client Protocol agent on stdin/stdout, forwarding to robotad.

    Sessions are robotad's (same ids): closing the editor stops nothing, an approval left
    unanswered stays parked for `robotactl approve`, and several editors can follow one
    session. Give editors an absolute path to robotactl.

    \b
    Examples (as an editor's agent command):
      /home/me/.local/bin/robotactl acp
      /home/me/.local/bin/robotactl acp --provider local --mode acceptEdits
    """
    import logging
    import sys

    import trio

    from robotactl.acp.defaults import SessionDefaults
    from robotactl.acp.serve import RobotadGone, serve
    from robotactl.daemon_errors import DaemonUnavailable

    logging.basicConfig(
        stream=sys.stderr,
        level=log_level.upper(),
        format="robotactl acp: %(levelname)s %(message)s",
    )
    members: dict[str, Any] = {"provider": provider, "model": model, "permission_mode": mode}
    if script is not None:
        members["script"] = _read_steps(script)
    defaults = SessionDefaults(**{k: v for k, v in members.items() if v is not None})
    try:
        try:
            trio.run(
                serve, options.socket_path, options.autostart, defaults, options.connect_watch()
            )
        except BaseExceptionGroup as group:
            raise _sole_exception(group) from None
    except (RobotadGone, DaemonUnavailable) as exc:
        raise CommandFailed(str(exc)) from None


def _read_steps(path: str) -> list[Any]:
    """The JSON array of scripted steps in `path`; robotad checks the steps themselves."""
    from robotactl.commands.call import parse_json

    try:
        steps = parse_json(Path(path).read_text(encoding="utf-8"), path)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise click.BadParameter(str(exc), param_hint="--script") from None
    if not isinstance(steps, list):
        raise click.BadParameter(f"{path}: expected a JSON array of steps", param_hint="--script")
    return steps


def _sole_exception(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The one exception inside nested single-member groups, else the group itself."""
    current: BaseException = group
    while isinstance(current, BaseExceptionGroup) and len(current.exceptions) == 1:
        current = current.exceptions[0]
    return current
