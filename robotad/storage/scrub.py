"""The one definition of which keys hold secrets, and the recursive scrubber built on it.

Consumed by the session log (always, before a byte is written) and, opt-in, by a redacted export.
Never by the local full-fidelity path: records and journals keep every value (G-036).

A key is sensitive when its *normalised* name — split into words at ``_``, ``-``, ``.``, spaces
and camelCase humps, lower-cased — either is a known secret name as a whole (``auth``,
``credentials``, ``passwd``…) or ends in a secret-bearing suffix (``…token``, ``…secret``,
``…password``, ``…api key``, ``…private key``, ``…cookie``…). Matching is by whole words, never
by loose substring: ``inputTokens``, ``max_tokens``, ``tokenizer``, ``secretary`` and
``apiKeyEnv`` (the *name* of a variable) are not secrets. Redaction is by key only: a secret
typed into free text is not detected (G-220).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["REDACTED", "is_sensitive_key", "redact_in_place", "scrub_sensitive_keys"]

#: What a sensitive key's value becomes.
REDACTED = "[REDACTED]"

#: Keys up to this long are memoised by `is_sensitive_key`.
_MEMO_KEY_CHARS = 64

_WORDS = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")

#: Names that are secrets as a whole (words joined, lower-case).
_WHOLE_NAMES = frozenset(
    {
        "auth",
        "authorization",
        "proxyauthorization",
        "bearer",
        "cookie",
        "cookies",
        "credential",
        "credentials",
        "jwt",
        "passphrase",
        "passwd",
        "password",
        "pwd",
        "secret",
        "secrets",
        "token",
    }
)

#: Trailing words that make any key a secret (``client_secret``, ``x-api-key``, ``set-cookie``).
_SUFFIX_WORDS = frozenset(
    {
        "token",
        "secret",
        "password",
        "passwd",
        "passphrase",
        "credential",
        "credentials",
        "cookie",
        "authorization",
    }
)

#: Trailing word pairs that make any key a secret (``OPENAI_API_KEY``, ``private_key``).
_SUFFIX_PAIRS = frozenset(
    {
        ("api", "key"),
        ("apikey",),
        ("private", "key"),
        ("privatekey",),
        ("secret", "key"),
        ("access", "key"),
        ("signing", "key"),
        ("encryption", "key"),
        ("session", "key"),
    }
)


def _words(key: str) -> list[str]:
    return [word.lower() for word in _WORDS.findall(key)]


def is_sensitive_key(key: str) -> bool:
    """Whether values under `key` are secrets (see the module docstring for the rule).

    Memoised for ordinary key lengths (a bounded cache: a log payload repeats the same few
    keys, message and schema members, on every line); a key longer than that is classified
    afresh, so no outsized key is ever kept."""
    if len(key) <= _MEMO_KEY_CHARS:
        return _sensitive_memo(key)
    return _sensitive(key)


def _sensitive(key: str) -> bool:
    words = _words(key)
    if not words:
        return False
    if "".join(words) in _WHOLE_NAMES:
        return True
    if words[-1] in _SUFFIX_WORDS:
        return True
    return tuple(words[-2:]) in _SUFFIX_PAIRS or tuple(words[-1:]) in _SUFFIX_PAIRS


_sensitive_memo = functools.lru_cache(maxsize=4096)(_sensitive)


def scrub_sensitive_keys(value: Any) -> Any:
    """A copy of `value` with the value of every sensitive key, at any depth, replaced by
    ``"[REDACTED]"``. Objects and arrays are walked; every other value is returned unchanged.
    The input is never mutated."""
    if isinstance(value, Mapping):
        return {
            key: REDACTED
            if isinstance(key, str) and is_sensitive_key(key)
            else scrub_sensitive_keys(item)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [scrub_sensitive_keys(item) for item in value]
    return value


def redact_in_place(tree: Any) -> None:
    """Replace, in `tree` itself, the value of every sensitive key at any depth by
    ``"[REDACTED]"`` — what `scrub_sensitive_keys` returns, without copying anything.

    For a tree the caller owns and that holds only plain ``dict`` and ``list`` containers, as
    `msgspec.to_builtins` makes them (the session log's payloads); other values are leaves.
    A dict whose keys are all known to be harmless (one subset test, in C) is not classified
    key by key, so the walk's cost is mostly the containers it visits: a log repeats the same
    keys from line to line.
    """
    stack = [tree]
    while stack:
        node = stack.pop()
        if type(node) is dict:
            if not node.keys() <= _harmless:
                _classify(node)
            for item in node.values():
                if type(item) is dict or type(item) is list:
                    stack.append(item)
        else:
            for item in node:
                if type(item) is dict or type(item) is list:
                    stack.append(item)


#: Keys found not sensitive (memoisable lengths only), at most `_HARMLESS_KEPT` of them.
_harmless: set[Any] = set()
_HARMLESS_KEPT = 4096


def _classify(node: dict[Any, Any]) -> None:
    """Redact `node`'s sensitive members; remember its harmless keys."""
    for key in node:
        if not isinstance(key, str) or key in _harmless:
            continue
        if is_sensitive_key(key):
            node[key] = REDACTED  # a value replaced, the dict's size unchanged
        elif len(key) <= _MEMO_KEY_CHARS and len(_harmless) < _HARMLESS_KEPT:
            _harmless.add(key)
