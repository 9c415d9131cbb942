"""Context windows of well-known models, and the configured figure winning."""

from __future__ import annotations

import pytest

from robotad.providers.windows import DEFAULT_CONTEXT_WINDOWS, context_window_for


@pytest.mark.parametrize(
    ("model", "window"),
    [
        ("gpt-4o", 128_000),
        ("gpt-4o-mini-2024-07-18", 128_000),
        ("gpt-4.1", 1_047_576),
        ("gpt-4.1-nano", 1_047_576),
        ("gpt-4", 8_192),
        ("gpt-4-turbo-preview", 128_000),
        ("o1", 200_000),
        ("o1-mini", 128_000),
        ("o3-mini", 200_000),
        ("claude-sonnet-4-5", 200_000),
        ("claude-3-5-haiku-latest", 200_000),
        ("qwen2.5-coder:32b", 32_768),
        ("Qwen2.5-Coder-7B-Instruct", 32_768),
        ("library/llama3.1:8b", 131_072),
        ("openai/gpt-4o", 128_000),
        ("llama3:latest", 8_192),
    ],
)
def test_known_models(model: str, window: int) -> None:
    assert context_window_for(model, None) == window


@pytest.mark.parametrize("model", ["", "my-finetune", "ft:something", "4o"])
def test_unknown_models_have_no_window(model: str) -> None:
    assert context_window_for(model, None) is None


def test_the_configured_window_wins() -> None:
    assert context_window_for("gpt-4o", 50_000) == 50_000
    assert context_window_for("my-finetune", 4_096) == 4_096


@pytest.mark.parametrize("bad", [0, -1, True, 1.5])
def test_a_nonsense_configured_window_is_refused(bad: object) -> None:
    with pytest.raises(ValueError, match="context window"):
        context_window_for("gpt-4o", bad)  # type: ignore[arg-type]


def test_the_table_holds_positive_windows() -> None:
    assert DEFAULT_CONTEXT_WINDOWS["gpt-4o"] == 128_000
    assert DEFAULT_CONTEXT_WINDOWS["claude-"] == 200_000
    assert all(isinstance(w, int) and w > 0 for w in DEFAULT_CONTEXT_WINDOWS.values())
