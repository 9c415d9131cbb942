"""Sensitive-key classification and scrubbing (G-033…G-036, G-220)."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol import shapes
from robotad.storage import log_events, record, scrub
from robotad.storage.scrub import (
    REDACTED,
    is_sensitive_key,
    redact_in_place,
    scrub_sensitive_keys,
)

SENSITIVE = [
    "api_key",
    "apiKey",
    "APIKey",
    "x-api-key",
    "X-Api-Key",
    "OPENAI_API_KEY",
    "token",
    "access_token",
    "accessToken",
    "refreshToken",
    "id_token",
    "github-token",
    "secret",
    "client_secret",
    "clientSecret",
    "password",
    "db_password",
    "passwd",
    "passphrase",
    "authorization",
    "Authorization",
    "Proxy-Authorization",
    "cookie",
    "Cookie",
    "set-cookie",
    "private_key",
    "privateKey",
    "credentials",
    "aws_secret_access_key",
    "auth",
]
NOT_SENSITIVE = [
    "inputTokens",
    "outputTokens",
    "usedTokens",
    "totalTokens",
    "max_tokens",
    "maxTokens",
    "tokenizer",
    "tokens",
    "secretary",
    "apiKeyEnv",
    "api_key_env",
    "keyboard",
    "key",
    "author",
    "authority",
    "sessionId",
    "passwordHint",
    "content",
    "",
]


@pytest.mark.parametrize("key", SENSITIVE)
def test_secret_names_are_sensitive(key: str) -> None:
    """G-034: whole normalised names and secret-bearing suffixes."""
    assert is_sensitive_key(key)


@pytest.mark.parametrize("key", NOT_SENSITIVE)
def test_usage_and_lookalike_names_are_not(key: str) -> None:
    """G-034: never a loose substring (inputTokens is not a secret)."""
    assert not is_sensitive_key(key)


def test_scrubbing_is_recursive_and_leaves_everything_else() -> None:
    """G-035: nested objects and arrays; non-sensitive members unchanged; input not mutated."""
    value = {
        "headers": {"Authorization": "Bearer x", "Accept": "json"},
        "items": [{"token": {"deep": 1}}, {"inputTokens": 5}, "free text token=abc"],
        "usage": {"inputTokens": 10, "outputTokens": 3},
        "n": 1,
    }
    before = msgspec.json.encode(value)
    assert scrub_sensitive_keys(value) == {
        "headers": {"Authorization": REDACTED, "Accept": "json"},
        "items": [{"token": REDACTED}, {"inputTokens": 5}, "free text token=abc"],
        "usage": {"inputTokens": 10, "outputTokens": 3},
        "n": 1,
    }
    assert msgspec.json.encode(value) == before


def test_free_text_is_not_inspected() -> None:
    """G-220: redaction works by key only."""
    prompt = {"prompt": "my api_key is sk-live-123"}
    assert scrub_sensitive_keys(prompt) == prompt


@settings(max_examples=100, deadline=None)
@given(
    st.recursive(
        st.text(max_size=5) | st.integers(),
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.dictionaries(st.sampled_from(SENSITIVE + NOT_SENSITIVE), inner, max_size=4)
        ),
        max_leaves=15,
    )
)
def test_no_sensitive_value_survives_at_any_depth(value: object) -> None:
    """G-035: after scrubbing, every sensitive key at any depth holds only the marker."""

    def check(node: object) -> None:
        if isinstance(node, dict):
            for key, item in node.items():
                if is_sensitive_key(key):
                    assert item == REDACTED
                else:
                    check(item)
        elif isinstance(node, list):
            for item in node:
                check(item)

    check(scrub_sensitive_keys(value))


@settings(max_examples=100, deadline=None)
@given(
    st.recursive(
        st.text(max_size=5) | st.integers() | st.none(),
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.dictionaries(st.sampled_from(SENSITIVE + NOT_SENSITIVE), inner, max_size=4)
        ),
        max_leaves=15,
    )
)
def test_redacting_in_place_is_scrubbing_without_the_copy(value: object) -> None:
    """The session log's in-place redaction of its own fresh payload redacts exactly what
    the copying scrubber does, at any depth."""
    expected = scrub_sensitive_keys(value)
    tree = msgspec.to_builtins({"payload": value})
    redact_in_place(tree)
    assert tree == {"payload": expected}


def test_no_declared_member_has_a_sensitive_name() -> None:
    """G-029 (why the built-in redaction keeps records valid) and G-033 (one definition for
    log and export): scrubbing only ever touches open maps, never a typed member."""
    structs: list[type[msgspec.Struct]] = [
        record.SessionRecord,
        record.SessionSettings,
        record.Permissions,
        record.HistoryEntry,
        record.StoredToolSchema,
        record.ForkedFrom,
        record.RecordEnvelope,
        *log_events.PAYLOADS.values(),
        log_events.NormalizedResponseEntry,
        shapes.Message,
        shapes.ToolCall,
        shapes.Usage,
    ]
    for struct in structs:
        for field in msgspec.structs.fields(struct):
            assert not is_sensitive_key(field.encode_name), (struct, field.encode_name)


def test_keys_known_harmless_skip_classification_but_never_a_secret() -> None:
    """G-152: the walk skips classifying a dict whose keys are all known harmless; a secret
    beside them is still redacted, and no sensitive key is ever remembered as harmless."""
    for _ in range(2):  # the second walk meets every harmless key already known
        tree = msgspec.to_builtins(
            {"tools": [{"name": "Read", "input": {"path": "x", "api_key": "sk-1"}}]}
        )
        redact_in_place(tree)
        assert tree == {"tools": [{"name": "Read", "input": {"path": "x", "api_key": REDACTED}}]}
    assert scrub._harmless >= {"tools", "name", "input", "path"}
    assert not any(is_sensitive_key(key) for key in scrub._harmless)


def test_the_harmless_keys_kept_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Untrusted payloads (tool arguments, MCP schemas) bring any keys: at most
    `_HARMLESS_KEPT` are remembered and none longer than a memoised key; beyond that, keys
    are classified afresh and redaction is unchanged."""
    monkeypatch.setattr(scrub, "_harmless", set())
    monkeypatch.setattr(scrub, "_HARMLESS_KEPT", 50)
    tree = msgspec.to_builtins({f"field{n}": n for n in range(200)} | {"x" * 65: 1})
    redact_in_place(tree)
    assert len(scrub._harmless) == 50
    assert "x" * 65 not in scrub._harmless
    late = msgspec.to_builtins({"field199": 1, "client_secret": "s"})
    redact_in_place(late)
    assert late == {"field199": 1, "client_secret": REDACTED}
