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
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from robotad.agent.provider import Provider
from robotad.config import BUILTIN_PROVIDER_KINDS, Config, ProviderConfig
from robotad.providers.keys import KeyUnavailable, resolve_api_key
from robotad.providers.scripted import ScriptedProvider, Step

__all__ = ["DEFAULT_MODELS", "ProviderUnavailable", "build_provider", "resolve_provider_config"]

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
    raise ProviderUnavailable(f"unknown provider {name!r} (known: {', '.join(known)})")


def build_provider(
    name: str,
    config: Config,
    *,
    model: str | None = None,
    script: Sequence[Step] | None = None,
    context_window: int | None = None,
    environ: Mapping[str, str] | None = None,
) -> Provider:
    """Build the provider `name` (see the module doc). `model` and `context_window` override
    the configuration; `script` is for the scripted kind only. The caller closes the provider
    with ``await provider.aclose()``. Blocking while an ``api_key_command`` runs."""
    spec = resolve_provider_config(name, config)
    default_model, default_key_env = DEFAULT_MODELS[spec.kind]
    chosen_model = model or spec.model or default_model
    window = context_window if context_window is not None else spec.context_window
    idle = spec.idle_timeout_ms / 1000
    if spec.kind == "scripted":
        return ScriptedProvider(
            script or (), name=name, model=chosen_model, context_window=window, idle_timeout=idle
        )
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
    connect = spec.connect_timeout_ms / 1000
    if spec.kind == "openai":
        from robotad.providers.openai import OpenAIProvider

        return OpenAIProvider(
            name=name,
            model=chosen_model,
            base_url=spec.base_url,
            api_key=api_key,
            context_window=window,
            connect_timeout=connect,
            idle_timeout=idle,
        )
    from robotad.providers.anthropic import AnthropicProvider

    if spec.max_tokens is not None:
        return AnthropicProvider(
            name=name,
            model=chosen_model,
            base_url=spec.base_url,
            api_key=api_key,
            context_window=window,
            max_tokens=spec.max_tokens,
            connect_timeout=connect,
            idle_timeout=idle,
        )
    return AnthropicProvider(
        name=name,
        model=chosen_model,
        base_url=spec.base_url,
        api_key=api_key,
        context_window=window,
        connect_timeout=connect,
        idle_timeout=idle,
    )
