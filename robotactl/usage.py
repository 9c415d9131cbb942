"""Invalid params that came from the command line are usage errors (exit 2), like any other.

A daemon answer -32602 whose every issue sits at a params path a command filled from one of
its options or arguments (a malformed ``--allow`` pattern, ``rule``'s PATTERN…) is the
person's typing, not a failed call: `as_usage_error` turns it into click's `UsageError`
naming each option with the daemon's located message (made visible: click prints it as it is).
Anything else is returned unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import click

from robotactl.terminal_text import visible

if TYPE_CHECKING:
    from robotactl.cli import RpcFailed

__all__ = ["as_usage_error"]


def as_usage_error(exc: RpcFailed, option_of_path: Mapping[str, str]) -> click.ClickException:
    """`exc` as a `click.UsageError` when it is a -32602 whose issues all start with a path in
    `option_of_path` (params path prefix → the option that gave it); else `exc` itself."""
    issues = exc.data.get("issues") if exc.code == -32602 and isinstance(exc.data, dict) else None
    if not isinstance(issues, list) or not issues:
        return exc
    named: list[str] = []
    for issue in issues:
        path = str(issue.get("path", "")) if isinstance(issue, dict) else ""
        option = next((o for p, o in option_of_path.items() if path.startswith(p)), None)
        if option is None:
            return exc
        named.append(f"{option} ({path}): {issue.get('message')}")
    return click.UsageError(visible("; ".join(named)))
