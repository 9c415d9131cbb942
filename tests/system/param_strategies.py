"""Type-directed Hypothesis strategies for the params of every method in `protocol.methods`.

`random_params(params_type)` draws a random JSON object as params, each undeclared member a
defect. `near_valid_params(params_type)` draws a params object that is valid for the method's Struct
(walking ``msgspec.inspect.type_info``), then applies zero to two *located* defects to it:

- ``wrong_type`` — a member's value replaced by a JSON value of another kind;
- ``constraint`` — a value just outside its constraint (pattern, length, bound, literal set);
- ``missing`` — a required member removed;
- ``unknown`` — a member the Struct does not declare added.

It returns a `ParamsCase`: the params, and for each defect the path a located refusal must
name (``$.script[0].chunks``) together with the paths that also count as naming it: its own
descendants and, when the defect sits inside a union, the union's location (a union member
that matches no alternative may be reported where the union is). The oracle of validity is
msgspec itself (`is_valid`), exactly as the daemon's decoder uses it.

Values are JSON only. Strings avoid lone surrogates; built-in tool names are never drawn as
scripted tool calls, and providers other than ``scripted`` are never drawn valid, so a fuzzed
session cannot reach the network or run a command.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import msgspec
import msgspec.inspect as mi
from hypothesis import strategies as st

from protocol.validate import join_path

__all__ = [
    "KNOWN_SESSION_IDS",
    "Defect",
    "ParamsCase",
    "arbitrary_json",
    "is_valid",
    "near_valid_params",
    "random_params",
]

_text = st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=12)
_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _text
)
#: Any JSON value, small.
arbitrary_json: st.SearchStrategy[Any] = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=8,
)

#: Sessions the fuzzing daemon holds, so that valid params reach past "not found".
KNOWN_SESSION_IDS = ("fz-1", "fz-2", "fz-3")
_SAFE_ID = st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9._-]{0,20}\Z", fullmatch=True)
_UNSAFE_IDS = st.sampled_from(
    ["", ".", "..", "../x", "a/b", "/etc/passwd", "-a", "a" * 200, "é", "a\x00b", " a", ".hidden"]
)
_BUILTIN_TOOLS = {"Read", "Write", "Edit", "Bash", "Glob", "Grep", "WebFetch"}
#: Members whose valid values are drawn from a fixed, harmless set.
_FIXED_VALID: dict[str, st.SearchStrategy[Any]] = {
    "provider": st.sampled_from(["scripted", "no-such-provider"]),
    "cwd": st.sampled_from(["/", "/tmp", "/nonexistent/robota-fuzz", "/etc/passwd"]),
    "model": st.sampled_from(["m", "scripted-1"]),
    "sessionId": st.sampled_from(KNOWN_SESSION_IDS) | _SAFE_ID,
    "newSessionId": _SAFE_ID | st.sampled_from(KNOWN_SESSION_IDS),
    "delayMs": st.integers(0, 5),
}


@dataclass(frozen=True)
class Defect:
    """One defect applied to a params object, and the paths that name it."""

    kind: str
    path: str
    union_paths: tuple[str, ...] = ()

    def named_by(self, issue_path: str) -> bool:
        """Whether an issue at `issue_path` locates this defect."""
        if issue_path == self.path or issue_path in self.union_paths:
            return True
        return issue_path.startswith((self.path + ".", self.path + "["))


@dataclass
class ParamsCase:
    params: dict[str, Any]
    defects: list[Defect] = field(default_factory=list)


def is_valid(params_type: type[msgspec.Struct], params: Any) -> bool:
    """The authority: whether msgspec's decoder accepts `params` as `params_type`."""
    try:
        msgspec.json.decode(json.dumps(params).encode(), type=params_type)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return False
    return True


# -- valid values -------------------------------------------------------------------------


@dataclass
class _Location:
    """A place in the drawn value a defect can be applied to."""

    path: str
    container: Any  # the dict or list holding the value (None for the root)
    key: Any
    info: mi.Type
    unions: tuple[str, ...]


def _unwrap(info: mi.Type) -> mi.Type:
    while isinstance(info, mi.Metadata):
        info = info.type
    return info


def _draw_valid(
    draw: st.DrawFn,
    info: mi.Type,
    path: str,
    unions: tuple[str, ...],
    locations: list[_Location],
    member: str = "",
) -> Any:
    info = _unwrap(info)
    if member in _FIXED_VALID and isinstance(info, mi.StrType | mi.IntType):
        return draw(_FIXED_VALID[member])
    if isinstance(info, mi.StrType):
        if info.pattern is not None:
            return draw(_SAFE_ID if "A-Za-z0-9" in info.pattern else st.just("/"))
        size = info.min_length or 0
        top = info.max_length if info.max_length is not None else size + 12
        return draw(
            st.text(alphabet=st.characters(exclude_categories=["Cs"]), min_size=size, max_size=top)
        )
    if isinstance(info, mi.IntType):
        low = info.ge if info.ge is not None else (info.gt + 1 if info.gt is not None else -1000)
        high = info.le if info.le is not None else (info.lt - 1 if info.lt is not None else 10**6)
        return draw(st.integers(low, max(low, high)))
    if isinstance(info, mi.FloatType):
        return draw(
            st.floats(
                min_value=info.ge if info.ge is not None else info.gt,
                max_value=info.le if info.le is not None else info.lt,
                exclude_min=info.gt is not None,
                exclude_max=info.lt is not None,
                allow_nan=False,
                allow_infinity=False,
            )
        )
    if isinstance(info, mi.BoolType):
        return draw(st.booleans())
    if isinstance(info, mi.NoneType):
        return None
    if isinstance(info, mi.LiteralType):
        return draw(st.sampled_from(info.values))
    if isinstance(info, mi.UnionType):
        choice = draw(st.sampled_from(info.types))
        return _draw_valid(draw, choice, path, (*unions, path), locations, member)
    if isinstance(info, mi.ListType):
        size = draw(st.integers(info.min_length or 0, min(info.max_length or 2, 2)))
        items: list[Any] = []
        for index in range(size):
            item_path = join_path(path, index)
            items.append(_draw_valid(draw, info.item_type, item_path, unions, locations))
            locations.append(_Location(item_path, items, index, info.item_type, unions))
        return items
    if isinstance(info, mi.DictType):
        return draw(st.dictionaries(_text, arbitrary_json, max_size=3))
    if isinstance(info, mi.StructType):
        return _draw_struct(draw, info, path, unions, locations)
    if isinstance(info, mi.AnyType):
        return draw(arbitrary_json)
    raise NotImplementedError(f"no strategy for {info!r} at {path}")


def _draw_struct(
    draw: st.DrawFn,
    info: mi.StructType,
    path: str,
    unions: tuple[str, ...],
    locations: list[_Location],
) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    fields = list(info.fields)
    if info.cls.__name__ == "Step":
        # A summary step takes only delayMs; a reply step never takes summary. (A step that
        # is both is a cross-member defect the walker cannot locate beside other defects;
        # test_system_fuzz pins that case on its own.)
        summary = draw(st.booleans())
        keep = {"summary", "delayMs"} if summary else None
        fields = [
            f
            for f in fields
            if (keep is None and f.encode_name != "summary") or (keep and f.encode_name in keep)
        ]
        if summary:
            obj["summary"] = draw(_text)
            fields = [f for f in fields if f.encode_name != "summary"]
    for spec in fields:
        if not spec.required and not draw(st.booleans()):
            continue
        member_path = join_path(path, spec.encode_name)
        value = _draw_valid(draw, spec.type, member_path, unions, locations, spec.encode_name)
        if info.cls.__name__ == "ScriptedToolCall" and spec.encode_name == "name":
            value = value if value not in _BUILTIN_TOOLS else value + "_"
        obj[spec.encode_name] = value
        locations.append(_Location(member_path, obj, spec.encode_name, spec.type, unions))
    return obj


# -- defects ------------------------------------------------------------------------------


def _kind_of(value: Any) -> str:
    return type(value).__name__


def _other_kind(draw: st.DrawFn, info: mi.Type) -> Any:
    """A JSON value of a kind `info` never accepts (None when the type accepts every kind)."""
    info = _unwrap(info)
    if isinstance(info, mi.AnyType):
        return None
    candidates: list[Any] = [12345, "text", True, [1], {"x": 1}, None, 1.5]
    members = [_unwrap(t) for t in info.types] if isinstance(info, mi.UnionType) else [info]
    accepted: set[str] = set()
    for member in members:
        accepted |= _accepted_kinds(member)
    wrong = [c for c in candidates if _kind_of(c) not in accepted]
    return draw(st.sampled_from(wrong)) if wrong else None


def _accepted_kinds(info: mi.Type) -> set[str]:
    if isinstance(info, mi.StrType):
        return {"str"}
    if isinstance(info, mi.IntType):
        return {"int"}
    if isinstance(info, mi.FloatType):
        return {"int", "float"}
    if isinstance(info, mi.BoolType):
        return {"bool"}
    if isinstance(info, mi.NoneType):
        return {"NoneType"}
    if isinstance(info, mi.LiteralType):
        return {_kind_of(v) for v in info.values}
    if isinstance(info, mi.ListType):
        return {"list"}
    if isinstance(info, mi.DictType | mi.StructType):
        return {"dict"}
    return {"str", "int", "float", "bool", "NoneType", "list", "dict"}


def _out_of_constraint(info: mi.Type) -> list[Any]:
    """Values of the right kind that break `info`'s constraint (empty when it has none)."""
    info = _unwrap(info)
    if isinstance(info, mi.StrType):
        bad: list[Any] = []
        if info.pattern is not None:
            bad += [
                s for s in ["", "../x", "a/b", "a" * 200, "é"] if not re.search(info.pattern, s)
            ]
        if info.min_length:
            bad.append("")
        if info.max_length is not None:
            bad.append("x" * (info.max_length + 1))
        return bad
    if isinstance(info, mi.IntType | mi.FloatType):
        bad = []
        if info.ge is not None:
            bad.append(info.ge - 1)
        if info.gt is not None:
            bad.append(info.gt)
        if info.le is not None:
            bad.append(info.le + 1)
        if info.lt is not None:
            bad.append(info.lt)
        return bad
    if isinstance(info, mi.LiteralType):
        return ["not-a-member"] if all(isinstance(v, str) for v in info.values) else []
    return []


def _apply_defect(draw: st.DrawFn, location: _Location, case: ParamsCase) -> None:
    info = _unwrap(location.info)
    is_root = location.container is None
    kinds = [] if is_root else ["wrong_type"]
    if not is_root and _out_of_constraint(info):
        kinds.append("constraint")
    if isinstance(info, mi.StructType):
        kinds.append("unknown")
        obj = _resolve(case.params, location)
        required = [f.encode_name for f in info.fields if f.required and f.encode_name in obj]
        if required:
            kinds.append("missing")
    kind = draw(st.sampled_from(kinds))
    if kind == "wrong_type":
        value = _other_kind(draw, info)
        if value is None:
            return
        _replace(location, value)
        case.defects.append(Defect(kind, location.path, location.unions))
    elif kind == "constraint":
        _replace(location, draw(st.sampled_from(_out_of_constraint(info))))
        case.defects.append(Defect(kind, location.path, location.unions))
    elif kind == "unknown":
        obj = _resolve(case.params, location)
        obj["zzUndeclared"] = draw(arbitrary_json)
        case.defects.append(
            Defect(
                kind, join_path(location.path, "zzUndeclared"), (*location.unions, location.path)
            )
        )
    else:
        obj = _resolve(case.params, location)
        assert isinstance(info, mi.StructType)
        name = draw(
            st.sampled_from(
                [f.encode_name for f in info.fields if f.required and f.encode_name in obj]
            )
        )
        del obj[name]
        case.defects.append(
            Defect(kind, join_path(location.path, name), (*location.unions, location.path))
        )


def _resolve(params: dict[str, Any], location: _Location) -> dict[str, Any]:
    """The object at a struct location: the root params, or the value in its container."""
    if location.container is None:
        return params
    value = location.container[location.key]
    assert isinstance(value, dict)
    return value


def _replace(location: _Location, value: Any) -> None:
    location.container[location.key] = value


@st.composite
def near_valid_params(
    draw: st.DrawFn, params_type: type[msgspec.Struct], max_defects: int = 2
) -> ParamsCase:
    """A valid params object of `params_type` with 0..`max_defects` located defects, each in
    a subtree of its own (no defect lands inside, or around, another)."""
    root = mi.type_info(params_type)
    locations: list[_Location] = []
    params = _draw_valid(draw, root, "$", (), locations)
    locations.append(_Location("$", None, None, root, ()))
    case = ParamsCase(params)
    chosen: list[_Location] = []
    for _ in range(draw(st.integers(0, max_defects))):
        candidates = [loc for loc in locations if not any(_related(loc, c) for c in chosen)]
        if not candidates:
            break
        location = draw(st.sampled_from(candidates))
        chosen.append(location)
        _apply_defect(draw, location, case)
    return case


@st.composite
def random_params(draw: st.DrawFn, params_type: type[msgspec.Struct]) -> ParamsCase:
    """A random JSON object as params; each member `params_type` does not declare is a defect
    a refusal must name (when the type refuses undeclared members)."""
    params = draw(st.dictionaries(_text, arbitrary_json, max_size=4))
    root = mi.type_info(params_type)
    assert isinstance(root, mi.StructType)
    declared = {f.encode_name for f in root.fields}
    defects = []
    if root.forbid_unknown_fields:
        defects = [
            Defect("unknown", join_path("$", k), ("$",)) for k in params if k not in declared
        ]
    return ParamsCase(params, defects)


def _related(a: _Location, b: _Location) -> bool:
    """Whether one location is the other, or inside it."""
    return (
        a.path == b.path
        or a.path == "$"
        or b.path == "$"
        or _inside(a.path, b.path)
        or (_inside(b.path, a.path))
    )


def _inside(path: str, outer: str) -> bool:
    return path.startswith((outer + ".", outer + "["))
