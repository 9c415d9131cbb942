"""Random damage to stored bytes and to JSON values, for the decoder mutation suite.

`byte_mutations` damages raw bytes the way disks, editors and torn writes do: flipped bits,
inserted or deleted runs, truncation, a duplicated or dropped line. `json_mutation` damages a
JSON value at one location and says where (`JsonMutation.path`, in the decoders' own path
syntax): a value replaced by another of any kind, a member removed, an undeclared member added.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from protocol.validate import join_path

__all__ = ["JsonMutation", "byte_mutations", "json_mutation", "json_values"]

_text = st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=10)
json_values: st.SearchStrategy[Any] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _text
    | st.sampled_from(["2024-01-01T00:00:00Z", "not-a-date", "", "[REDACTED]", "../x"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=6,
)


@st.composite
def byte_mutations(draw: st.DrawFn, data: bytes) -> bytes:
    """`data` with one to three random damages applied."""
    out = bytearray(data)
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["flip", "insert", "delete", "truncate", "dup_line", "drop"]))
        size = len(out)
        at = draw(st.integers(0, size)) if size else 0
        if kind == "flip" and size:
            index = min(at, size - 1)
            out[index] ^= 1 << draw(st.integers(0, 7))
        elif kind == "insert":
            out[at:at] = draw(st.binary(min_size=1, max_size=8) | st.sampled_from([b"\n", b"{"]))
        elif kind == "delete" and size:
            out[at : at + draw(st.integers(1, 16))] = b""
        elif kind == "truncate":
            del out[at:]
        else:
            lines = bytes(out).split(b"\n")
            index = draw(st.integers(0, max(0, len(lines) - 1)))
            if kind == "dup_line":
                lines.insert(index, lines[index])
            elif len(lines) > 1:
                del lines[index]
            out = bytearray(b"\n".join(lines))
    return bytes(out)


@dataclass(frozen=True)
class JsonMutation:
    """A damaged copy of a value and the location of the damage."""

    value: Any
    path: str
    kind: str


def _locations(value: Any, path: str = "$") -> list[tuple[str, Any, Any]]:
    """Every (path, container, key) below `value` (the root itself excluded)."""
    found: list[tuple[str, Any, Any]] = []
    if isinstance(value, dict):
        for key, item in value.items():
            child = join_path(path, key)
            found.append((child, value, key))
            found.extend(_locations(item, child))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            child = join_path(path, index)
            found.append((child, value, index))
            found.extend(_locations(item, child))
    return found


@st.composite
def json_mutation(draw: st.DrawFn, original: Any) -> JsonMutation:
    """One damage at one location of a deep copy of `original` (a dict or list)."""
    value = copy.deepcopy(original)
    locations = _locations(value)
    path, container, key = draw(st.sampled_from(locations))
    kinds = ["replace"]
    if isinstance(container, dict):
        kinds.append("remove")
    if isinstance(container[key], dict):
        kinds.append("undeclared")
    kind = draw(st.sampled_from(kinds))
    if kind == "replace":
        container[key] = draw(json_values)
    elif kind == "remove":
        del container[key]
    else:
        container[key]["zzUndeclared"] = draw(json_values)
        path = join_path(path, "zzUndeclared")
    return JsonMutation(value, path, kind)
