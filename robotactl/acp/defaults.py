"""What ``robotactl acp`` puts in every session it creates (its command-line options).

An editor's ``session/new`` carries only a cwd (and MCP servers), so the provider, model,
permission mode and — for the offline ``scripted`` provider — the script come from the
command line the editor is configured with (``robotactl acp --provider local``). Absent
options leave robotad's configured defaults.
"""

from __future__ import annotations

from typing import Any

from msgspec import UNSET, Struct, UnsetType, to_builtins

__all__ = ["SessionDefaults"]


class SessionDefaults(Struct, frozen=True, rename="camel", omit_defaults=True):
    """The ``session/create`` members every new session gets."""

    provider: str | UnsetType = UNSET
    model: str | UnsetType = UNSET
    permission_mode: str | UnsetType = UNSET
    script: list[Any] | UnsetType = UNSET

    def create_params(self) -> dict[str, Any]:
        """These defaults as ``session/create`` params (absent ones left out)."""
        params: dict[str, Any] = to_builtins(self)
        return params
