"""The provider registry: names, built-in kinds, defaults, keys from the environment."""

from __future__ import annotations

import importlib
import inspect
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from robotad.config import Config, ProviderConfig
from robotad.providers import ProviderUnavailable, build_provider
from robotad.providers.scripted import ScriptedProvider, decode_script

SECRET = "sk-test-0123456789abcdef"


class _Captured:
    """Stands in for a vendor provider class; keeps its keyword arguments."""

    calls: list[dict[str, Any]]

    def __init__(self, **kwargs: Any) -> None:
        type(self).calls.append(kwargs)
        self.kwargs = kwargs


@pytest.fixture
def fake_vendors(monkeypatch: pytest.MonkeyPatch) -> dict[str, type[_Captured]]:
    """Replace robotad.providers.openai/anthropic by modules whose classes record kwargs."""
    classes: dict[str, type[_Captured]] = {}
    for module_name, class_name in (
        ("openai", "OpenAIProvider"),
        ("anthropic", "AnthropicProvider"),
    ):
        cls = type(class_name, (_Captured,), {"calls": []})
        module = types.ModuleType(f"robotad.providers.{module_name}")
        setattr(module, class_name, cls)
        monkeypatch.setitem(sys.modules, f"robotad.providers.{module_name}", module)
        classes[module_name] = cls
    return classes


def test_builtin_scripted_kind_with_a_script() -> None:
    script = decode_script([{"text": "hi"}])
    provider = build_provider("scripted", Config(), script=script)
    assert isinstance(provider, ScriptedProvider)
    assert (provider.name, provider.model, provider.context_window) == (
        "scripted",
        "scripted",
        None,
    )
    assert provider.remaining_steps() == [{"text": "hi"}]


def test_a_configured_name_wins_and_overrides_apply() -> None:
    config = Config(
        providers={"offline": ProviderConfig(kind="scripted", model="m1", context_window=1000)}
    )
    provider = build_provider("offline", config)
    assert (provider.name, provider.kind, provider.model, provider.context_window) == (
        "offline",
        "scripted",
        "m1",
        1000,
    )
    provider = build_provider("offline", config, model="m2", context_window=5)
    assert (provider.model, provider.context_window) == ("m2", 5)


def test_an_unknown_name_lists_what_exists() -> None:
    config = Config(providers={"local": ProviderConfig(kind="openai")})
    with pytest.raises(ProviderUnavailable, match="unknown provider 'gpt'") as caught:
        build_provider("gpt", config)
    assert "anthropic, local, openai, scripted" in str(caught.value)


def test_an_unknown_name_says_where_to_define_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`robotactl new --provider local` on a machine whose config.toml robotad never read
    (written to the wrong folder, or not yet) said only "unknown provider 'local'": nothing
    told the user which file robotad reads, nor that it was not there."""
    config = tmp_path / "config.toml"
    monkeypatch.setenv("ROBOTA_CONFIG", str(config))
    with pytest.raises(ProviderUnavailable) as caught:
        build_provider("local", Config())
    assert str(caught.value).endswith(
        f": define it in a [providers.local] table of robotad's config ({config}, which does "
        "not exist), then restart robotad"
    )
    config.write_text("")
    with pytest.raises(ProviderUnavailable) as caught:
        build_provider("my box", Config())
    assert f'[providers."my box"] table of robotad\'s config ({config}),' in str(caught.value)


def test_builtin_openai_reads_its_default_key_variable(
    fake_vendors: dict[str, type[_Captured]],
) -> None:
    build_provider("openai", Config(), environ={"OPENAI_API_KEY": SECRET})
    assert fake_vendors["openai"].calls == [
        {
            "name": "openai",
            "model": "gpt-4o-mini",
            "base_url": None,
            "api_key": SECRET,
            "context_window": None,
            "connect_timeout": 10.0,
            "idle_timeout": 120.0,
        }
    ]


def test_builtin_anthropic_defaults_and_max_tokens(
    fake_vendors: dict[str, type[_Captured]],
) -> None:
    build_provider("anthropic", Config(), environ={"ANTHROPIC_API_KEY": SECRET})
    config = Config(
        providers={
            "claude": ProviderConfig(
                kind="anthropic", model="claude-x", max_tokens=99, api_key_env="MY_KEY"
            )
        }
    )
    build_provider("claude", config, environ={"MY_KEY": SECRET})
    first, second = fake_vendors["anthropic"].calls
    assert first["model"] == "claude-sonnet-4-5"
    assert "max_tokens" not in first
    assert second == {
        "name": "claude",
        "model": "claude-x",
        "base_url": None,
        "api_key": SECRET,
        "context_window": None,
        "connect_timeout": 10.0,
        "idle_timeout": 120.0,
        "max_tokens": 99,
    }


def test_an_openai_provider_gets_its_configured_max_tokens(
    fake_vendors: dict[str, type[_Captured]],
) -> None:
    config = Config(
        providers={
            "local": ProviderConfig(
                kind="openai", base_url="http://localhost:8080/v1", max_tokens=256
            )
        }
    )
    build_provider("local", config, environ={})
    build_provider("openai", Config(), environ={"OPENAI_API_KEY": SECRET})
    bounded, default = fake_vendors["openai"].calls
    assert bounded["max_tokens"] == 256
    assert "max_tokens" not in default


def test_a_missing_key_is_an_error_naming_the_variable_only(
    fake_vendors: dict[str, type[_Captured]],
) -> None:
    with pytest.raises(ProviderUnavailable, match="OPENAI_API_KEY is not set"):
        build_provider("openai", Config(), environ={})
    config = Config(
        providers={
            "local": ProviderConfig(
                kind="openai", base_url="http://localhost:1/v1", api_key_env="LOCAL_KEY"
            )
        }
    )
    with pytest.raises(ProviderUnavailable, match="LOCAL_KEY") as caught:
        build_provider("local", config, environ={"OPENAI_API_KEY": SECRET})
    assert SECRET not in str(caught.value)
    assert fake_vendors["openai"].calls == []


def test_a_custom_endpoint_without_a_default_key_gets_none(
    fake_vendors: dict[str, type[_Captured]],
) -> None:
    config = Config(
        providers={
            "ollama": ProviderConfig(
                kind="openai", base_url="http://localhost:11434/v1", model="qwen"
            )
        }
    )
    build_provider("ollama", config, environ={})
    [call] = fake_vendors["openai"].calls
    assert call["api_key"] is None
    assert call["base_url"] == "http://localhost:11434/v1"


def test_a_script_for_a_network_provider_is_refused(
    fake_vendors: dict[str, type[_Captured]],
) -> None:
    with pytest.raises(ProviderUnavailable, match="only for scripted"):
        build_provider("openai", Config(), script=[], environ={"OPENAI_API_KEY": SECRET})


@pytest.mark.parametrize(
    ("module_name", "class_name", "extra"),
    [
        ("openai", "OpenAIProvider", {"max_tokens": 10}),
        ("anthropic", "AnthropicProvider", {"max_tokens": 10}),
    ],
)
def test_the_registry_calls_match_the_real_constructors(
    module_name: str, class_name: str, extra: dict[str, Any]
) -> None:
    module = importlib.import_module(f"robotad.providers.{module_name}")
    signature = inspect.signature(getattr(module, class_name))
    signature.bind(name="n", model="m", base_url=None, api_key=None, context_window=None, **extra)
