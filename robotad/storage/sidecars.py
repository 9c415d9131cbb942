"""Content-addressed sidecars for oversized session-log fields, written and read safely.

Writing (`externalize`): after redaction, any member of a log payload whose compact JSON exceeds
the limit (default 64 KiB) is stored as its own file named by the SHA-256 of its bytes, and the
line holds ``{"$sidecar": {"sha256": <hex>, "bytes": <n>, "path": <hex>}}`` instead (G-153).
Bottom-up: large leaves go first, and a container is spilled only if it is still too large, so
a sidecar may itself hold references. Files are created exclusively; an existing file of that
name already holds identical bytes and is left alone (G-154). An object of the payload that
happens to use a marker key (``$sidecar``/``$literal``) is escaped as ``{"$literal": {...}}``, so
no logged content can pose as a reference.

Reading (`resolve`) fails closed (`SidecarError`, with a stable `code`): a malformed reference,
an absolute path, ``..`` or any separator (G-157), a symlink (the source opens with
``O_NOFOLLOW``), a length or SHA-256 mismatch (G-158, checked before the content is used),
a reference cycle or nesting deeper than the limit (G-159), and an aggregate byte budget per
resolution, checked against the declared length before anything is read (G-160).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from typing import Any, Protocol

import msgspec

__all__ = [
    "DEFAULT_BYTE_BUDGET",
    "DEFAULT_DEPTH_LIMIT",
    "DEFAULT_SPILL_LIMIT",
    "LITERAL_KEY",
    "SIDECAR_KEY",
    "PayloadSource",
    "SidecarError",
    "digest",
    "externalize",
    "holds_markup",
    "may_hold_reference",
    "resolve",
    "stored",
]

SIDECAR_KEY = "$sidecar"
LITERAL_KEY = "$literal"
DEFAULT_SPILL_LIMIT = 64 * 1024
DEFAULT_DEPTH_LIMIT = 8
DEFAULT_BYTE_BUDGET = 64 * 1024 * 1024

_HEX64 = re.compile(r"[0-9a-f]{64}")
_encode = msgspec.json.Encoder().encode
_MARKERS = (f'"{SIDECAR_KEY}"'.encode(), f'"{LITERAL_KEY}"'.encode())
assert all(marker.startswith(b'"$') for marker in _MARKERS)  # `_spells_a_key`'s first test


class SidecarError(Exception):
    """A sidecar reference that cannot be trusted. `code` is stable (``malformed``,
    ``absolute``, ``traversal``, ``not_a_name``, ``symlink``, ``missing``, ``unreadable``,
    ``length``, ``hash``, ``json``, ``cycle``, ``depth``, ``budget``); the message never holds
    payload content."""

    def __init__(self, code: str, message: str) -> None:
        self.code = code
        super().__init__(message)


class PayloadSource(Protocol):
    """Reads one sidecar by its (already validated, single-segment) name."""

    def read_payload(self, name: str, expected_bytes: int) -> bytes:
        """Exactly `expected_bytes` bytes, or `SidecarError` (symlink, missing, wrong size…).
        Must refuse a size mismatch before allocating the content."""
        ...


def digest(content: bytes) -> str:
    """The lowercase hex SHA-256 that names a sidecar."""
    return hashlib.sha256(content).hexdigest()


# -- writing --------------------------------------------------------------------------------


def externalize(
    data: dict[str, Any], put: Callable[[bytes, str], str], *, limit: int = DEFAULT_SPILL_LIMIT
) -> dict[str, Any]:
    """`data` with every member over `limit` bytes replaced by a sidecar reference.

    `put(content, sha256)` stores one sidecar and returns its name. `data` itself always stays
    inline (it is the log line's payload object). The input is not mutated.
    """
    encoded = _encode(data)
    if len(encoded) <= limit and not _spells_a_key(encoded):
        return data
    try:
        out = {key: _spill(value, put, limit)[0] for key, value in data.items()}
    except RecursionError:  # nested deeper than the walk can go: each member whole
        out = {key: _spill_whole(value, put, limit) for key, value in data.items()}
    if SIDECAR_KEY in data or LITERAL_KEY in data:
        return {LITERAL_KEY: out}
    return out


def stored(content: bytes, put: Callable[[bytes, str], str]) -> dict[str, Any] | None:
    """`content` (a redacted member's JSON) stored as a sidecar whatever its size, and the
    reference a line holds in its place; None when it spells a sidecar or literal key (only
    `externalize`'s walk can wrap those so that a reader takes them literally)."""
    if _spells_a_key(content):
        return None
    return _reference(content, put)


def _spill(
    value: Any, put: Callable[[bytes, str], str], limit: int, *, whole: bool = True
) -> tuple[Any, int]:
    """(value with large parts spilled, its compact JSON size).

    With `whole`, each member of a container is first encoded as one piece: one that fits
    the limit and spells no marker key is kept as it is, unwalked (the walk would give it
    back unchanged, the same size), so a history of 20,000 small messages costs 20,000
    encodings, not a Python call per value in it (170,000). A member found too large is
    walked without that shortcut, so no part is encoded more than twice."""
    if isinstance(value, dict):
        items = {key: _member(item, put, limit, whole) for key, item in value.items()}
        new: Any = {key: item for key, (item, _) in items.items()}
        size = 2 + max(0, len(items) - 1)
        size += sum(len(_encode(str(key))) + 1 + item_size for key, (_, item_size) in items.items())
        if SIDECAR_KEY in value or LITERAL_KEY in value:
            new = {LITERAL_KEY: new}
            size += len(LITERAL_KEY) + 5
    elif isinstance(value, list | tuple):
        parts = [_member(item, put, limit, whole) for item in value]
        new = [item for item, _ in parts]
        size = 2 + max(0, len(parts) - 1) + sum(item_size for _, item_size in parts)
    else:
        new = value
        size = len(_encode(value))
    if size <= limit:
        return new, size
    ref = _reference(_encode(new), put)
    return ref, len(_encode(ref))


def _member(
    item: Any, put: Callable[[bytes, str], str], limit: int, whole: bool
) -> tuple[Any, int]:
    """`_spill` of one member of a container (see `_spill` for `whole`)."""
    if whole and isinstance(item, dict | list):
        encoded = _encode(item)
        if len(encoded) <= limit and not _spells_a_key(encoded):
            return item, len(encoded)
        return _spill(item, put, limit, whole=False)
    return _spill(item, put, limit, whole=whole)


def _spill_whole(value: Any, put: Callable[[bytes, str], str], limit: int) -> Any:
    """`value` itself, or when its JSON is over `limit` bytes a reference to a sidecar of it
    all, found without walking it (it nests too deeply to walk). ValueError when it spells a
    sidecar key: only a walk could wrap those so that a reader takes them literally."""
    content = _encode(value)
    if _spells_a_key(content):
        raise ValueError("a payload nested too deeply to walk spells a sidecar key")
    return value if len(content) <= limit else _reference(content, put)


def _reference(content: bytes, put: Callable[[bytes, str], str]) -> dict[str, Any]:
    """`content` stored as a sidecar (by `put`), and the reference a line holds in its place."""
    sha = digest(content)
    return {SIDECAR_KEY: {"sha256": sha, "bytes": len(content), "path": put(content, sha)}}


def _spells_a_key(encoded: bytes) -> bool:
    """Whether JSON text `encoded` spells a sidecar or literal key as msgspec writes it."""
    return b'"$' in encoded and any(marker in encoded for marker in _MARKERS)


# -- reading --------------------------------------------------------------------------------


class _Ref(msgspec.Struct, forbid_unknown_fields=True):
    sha256: str
    bytes: int
    path: str


def may_hold_reference(encoded: bytes) -> bool:
    """Whether JSON text `encoded` may hold a sidecar reference or a literal wrapper once
    decoded: it spells one of their keys, or writes a ``\\u`` escape (which could spell one).
    Text without either needs no resolving, however deep it nests."""
    return b"\\u" in encoded or _spells_a_key(encoded)


def holds_markup(value: Any) -> bool:
    """Whether `value`, a payload as a log line holds it before resolving, still holds a
    sidecar reference or a literal wrapper anywhere (walked without recursion: a payload may
    nest deeper than Python's stack): only resolving gives such a payload its true form."""
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if len(node) == 1 and (SIDECAR_KEY in node or LITERAL_KEY in node):
                return True
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return False


class _Resolution:
    def __init__(self, source: PayloadSource, depth_limit: int, byte_budget: int) -> None:
        self.source = source
        self.depth_limit = depth_limit
        self.remaining = byte_budget

    def walk(self, value: Any, stack: tuple[str, ...]) -> Any:
        if isinstance(value, dict):
            if SIDECAR_KEY in value:
                if len(value) != 1:
                    raise SidecarError("malformed", "a sidecar reference has extra members")
                return self.follow(value[SIDECAR_KEY], stack)
            if LITERAL_KEY in value:
                inner = value[LITERAL_KEY]
                if len(value) != 1 or not isinstance(inner, dict):
                    raise SidecarError("malformed", "a literal wrapper is malformed")
                return {key: self.walk(item, stack) for key, item in inner.items()}
            return {key: self.walk(item, stack) for key, item in value.items()}
        if isinstance(value, list):
            return [self.walk(item, stack) for item in value]
        return value

    def follow(self, raw: Any, stack: tuple[str, ...]) -> Any:
        try:
            ref = msgspec.convert(raw, _Ref)
        except msgspec.ValidationError:
            raise SidecarError("malformed", "a sidecar reference is malformed") from None
        _check_name(ref.path)
        if not _HEX64.fullmatch(ref.sha256) or ref.bytes < 0:
            raise SidecarError("malformed", "a sidecar reference is malformed")
        if ref.path in stack:
            raise SidecarError("cycle", "sidecar references form a cycle")
        if len(stack) >= self.depth_limit:
            raise SidecarError("depth", f"sidecars nest deeper than {self.depth_limit}")
        if ref.bytes > self.remaining:
            raise SidecarError("budget", "sidecars exceed the read budget")
        self.remaining -= ref.bytes
        content = self.source.read_payload(ref.path, ref.bytes)
        if len(content) != ref.bytes:
            raise SidecarError("length", "a sidecar's length does not match its reference")
        if digest(content) != ref.sha256:
            raise SidecarError("hash", "a sidecar's SHA-256 does not match its reference")
        try:
            value = msgspec.json.decode(content)
        except msgspec.DecodeError:
            raise SidecarError("json", "a sidecar does not hold JSON") from None
        if not may_hold_reference(content):
            return value  # nothing inside to resolve, however deep it nests
        return self.walk(value, (*stack, ref.path))


def _check_name(path: str) -> None:
    if path.startswith(("/", "\\")) or re.match(r"[A-Za-z]:[\\/]", path):
        raise SidecarError("absolute", "a sidecar path is absolute")
    parts = re.split(r"[\\/]", path)
    if ".." in parts:
        raise SidecarError("traversal", "a sidecar path climbs out of its folder")
    if len(parts) != 1 or path in ("", ".") or "\0" in path:
        raise SidecarError("not_a_name", "a sidecar path is not a single file name")


def resolve(
    value: Any,
    source: PayloadSource,
    *,
    depth_limit: int = DEFAULT_DEPTH_LIMIT,
    byte_budget: int = DEFAULT_BYTE_BUDGET,
) -> Any:
    """`value` with every sidecar reference replaced by its verified content (and literal
    wrappers unwrapped). One call is one resolution: its depth limit and byte budget cover
    every reference reached from `value`."""
    return _Resolution(source, depth_limit, byte_budget).walk(value, ())
