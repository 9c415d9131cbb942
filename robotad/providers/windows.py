"""Context windows of well-known models, for when the configuration names none.

`context_window_for` answers the configured figure when there is one, else the window of the
longest known prefix of the model's name, else None (the session then applies the default
default). Names are matched case-insensitively after dropping a routing prefix (``openai/``,
``library/``) and an Ollama-style tag (``:7b``), so ``Qwen2.5-Coder:32b`` finds
``qwen2.5-coder``.
"""

from __future__ import annotations

__all__ = ["DEFAULT_CONTEXT_WINDOWS", "context_window_for"]

#: Model-name prefix → context window in tokens. The longest matching prefix wins, so
#: ``gpt-4o`` is not read as ``gpt-4`` and ``o1-mini`` not as ``o1``.
DEFAULT_CONTEXT_WINDOWS: dict[str, int] = {
    # OpenAI
    "gpt-5": 400_000,
    "gpt-4.1": 1_047_576,
    "gpt-4o": 128_000,
    "gpt-4-turbo": 128_000,
    "gpt-4": 8_192,
    "gpt-3.5-turbo": 16_385,
    "o1": 200_000,
    "o1-mini": 128_000,
    "o3": 200_000,
    "o4-mini": 200_000,
    # Anthropic
    "claude-": 200_000,
    # Open-weight models as local servers (Ollama, vLLM, llama.cpp, LM Studio) name them
    "qwen2.5-coder": 32_768,
    "qwen2.5": 32_768,
    "qwen3": 32_768,
    "llama3.1": 131_072,
    "llama3.2": 131_072,
    "llama3.3": 131_072,
    "llama3": 8_192,
    "mistral": 32_768,
    "codestral": 32_768,
    "deepseek-coder-v2": 163_840,
    "deepseek-r1": 131_072,
    "gemma3": 131_072,
    "gemma2": 8_192,
}

_BY_LENGTH = sorted(DEFAULT_CONTEXT_WINDOWS, key=len, reverse=True)


def _bare_name(model: str) -> str:
    name = model.strip().lower().rsplit("/", 1)[-1]
    return name.split(":", 1)[0]


def context_window_for(model: str, configured: int | None) -> int | None:
    """The window to report for `model`: `configured` when given (it must be positive),
    else the longest known prefix's window, else None.

    Raises `ValueError` for a configured window that is not a positive integer.
    """
    if configured is not None:
        if isinstance(configured, bool) or not isinstance(configured, int) or configured <= 0:
            raise ValueError(f"context window must be a positive integer, got {configured!r}")
        return configured
    name = _bare_name(model)
    for prefix in _BY_LENGTH:
        if name.startswith(prefix):
            return DEFAULT_CONTEXT_WINDOWS[prefix]
    return None
