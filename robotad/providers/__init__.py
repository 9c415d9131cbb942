"""The provider registry: a configured name or a built-in kind → a ready `Provider`.

`build_provider(name, config)` looks `name` up in ``config.providers`` first, then among the
built-in kinds, each with defaults:

- ``scripted`` — the offline provider, model ``"scripted"``, answering from `script`;
- ``openai`` — model ``gpt-4o-mini``, key from ``OPENAI_API_KEY``, the official endpoint
  unless `base_url` names another (any OpenAI-compatible server);
- ``anthropic`` — model ``claude-sonnet-4-5``, key from ``ANTHROPIC_API_KEY``.

The vendor SDKs are imported only when such a provider is built. The key comes from the
provider's `api_key_command`, else from the variable `api_key_env` names in robotad's
environment, at this moment (`robotad.providers.keys`), and is handed to the provider; it is
never stored or written. A variable named explicitly but unset is an error, as is an unset
default variable for a vendor's own endpoint; an unset default variable with a custom
`base_url` gives no key (local servers usually need none). Errors name variables, never values.
Every provider carries its `idle_timeout` (seconds, ``idle_timeout_ms``); SDK providers also
their `connect_timeout` (``connect_timeout_ms``).

`build_provider` gives a provider its own SDK client. The daemon splits it in two instead:
`plan_provider` (configuration and key → a `ProviderPlan`) and `provider_of(plan, lease)`
over a client leased from its `robotad.providers.clients.ClientPool`, shared by every
session of the same configuration.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from robotad.agent.provider import Provider
from robotad.config import BUILTIN_PROVIDER_KINDS, Config, ProviderConfig, config_path
from robotad.providers.clients import ClientLease
from robotad.providers.keys import KeyUnavailable, resolve_api_key
from robotad.providers.scripted import ScriptedProvider, Step

__all__ = [
    "DEFAULT_MODELS",
    "ProviderPlan",
    "ProviderUnavailable",
    "build_provider",
    "new_sdk_client",
    "plan_provider",
    "provider_of",
    "resolve_provider_config",
]

#: Built-in kind → (default model, default key variable).
DEFAULT_MODELS: dict[str, tuple[str, str | None]] = {
    "scripted": ("scripted", None),
    "openai": ("gpt-4o-mini", "OPENAI_API_KEY"),
    "anthropic": ("claude-sonnet-4-5", "ANTHROPIC_API_KEY"),
}


class ProviderUnavailable(Exception):
    """The provider cannot be built: unknown name, missing key variable, misplaced script."""


def resolve_provider_config(name: str, config: Config) -> ProviderConfig:
    """The table for `name`: a configured provider, else a built-in kind with defaults."""
    if name in config.providers:
        return config.providers[name]
    if name in BUILTIN_PROVIDER_KINDS:
        return ProviderConfig(kind=name)
    known = sorted({*config.providers, *BUILTIN_PROVIDER_KINDS})
    path = config_path()  # read at start from the same place: where a new table goes
    table = name if re.fullmatch(r"[A-Za-z0-9_-]+", name) else json.dumps(name)
    where = f"{path}, which does not exist" if not path.exists() else str(path)
    raise ProviderUnavailable(
        f"unknown provider {name!r} (known: {', '.join(known)}): define it in a "
        f"[providers.{table}] table of robotad's config ({where}), then restart robotad"
    )


@dataclass(frozen=True)
class ProviderPlan:
    """Everything a provider is built from, its key resolved (`plan_provider`). The key is
    left out of the repr."""

    name: str
    kind: str
    model: str
    context_window: int | None
    idle_timeout: float
    connect_timeout: float
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    max_tokens: int | None = None
    script: Sequence[Step] | None = None

    @property
    def uses_sdk_client(self) -> bool:
        """Whether the provider talks through a vendor SDK client (every kind but scripted)."""
        return self.kind != "scripted"


def build_provider(
    name: str,
    config: Config,
    *,
    model: str | None = None,
    script: Sequence[Step] | None = None,
    context_window: int | None = None,
    environ: Mapping[str, str] | None = None,
) -> Provider:
    """Build the provider `name` (see the module doc) over an SDK client of its own. `model`
    and `context_window` override the configuration; `script` is for the scripted kind only.
    The caller closes the provider with ``await provider.aclose()``. Blocking while an
    ``api_key_command`` runs."""
    plan = plan_provider(
        name, config, model=model, script=script, context_window=context_window, environ=environ
    )
    return provider_of(plan)


def plan_provider(
    name: str,
    config: Config,
    *,
    model: str | None = None,
    script: Sequence[Step] | None = None,
    context_window: int | None = None,
    environ: Mapping[str, str] | None = None,
) -> ProviderPlan:
    """What `build_provider` would build, nothing built yet. Blocking while an
    ``api_key_command`` runs. Raises `ProviderUnavailable`."""
    spec = resolve_provider_config(name, config)
    default_model, default_key_env = DEFAULT_MODELS[spec.kind]
    chosen_model = model or spec.model or default_model
    window = context_window if context_window is not None else spec.context_window
    idle = spec.idle_timeout_ms / 1000
    connect = spec.connect_timeout_ms / 1000
    if spec.kind == "scripted":
        return ProviderPlan(name, "scripted", chosen_model, window, idle, connect, script=script)
    if script is not None:
        raise ProviderUnavailable(f"a script is only for scripted providers, not {name!r}")
    try:
        api_key = resolve_api_key(
            name,
            command=spec.api_key_command,
            variable=spec.api_key_env or default_key_env,
            required=spec.api_key_env is not None or spec.base_url is None,
            environ=os.environ if environ is None else environ,
        )
    except KeyUnavailable as exc:
        raise ProviderUnavailable(str(exc)) from None
    return ProviderPlan(
        name,
        spec.kind,
        chosen_model,
        window,
        idle,
        connect,
        base_url=spec.base_url,
        api_key=api_key,
        max_tokens=spec.max_tokens,
    )


def provider_of(plan: ProviderPlan, lease: ClientLease[Any] | None = None) -> Provider:
    """The provider of `plan`: over the pooled client `lease` holds (leased for this plan's
    kind, base URL, key and connect timeout), else over an SDK client of its own."""
    if plan.kind == "scripted":
        return ScriptedProvider(
            plan.script or (),
            name=plan.name,
            model=plan.model,
            context_window=plan.context_window,
            idle_timeout=plan.idle_timeout,
        )
    common: dict[str, Any] = {
        "name": plan.name,
        "model": plan.model,
        "base_url": plan.base_url,
        "api_key": plan.api_key,
        "context_window": plan.context_window,
        "connect_timeout": plan.connect_timeout,
        "idle_timeout": plan.idle_timeout,
    }
    if lease is not None:
        common["lease"] = lease
    if plan.max_tokens is not None:
        common["max_tokens"] = plan.max_tokens
    if plan.kind == "openai":
        from robotad.providers.openai import OpenAIProvider

        return OpenAIProvider(**common)
    from robotad.providers.anthropic import AnthropicProvider

    return AnthropicProvider(**common)


def new_sdk_client(
    kind: str, base_url: str | None, api_key: str | None, connect_timeout: float
) -> Any:
    """Blocking (it imports the SDK and loads the CA bundle): a new SDK client of `kind`
    (``openai`` or ``anthropic``), as that kind's provider would build for itself — the
    `ClientPool` builder of the daemon, run in a worker thread.

    It also resolves the SDK resource the provider calls (``chat.completions``,
    ``messages``), a public attribute whose first use imports the resource modules (tens of
    milliseconds once per process): done here, that stays off the event loop and out of the
    first turn."""
    if kind == "openai":
        from robotad.providers.openai import new_openai_client

        client: Any = new_openai_client(base_url, api_key, connect_timeout)
        _ = client.chat.completions
        return client
    if kind == "anthropic":
        from robotad.providers.anthropic import new_anthropic_client

        client = new_anthropic_client(base_url, api_key, connect_timeout)
        _ = client.messages
        return client
    raise ValueError(f"no SDK client for provider kind {kind!r}")
