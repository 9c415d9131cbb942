"""Two-speed strict decoding (architecture decision 3): msgspec first, then every issue located.

msgspec's typed decoder is the fast path and the one authority on validity: whatever it accepts
is accepted. It stops at the first problem, though, so when it rejects, a slow walker goes over
the same value with the same type information (`msgspec.inspect.type_info`) and collects *every*
problem as ``{"path": "$.a[0].b", "message": "expected string, got integer"}``.

The walker agrees with msgspec by construction where it can (leaf formats such as datetimes are
checked by msgspec itself) and by a fallback where it cannot: if msgspec rejected a value and the
walker finds nothing to say, the issue list is msgspec's own message at msgspec's own path. So a
rejected value always carries at least one issue, and the walker never turns a value msgspec
accepts into a failure (`decode_json`/`convert` only run it after msgspec has said no).

Paths use wire names: ``$``, ``$.member``, ``$.list[3]``, ``$.map["key with spaces"]``.
Messages never echo the offending value (it may be a secret); they name kinds and constraints.

Its size is one concept: the slow walker that finds every issue over every type kind msgspec
supports; splitting it by kind would spread one recursion over files.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import re
import uuid
from collections.abc import Callable
from typing import Annotated, Any, TypeVar, overload

import msgspec
import msgspec.inspect as mi

__all__ = [
    "Issue",
    "ValidationFailed",
    "collect_issues",
    "convert",
    "decode_json",
    "issue_from_error",
    "join_path",
]

T = TypeVar("T")

#: One located problem: ``{"path": "$.permissions.allow[2]", "message": "..."}``.
Issue = dict[str, str]

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_MSGSPEC_PATH = re.compile(r"^(?P<message>.*?) - at `(?P<path>[^`]*)`(?: in `(?P<outer>[^`]*)`)?$")
_INT_KEY = re.compile(r"-?[0-9]+\Z")


class ValidationFailed(Exception):
    """A value did not match its type; `issues` lists every problem found, at least one."""

    def __init__(self, issues: list[Issue]) -> None:
        self.issues = issues
        first = issues[0] if issues else {"path": "$", "message": "invalid"}
        more = f" (and {len(issues) - 1} more)" if len(issues) > 1 else ""
        super().__init__(f"{first['path']}: {first['message']}{more}")


# -- public entry points --------------------------------------------------------------------

_decoders: dict[Any, msgspec.json.Decoder[Any]] = {}
_type_infos: dict[Any, mi.Type] = {}


def _decoder(type_: Any) -> msgspec.json.Decoder[Any]:
    try:
        return _decoders[type_]
    except KeyError:
        decoder: msgspec.json.Decoder[Any] = msgspec.json.Decoder(type_)
        _decoders[type_] = decoder
        return decoder
    except TypeError:  # an unhashable annotation: no cache, still correct
        return msgspec.json.Decoder(type_)


@overload
def decode_json(data: bytes | str, type_: type[T]) -> T: ...
@overload
def decode_json(data: bytes | str, type_: Any) -> Any: ...
def decode_json(data: bytes | str, type_: Any) -> Any:
    """Decode JSON text strictly as `type_`, or raise `ValidationFailed` listing every issue.

    A JSON syntax error is a single issue at ``$``. Never raises anything else for bad input.
    """
    try:
        return _decoder(type_).decode(data)
    except msgspec.ValidationError as exc:
        first_error: msgspec.MsgspecError = exc
    except msgspec.DecodeError as exc:
        first_error = exc
    try:
        parsed = msgspec.json.decode(data)
    except msgspec.ValidationError:  # JSON no Python value holds (a number's size): the typed
        path, message = located(first_error)  # decode named the member, the untyped cannot
        raise ValidationFailed([{"path": path, "message": message}]) from None
    except msgspec.DecodeError as exc:
        raise ValidationFailed([{"path": "$", "message": f"invalid JSON: {exc}"}]) from None
    raise ValidationFailed(_issues_or_fallback(parsed, type_, first_error)) from None


_AT = re.compile(r"(?s)(.*) - at `(\$[^`]*)`\Z")


def located(exc: msgspec.MsgspecError) -> tuple[str, str]:
    """Where msgspec says `exc` is (``$`` when it says nowhere) and what, lower-cased:
    ``("$.offset", "number out of range")``."""
    text = str(exc)
    match = _AT.match(text)
    path, message = (match.group(2), match.group(1)) if match else ("$", text)
    return path, message[:1].lower() + message[1:]


@overload
def convert(obj: Any, type_: type[T]) -> T: ...
@overload
def convert(obj: Any, type_: Any) -> Any: ...
def convert(obj: Any, type_: Any) -> Any:
    """Convert builtins (a parsed JSON value) strictly to `type_`, or raise `ValidationFailed`."""
    try:
        return msgspec.convert(obj, type_)
    except msgspec.ValidationError as exc:
        raise ValidationFailed(_issues_or_fallback(obj, type_, exc)) from None


def collect_issues(obj: Any, type_: Any) -> list[Issue]:
    """Every problem of `obj` (JSON builtins) against `type_`; empty when the walker sees none.

    This is the slow walker alone. Use `decode_json`/`convert` to decide validity: they consult
    msgspec first and guarantee a non-empty list on rejection.
    """
    issues: list[Issue] = []
    try:
        _walk(obj, _type_info(type_), "$", issues)
    except RecursionError:
        issues.append({"path": "$", "message": "value nested too deeply"})
    return issues


def join_path(path: str, key: str | int) -> str:
    """Extend a path by one step: an index, an identifier-like member, or a quoted key."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    if _IDENTIFIER.match(key):
        return f"{path}.{key}"
    return f"{path}[{json.dumps(key, ensure_ascii=False)}]"


# -- internals ------------------------------------------------------------------------------


def _type_info(type_: Any) -> mi.Type:
    try:
        return _type_infos[type_]
    except KeyError:
        info = mi.type_info(type_)
        _type_infos[type_] = info
        return info
    except TypeError:
        return mi.type_info(type_)


def _issues_or_fallback(obj: Any, type_: Any, error: msgspec.MsgspecError) -> list[Issue]:
    issues = collect_issues(obj, type_)
    return issues or [issue_from_error(error)]


def issue_from_error(error: msgspec.MsgspecError) -> Issue:
    """msgspec's own message as an issue: its path (``$``-rooted) and the message."""
    text = str(error)
    match = _MSGSPEC_PATH.match(text)
    if match is None:
        return {"path": "$", "message": text}
    if match.group("outer") is not None:  # "- at `key` in `$.a`": the problem is a map key
        return {"path": match.group("outer"), "message": f"{match.group('message')} (map key)"}
    return {"path": match.group("path"), "message": match.group("message")}


def _kind(value: Any) -> str:
    """The JSON kind of a value, as messages name it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list | tuple):
        return "array"
    return type(value).__name__


def _expected(info: mi.Type) -> str:
    """What a type expects, in the words of messages."""
    if isinstance(info, mi.Metadata):
        return _expected(info.type)
    if isinstance(info, mi.UnionType):
        return " or ".join(dict.fromkeys(_expected(t) for t in info.types))
    if isinstance(info, mi.LiteralType | mi.EnumType):
        return "one of " + ", ".join(json.dumps(v) for v in _literal_values(info))
    if isinstance(info, mi.StructType) and info.array_like:
        return "array"
    names: dict[type[mi.Type], str] = {
        mi.NoneType: "null",
        mi.BoolType: "boolean",
        mi.IntType: "integer",
        mi.FloatType: "number",
        mi.StrType: "string",
        mi.DateTimeType: "date-time string",
        mi.DateType: "date string",
        mi.TimeType: "time string",
        mi.TimeDeltaType: "duration",
        mi.UUIDType: "UUID string",
        mi.DecimalType: "decimal",
        mi.BytesType: "base64 string",
        mi.ByteArrayType: "base64 string",
        mi.StructType: "object",
        mi.TypedDictType: "object",
        mi.DataclassType: "object",
        mi.DictType: "object",
    }
    for cls, name in names.items():
        if isinstance(info, cls):
            return name
    if isinstance(info, mi.CollectionType | mi.TupleType):
        return "array"
    return "value"


def _literal_values(info: mi.LiteralType | mi.EnumType) -> list[Any]:
    if isinstance(info, mi.LiteralType):
        return list(info.values)
    return [member.value for member in info.cls]


def _accepts_kind(info: mi.Type, value: Any) -> bool:
    """Whether `info` could take a value of this JSON kind at all (used to pick union members)."""
    if isinstance(info, mi.Metadata):
        return _accepts_kind(info.type, value)
    if isinstance(info, mi.AnyType | mi.RawType | mi.CustomType):
        return True
    if value is None:
        return isinstance(info, mi.NoneType)
    if isinstance(value, bool):
        if isinstance(info, mi.LiteralType):
            return any(isinstance(v, bool) for v in info.values)
        return isinstance(info, mi.BoolType)
    if isinstance(value, int):
        if isinstance(info, mi.LiteralType | mi.EnumType):
            return any(type(v) is int for v in _literal_values(info))
        return isinstance(info, mi.IntType | mi.FloatType | mi.DecimalType | mi.TimeDeltaType)
    if isinstance(value, float):
        return isinstance(info, mi.FloatType | mi.DecimalType | mi.TimeDeltaType)
    if isinstance(value, str):
        if isinstance(info, mi.LiteralType | mi.EnumType):
            return any(isinstance(v, str) for v in _literal_values(info))
        return isinstance(info, (mi.StrType, *_STRING_LEAVES))
    if isinstance(value, dict):
        return isinstance(info, mi.DictType | mi.TypedDictType | mi.DataclassType) or (
            isinstance(info, mi.StructType) and not info.array_like
        )
    if isinstance(value, list | tuple):
        return isinstance(info, mi.CollectionType | mi.TupleType) or (
            isinstance(info, mi.StructType) and info.array_like
        )
    if isinstance(value, msgspec.Struct):
        return isinstance(info, mi.StructType) and type(value) is info.cls
    if isinstance(value, dt.datetime):
        return isinstance(info, mi.DateTimeType)
    if isinstance(value, dt.date):  # TOML has dates and times of day, JSON none
        return isinstance(info, mi.DateType)
    if isinstance(value, dt.time):
        return isinstance(info, mi.TimeType)
    return True  # some other Python object: let the leaf check decide


_STRING_LEAVES = (
    mi.DateTimeType,
    mi.DateType,
    mi.TimeType,
    mi.TimeDeltaType,
    mi.UUIDType,
    mi.DecimalType,
    mi.BytesType,
    mi.ByteArrayType,
)


def _walk(value: Any, info: mi.Type, path: str, issues: list[Issue]) -> None:
    """Append every issue of `value` against `info` (located under `path`) to `issues`."""
    if isinstance(info, mi.Metadata):
        _walk(value, info.type, path, issues)
        return
    if isinstance(info, mi.AnyType | mi.RawType | mi.CustomType):
        return
    if isinstance(info, mi.UnionType):
        _walk_union(value, info, path, issues)
        return
    if not _accepts_kind(info, value):
        issues.append({"path": path, "message": f"expected {_expected(info)}, got {_kind(value)}"})
        return
    walker = _WALKERS.get(type(info))
    if walker is not None:
        walker(value, info, path, issues)
    elif isinstance(info, mi.CollectionType):
        _walk_collection(value, info, path, issues)


def _walk_union(value: Any, info: mi.UnionType, path: str, issues: list[Issue]) -> None:
    candidates = [member for member in info.types if _accepts_kind(member, value)]
    if not candidates:
        issues.append({"path": path, "message": f"expected {_expected(info)}, got {_kind(value)}"})
        return
    structs = [c for c in candidates if isinstance(c, mi.StructType) and c.tag_field is not None]
    if len(structs) > 1 and isinstance(value, dict):
        _walk_tagged(value, structs, path, issues)
        return
    first: list[Issue] | None = None
    for member in candidates:
        member_issues: list[Issue] = []
        _walk(value, member, path, member_issues)
        if not member_issues:
            return
        first = member_issues if first is None else first
    if (
        len(candidates) < len(info.types)
        and all(isinstance(c, mi.LiteralType) for c in candidates)
        and not isinstance(value, dict | list)
    ):
        # A value of a literal's kind, but not the literal (``true`` for ``number | false``):
        # naming the literal alone would hide the other members. (The value is not echoed.)
        message = f"expected {_expected(info)}, got another {_kind(value)}"
        issues.append({"path": path, "message": message})
        return
    issues.extend(first or [])


def _walk_tagged(
    value: dict[str, Any], structs: list[mi.StructType], path: str, issues: list[Issue]
) -> None:
    tag_field = structs[0].tag_field
    assert tag_field is not None
    if tag_field not in value:
        issues.append({"path": join_path(path, tag_field), "message": "missing required member"})
        return
    for struct in structs:
        if value[tag_field] == struct.tag and type(value[tag_field]) is type(struct.tag):
            _walk_struct(value, struct, path, issues)
            return
    tags = ", ".join(json.dumps(s.tag) for s in structs)
    issues.append({"path": join_path(path, tag_field), "message": f"expected one of {tags}"})


def _walk_struct(value: Any, info: mi.StructType, path: str, issues: list[Issue]) -> None:
    if isinstance(value, msgspec.Struct):
        return  # an instance of the very class (checked by _accepts_kind) passes as is
    if info.array_like:
        _walk_array_struct(value, info, path, issues)
        return
    if info.tag_field is not None and info.tag_field in value:
        tag = value[info.tag_field]
        if tag != info.tag or type(tag) is not type(info.tag):
            issues.append(
                {
                    "path": join_path(path, info.tag_field),
                    "message": f"expected {json.dumps(info.tag)}",
                }
            )
    before = len(issues)
    _walk_fields(value, info.fields, path, issues)
    if info.forbid_unknown_fields:
        known = {f.encode_name for f in info.fields}
        if info.tag_field is not None:
            known.add(info.tag_field)
        for key in value:
            if key not in known:
                issues.append({"path": join_path(path, str(key)), "message": "unknown member"})
    if len(issues) == before and hasattr(info.cls, "__post_init__"):
        # Checks a Struct makes when it is built (`__post_init__`) run only on a value whose
        # members all passed; msgspec reports them at the value itself, so this one value is
        # converted on its own to report them here, wherever else the document is wrong.
        try:
            msgspec.convert(value, info.cls)
        except msgspec.ValidationError as exc:
            inner = issue_from_error(exc)
            issues.append(
                {"path": path + inner["path"].removeprefix("$"), "message": inner["message"]}
            )


def _walk_fields(
    value: dict[str, Any], fields: tuple[mi.Field, ...], path: str, issues: list[Issue]
) -> None:
    for field in fields:
        member = join_path(path, field.encode_name)
        if field.encode_name in value:
            _walk(value[field.encode_name], field.type, member, issues)
        elif field.required:
            issues.append({"path": member, "message": "missing required member"})


def _walk_array_struct(value: Any, info: mi.StructType, path: str, issues: list[Issue]) -> None:
    items = list(value)
    offset = 0
    if info.tag_field is not None:
        if not items or items[0] != info.tag or type(items[0]) is not type(info.tag):
            issues.append({"path": join_path(path, 0), "message": f"expected {info.tag!r}"})
            return
        offset = 1
    required = sum(1 for f in info.fields if f.required)
    if len(items) - offset < required:
        issues.append(
            {"path": path, "message": f"expected array of at least {required + offset} items"}
        )
    if info.forbid_unknown_fields and len(items) - offset > len(info.fields):
        issues.append(
            {"path": path, "message": f"expected array of at most {len(info.fields) + offset}"}
        )
    for index, field in enumerate(info.fields):
        if offset + index < len(items):
            _walk(items[offset + index], field.type, join_path(path, offset + index), issues)


def _walk_object_fields(
    value: Any, info: mi.TypedDictType | mi.DataclassType, path: str, issues: list[Issue]
) -> None:
    _walk_fields(value, info.fields, path, issues)


def _walk_collection(value: Any, info: mi.CollectionType, path: str, issues: list[Issue]) -> None:
    _check_length(len(value), info.min_length, info.max_length, "items", path, issues)
    for index, item in enumerate(value):
        _walk(item, info.item_type, join_path(path, index), issues)


def _walk_tuple(value: Any, info: mi.TupleType, path: str, issues: list[Issue]) -> None:
    if len(value) != len(info.item_types):
        issues.append({"path": path, "message": f"expected array of {len(info.item_types)} items"})
        return
    for index, (item, item_type) in enumerate(zip(value, info.item_types, strict=True)):
        _walk(item, item_type, join_path(path, index), issues)


def _walk_dict(value: Any, info: mi.DictType, path: str, issues: list[Issue]) -> None:
    _check_length(len(value), info.min_length, info.max_length, "members", path, issues)
    for key, item in value.items():
        member = join_path(path, str(key))
        _check_key(key, info.key_type, member, issues)
        _walk(item, info.value_type, member, issues)


def _check_key(key: Any, info: mi.Type, path: str, issues: list[Issue]) -> None:
    """JSON object keys are strings; int-like key types parse them first."""
    while isinstance(info, mi.Metadata):
        info = info.type
    if isinstance(info, mi.IntType) and isinstance(key, str):
        if not _INT_KEY.match(key):
            issues.append({"path": path, "message": "key: expected integer"})
            return
        key = int(key)
    key_issues: list[Issue] = []
    _walk(key, info, path, key_issues)
    issues.extend({"path": i["path"], "message": f"key: {i['message']}"} for i in key_issues)


def _check_length(
    length: int, low: int | None, high: int | None, unit: str, path: str, issues: list[Issue]
) -> None:
    if low is not None and length < low:
        issues.append({"path": path, "message": f"expected at least {_count(low, unit)}"})
    if high is not None and length > high:
        issues.append({"path": path, "message": f"expected at most {_count(high, unit)}"})


def _count(number: int, unit: str) -> str:
    """``1 character``, ``3 characters``: what an empty ``model = ""`` is told it lacks."""
    return f"{number} {unit.removesuffix('s') if number == 1 else unit}"


def _walk_str(value: Any, info: mi.StrType, path: str, issues: list[Issue]) -> None:
    _check_length(len(value), info.min_length, info.max_length, "characters", path, issues)
    if info.pattern is not None and not re.search(info.pattern, value):
        issues.append({"path": path, "message": f"expected to match pattern {info.pattern!r}"})


def _walk_number(
    value: Any, info: mi.IntType | mi.FloatType, path: str, issues: list[Issue]
) -> None:
    checks: list[tuple[Any, Callable[[Any, Any], bool], str]] = [
        (info.gt, lambda v, b: v > b, ">"),
        (info.ge, lambda v, b: v >= b, ">="),
        (info.lt, lambda v, b: v < b, "<"),
        (info.le, lambda v, b: v <= b, "<="),
    ]
    for bound, holds, symbol in checks:
        if bound is not None and not holds(value, bound):
            issues.append({"path": path, "message": f"expected {symbol} {bound}"})
    if info.multiple_of is not None and value % info.multiple_of != 0:
        issues.append({"path": path, "message": f"expected a multiple of {info.multiple_of}"})


def _walk_literal(
    value: Any, info: mi.LiteralType | mi.EnumType, path: str, issues: list[Issue]
) -> None:
    values = _literal_values(info)
    if not any(value == v and type(value) is type(v) for v in values):
        allowed = ", ".join(json.dumps(v) for v in values)
        issues.append({"path": path, "message": f"expected one of {allowed}"})


def _walk_leaf(value: Any, info: mi.Type, path: str, issues: list[Issue]) -> None:
    """Formats (datetimes, UUIDs, …) are judged by msgspec itself, so the walker agrees."""
    annotation = _leaf_annotation(info)
    try:
        msgspec.convert(value, annotation)
    except msgspec.ValidationError as exc:
        if isinstance(info, mi.DateTimeType) and info.tz:
            message = "expected timezone-aware ISO-8601 date-time string"
        else:
            detail = str(exc).split(" - at ", 1)[0]
            message = f"expected {_expected(info)} ({detail})"
        issues.append({"path": path, "message": message})


def _leaf_annotation(info: mi.Type) -> Any:
    if isinstance(info, mi.DateTimeType):
        return dt.datetime if info.tz is None else Annotated[dt.datetime, msgspec.Meta(tz=info.tz)]
    if isinstance(info, mi.TimeType):
        return dt.time if info.tz is None else Annotated[dt.time, msgspec.Meta(tz=info.tz)]
    simple: dict[type[mi.Type], Any] = {
        mi.DateType: dt.date,
        mi.TimeDeltaType: dt.timedelta,
        mi.UUIDType: uuid.UUID,
        mi.DecimalType: decimal.Decimal,
        mi.BytesType: bytes,
        mi.ByteArrayType: bytearray,
    }
    return simple.get(type(info), Any)


def _walk_nothing(value: Any, info: mi.Type, path: str, issues: list[Issue]) -> None:
    """The kind check already decided (null, booleans)."""


_WALKERS: dict[type[mi.Type], Callable[[Any, Any, str, list[Issue]], None]] = {
    mi.StructType: _walk_struct,
    mi.TypedDictType: _walk_object_fields,
    mi.DataclassType: _walk_object_fields,
    mi.DictType: _walk_dict,
    mi.TupleType: _walk_tuple,
    mi.StrType: _walk_str,
    mi.IntType: _walk_number,
    mi.FloatType: _walk_number,
    mi.LiteralType: _walk_literal,
    mi.EnumType: _walk_literal,
    mi.NoneType: _walk_nothing,
    mi.BoolType: _walk_nothing,
    **{leaf: _walk_leaf for leaf in _STRING_LEAVES},
}
