"""Generate ``protocol/REFERENCE.md``, the protocol reference for plugin authors, from the code.

The method, event, shape and error tables are read from `protocol.methods.METHODS`,
`protocol.events`, `protocol.errors.CODES` and the Structs they name (via
`msgspec.inspect`), so the reference cannot drift from what the daemon decodes. The prose
around them is kept here.

    python -m protocol.gen_reference          # rewrite REFERENCE.md
    python -m protocol.gen_reference --check  # exit 1 if REFERENCE.md is out of date

Its size is the reference's prose: one summary per method and error, kept beside the generator
so the two never drift.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Final

import msgspec
import msgspec.inspect as mi

from protocol import errors, events, methods
from protocol.framing import DEFAULT_MAX_FRAME_BYTES

__all__ = ["REFERENCE_PATH", "main", "render_reference"]

REFERENCE_PATH: Final = Path(__file__).with_name("REFERENCE.md")

#: One line per method: what it does and what to know about its errors.
SUMMARIES: Final[dict[str, str]] = {
    "initialize": (
        "Optional handshake; always answered. Clients may skip it. The daemon also accepts an "
        "LSP editor's `initialize`: members it does not know are ignored and "
        "`clientInfo.version` may be absent (the table is what a robota client sends)."
    ),
    "daemon/status": "Daemon version, pid, paths and session counts.",
    "daemon/shutdown": (
        "Answers at once, then stops accepting, lets running turns finish within "
        "`graceSeconds`, aborts the rest, closes every session and exits 0."
    ),
    "session/create": (
        "Create a session. `cwd` must be an absolute, existing directory; `sessionId` is "
        "generated when absent. `autoCompactThreshold: false` turns automatic compaction off; "
        "absent means the default (0.835). Every malformed permission pattern is listed in one "
        '-32602. -32010 if `sessionId` exists; -32013 for `permissionMode: "auto"` with no '
        "classifier configured. `script` feeds the offline `scripted` provider."
    ),
    "session/open": "Load a stored session. -32002 unknown, -32003 corrupt, -32004 unsupported.",
    "session/get": "The session's current info (loads it first if stored).",
    "session/list": (
        "Every stored or live session, newest `updatedAt` first; damaged records are listed "
        'with `status` "corrupt" or "unsupported", never hidden.'
    ),
    "session/close": "Drain, run SessionEnd, persist and unload the session.",
    "session/fork": (
        "New session with the source's history up to and including `atMessageId` (default: "
        "all), same cwd, provider, model, mode and rules; a parked execution is not carried "
        "over (its open calls close as failed results; one of uncertain outcome with a result "
        "starting `outcome unknown:`). -32002 (with `data.messageId`) for an unknown message, "
        "-32001 while the source runs a turn."
    ),
    "session/delete": "Delete a stored session. -32014 while it is loaded.",
    "session/run": (
        "Run a turn. `turnId` is an idempotency key: a known one (robotad remembers the last "
        "256 of each session) attaches to that turn or returns its result. `wait: false` "
        'answers `{turnId, status: "running"}` at once and '
        "the outcome arrives as `turn_finished`. Turns outlive the connection; cancelling the "
        "request stops only the waiting. -32001 busy, -32005 an execution waits, -32006 "
        "aborted, -32007 provider failed. The caller is subscribed to the session."
    ),
    "session/abort": (
        "Abort the running turn or compaction; `aborted: true` exactly when it then ends "
        "aborted, `false` if none ran or its outcome was already decided (its last reply "
        "arrived, it parked or failed, its summary is being applied: then only its closing "
        "hook is cut short)."
    ),
    "session/pending": (
        "The parked execution waiting for approval, or null; `uncertain` lists the calls that "
        "were running when robotad stopped."
    ),
    "session/resume": (
        "Answer a parked execution's approval requests; no new user message. Redelivering an "
        "identical `{requestId, responseId, approved}` is idempotent (robotad keeps the "
        "journals of the last 64 executions of each session that asked for approval). -32011 "
        "for an unknown, abandoned or finished execution or a reused `responseId` with other "
        "content; -32015 when an approved tool was running when robotad stopped (its outcome "
        "is unknown: abandon the execution). Both answers hold while the session is busy "
        "with other work; -32001 only for the execution that waits or runs."
    ),
    "session/abandon": (
        "Drop a parked execution: nothing runs, its open tool calls close as failed (a call "
        "whose outcome is uncertain with a result starting `outcome unknown:`); resuming "
        "it afterwards is -32011."
    ),
    "session/compact": (
        "Summarise the history. `compacted: false` means nothing to summarise. -32008 "
        "failed (the provider failed, or its reply is no whole summary: empty, cut off at its "
        "output limit or by a filter, or calling tools), -32009 aborted; history untouched in "
        "both."
    ),
    "session/history": (
        "A page of the history from `offset`, at most `limit` messages (absent: to the end); "
        "`total` counts the whole history."
    ),
    "session/context": "Token usage of the session's context window.",
    "session/setPermissionMode": "Change the permission mode; -32013 when refused.",
    "session/addRule": (
        "Add a permission rule. Project scope persists for the session's canonical cwd, or "
        "fails and adds nothing."
    ),
    "session/subscribe": (
        "Receive `session/event` notifications. Buffered events after `afterSeq` come first "
        "(the last 10,000 of the session, `robotad --event-buffer N`); -32012 when `afterSeq` "
        "is older than the replay buffer, or a seq of an earlier robotad process (a session's "
        "seqs go on rising across restarts). On a connection already subscribed to the session, "
        "events it was sent are not sent again (seqs on a connection only rise): unsubscribe "
        "first to replay them."
    ),
    "session/unsubscribe": "Stop receiving the session's events on this connection.",
    "session/export": "The session as an artifact; lossless unless `redact`.",
    "session/import": (
        "Create a session from an artifact, decoded by the same total decoder as a stored "
        "record: every defect is listed in one -32602 with its path under `$.artifact`. A "
        "record that decodes is then held to what a session can go on from (safe session ids, "
        "`forkedFrom` included; tool calls on assistant messages only, each naming its tool, "
        "each call's results right after it; message ids that name fork points; settings a "
        "create would take), each defect again at its path. A refusal writes nothing. -32010 "
        "if the session exists. Calls of the last round still without a result are closed by "
        "the first run, with a result starting `outcome unknown:` (nothing here knows whether "
        "they ran)."
    ),
    "session/log": "Check the session log: lines decoded and every problem found.",
    "history/search": "Prompts of every session, newest first, narrowed by query and cwd.",
    "mcp/list": "MCP tool servers (the daemon's, and a session's own), started if not running.",
}

#: What each error's ``data`` holds (PROTOCOL.md §2–§3).
ERROR_DATA: Final[dict[int, str]] = {
    -32700: "—",
    -32600: "`{limit}` for a frame over the cap",
    -32601: "`{method}`",
    -32602: "`{issues: [{path, message}]}` — every problem",
    -32603: "— (no detail ever)",
    -32800: "—",
    -32001: "`{sessionId, turnId}` (the holder's)",
    -32002: "`{sessionId}` (`messageId` for session/fork)",
    -32003: "`{sessionId, issues: [{path, message}]}`",
    -32004: "`{sessionId, schemaVersion}`",
    -32005: "`{sessionId, executionId}`",
    -32006: "`{sessionId, turnId}`",
    -32007: "`{sessionId, turnId, provider, reason}`",
    -32008: "`{sessionId, trigger}`",
    -32009: "`{sessionId, trigger}`",
    -32010: "`{sessionId}`",
    -32011: "`{sessionId, executionId, requestId?}`",
    -32012: "`{sessionId, oldestSeq}`",
    -32013: "`{sessionId, mode, reason}`",
    -32014: "`{reason}`",
    -32015: "`{sessionId, executionId, calls: [callId]}`",
    -32016: "`{sessionId?, path, reason}` (`path` relative to the state folder)",
}

INTRO: Final = """\
# robotad protocol reference (version @VERSION@)

For plugin and script authors. The method, event, shape and error tables are generated from
the Structs the daemon decodes with (`python -m protocol.gen_reference`); do not edit them by
hand. The contract they implement is `PROTOCOL.md`.

## Connecting

- Unix stream socket, first that is set: `--socket PATH`, `ROBOTA_SOCKET`,
  `$XDG_RUNTIME_DIR/robota/robotad.sock`, `/tmp/robota-$UID/robotad.sock`. Only the daemon's
  own user may connect; anyone else is disconnected before a byte is read.
- Framing is chosen by your first non-whitespace byte and used for every reply:
  - `{` or `[` — **NDJSON**: one JSON value per line (UTF-8, `\\n`; a `\\r` before it is
    fine; blank lines are skipped; a last line without newline is read at end of input).
  - `C` or `c` — **LSP base protocol**: `Content-Length: N\\r\\n\\r\\n` then N bytes of
    body. Header names are case-insensitive; `Content-Type` is accepted and ignored.
  - anything else: one -32700 error, then the connection closes.
- A frame over the limit (@LIMIT@ bytes by default, `robotad --max-message-bytes N`) is
  refused as soon as it is known to be too large (an NDJSON line that grows past it, a
  `Content-Length` above it): error -32600 with `data.limit`, then the connection closes.
  Nothing of it reaches a session.
- Closing your sending side (half-close) is fine: requests already sent are still answered,
  then the daemon closes the connection.

## JSON-RPC 2.0

- Every message carries `"jsonrpc": "2.0"`. Ids are strings or integers. Params are named
  (an object); absent or `null` params mean `{}`; an array is -32602.
- Replies hold exactly `jsonrpc`, `id` and `result` or `error` (`{code, message, data?}`);
  nothing else, so strict clients (Emacs `jsonrpc.el`) accept them.
- Batches work: the replies to a batch's requests come back as one array (in any order);
  a batch of notifications only gets no reply; an empty batch `[]` gets a single -32600.
- Notifications are never answered. Unknown `$/…` notifications are ignored.
- `$/cancelRequest {"id": ID}` cancels a request still running; it is answered -32800 at
  once. For `session/run` it stops the waiting, never the turn (use `session/abort`), and
  the connection stays subscribed.
- A message with an `id` and no `method` is a response; with nothing awaiting it, ignored.
- -32602 lists every problem with its path: `$.permissions.allow[2]`, `$.script[1].chunks`.
- -32603 never carries a stack trace or a secret; details go to the daemon's log.
- A failing request never closes the connection or affects another client.

## Errors

| code | name | `data` |
|---|---|---|
"""

EXAMPLES: Final = """\
## Examples with socat

A helper (`-t` is how long socat keeps reading replies after your input ends: give a turn as
long as it needs):

```sh
SOCK=${ROBOTA_SOCKET:-$XDG_RUNTIME_DIR/robota/robotad.sock}
rpc() { socat -t "${WAIT:-5}" - "UNIX-CONNECT:$SOCK"; }
echo '{"jsonrpc":"2.0","id":1,"method":"daemon/status"}' | rpc
```

A session, then a turn with its events (the caller of `session/run` is subscribed). Requests
on one connection run concurrently, so send a request that depends on another only after its
reply:

```sh
rpc <<'EOF'
{"jsonrpc":"2.0","id":1,"method":"session/create","params":{"cwd":"/tmp","sessionId":"demo"}}
EOF
WAIT=60 rpc <<'EOF'
{"jsonrpc":"2.0","id":2,"method":"session/run","params":{"sessionId":"demo","prompt":"hello"}}
EOF
```

```
{"jsonrpc":"2.0","method":"session/event","params":{"type":"turn_started",…,"prompt":"hello"}}
{"jsonrpc":"2.0","method":"session/event","params":{"type":"text_delta",…,"text":"echo: hello"}}
…
{"jsonrpc":"2.0","id":2,"result":{"turnId":"…","status":"completed","response":"echo: hello"}}
```

The LSP framing, with a batch whose second request has an invalid session id:

```sh
body='[{"jsonrpc":"2.0","id":1,"method":"session/list"},
 {"jsonrpc":"2.0","id":2,"method":"session/get","params":{"sessionId":"../x"}}]'
printf 'Content-Length: %d\\r\\n\\r\\n%s' "${#body}" "$body" | rpc
```

The reply comes in the same framing; its body, formatted:

```
Content-Length: …

[
  {"jsonrpc": "2.0", "id": 1, "result": {"sessions": […]}},
  {"jsonrpc": "2.0", "id": 2, "error": {"code": -32602, "message": "invalid params: …",
    "data": {"issues": [{"path": "$.sessionId", "message": "expected to match pattern …"}]}}}
]
```

Interactive, cancelling a waiting `session/run` (the turn goes on; stop it with
`session/abort`):

```sh
socat - "UNIX-CONNECT:$SOCK"
{"jsonrpc":"2.0","id":7,"method":"session/run","params":{"sessionId":"demo","prompt":"go"}}
{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":7}}
```

From Python, `protocol.client.open_connection` gives a running peer:

```python
from protocol.client import open_connection
from protocol.methods import RunResult

async with open_connection(on_notification=print) as peer:
    result = await peer.request(
        "session/run", {"sessionId": "demo", "prompt": "hello"}, result_type=RunResult
    )
```
"""


# -- type rendering -------------------------------------------------------------------------


def _constraints(info: mi.Type) -> list[str]:
    notes: list[str] = []
    for attr, symbol in (("gt", ">"), ("ge", "≥"), ("lt", "<"), ("le", "≤")):
        value = getattr(info, attr, None)
        if value is not None:
            notes.append(f"{symbol} {value}")
    if getattr(info, "pattern", None):
        notes.append(f"matches `{info.pattern}`")  # type: ignore[attr-defined]
    if getattr(info, "min_length", None):
        notes.append(f"length ≥ {info.min_length}")  # type: ignore[attr-defined]
    if getattr(info, "max_length", None):
        notes.append(f"length ≤ {info.max_length}")  # type: ignore[attr-defined]
    return notes


def render_type(info: mi.Type, shapes: dict[str, mi.StructType]) -> str:
    """A compact JSON-ish name for a type; Structs are collected into `shapes`."""
    if isinstance(info, mi.Metadata):
        return render_type(info.type, shapes)
    if isinstance(info, mi.StructType):
        shapes.setdefault(info.cls.__name__, info)
        return f"[{info.cls.__name__}](#{info.cls.__name__.lower()})"
    if isinstance(info, mi.UnionType):
        return " \\| ".join(render_type(member, shapes) for member in info.types)
    if isinstance(info, mi.LiteralType):
        return " \\| ".join(json.dumps(value) for value in info.values)
    if isinstance(info, mi.ListType):
        return f"[{render_type(info.item_type, shapes)}]"
    if isinstance(info, mi.DictType):
        return "object"
    if isinstance(info, mi.DateTimeType):
        return "string (ISO-8601 UTC, `Z`)"
    simple = {
        mi.StrType: "string",
        mi.IntType: "integer",
        mi.FloatType: "number",
        mi.BoolType: "boolean",
        mi.NoneType: "null",
        mi.AnyType: "any",
    }
    return simple.get(type(info), type(info).__name__)


def _notes(info: mi.Type) -> list[str]:
    if isinstance(info, mi.Metadata):
        notes = _notes(info.type)
        description = (info.extra_json_schema or {}).get("description")
        return [*notes, str(description)] if description else notes
    if isinstance(info, mi.UnionType):
        return [note for member in info.types for note in _notes(member)]
    return _constraints(info)


def render_fields(struct: mi.StructType, shapes: dict[str, mi.StructType]) -> list[str]:
    """A member table for one Struct (its tag, if any, first)."""
    lines = ["| member | type | required | notes |", "|---|---|---|---|"]
    if struct.tag_field is not None:
        lines.append(f"| `{struct.tag_field}` | {json.dumps(struct.tag)} | yes | tag |")
    for field in struct.fields:
        notes = _notes(field.type)
        if field.default is not msgspec.NODEFAULT and field.default is not msgspec.UNSET:
            notes.insert(0, f"default {json.dumps(field.default)}")
        elif field.default_factory is not msgspec.NODEFAULT:
            notes.insert(0, f"default {json.dumps(field.default_factory())}")
        required = "yes" if field.required else "no"
        note_text = "; ".join(notes).replace("|", "\\|")
        lines.append(
            f"| `{field.encode_name}` | {render_type(field.type, shapes)} | {required} "
            f"| {note_text} |"
        )
    return lines


def _struct_doc(cls: type[Any]) -> str:
    doc = (cls.__doc__ or "").strip()
    generic = doc.startswith(("A base", "Base of")) or cls.__doc__ == msgspec.Struct.__doc__
    return "" if generic else " ".join(doc.replace("``", "`").split())


def _render_value(
    info: mi.Type, shapes: dict[str, mi.StructType], *, with_doc: bool = True
) -> list[str]:
    """A value inline: a Struct as its member table, a union by its members' names."""
    if isinstance(info, mi.StructType) and not info.fields and info.tag is None:
        return ["`{}`"]
    if isinstance(info, mi.StructType):
        doc = _struct_doc(info.cls) if with_doc else ""
        return ([doc, ""] if doc else []) + render_fields(info, shapes)
    return [f"One of {render_type(info, shapes)}, told apart by their tag."]


def _shared_results() -> set[type[Any]]:
    """Result Structs worth a section of their own: shared shapes or used by several methods."""
    seen: dict[Any, int] = {}
    for _params, result in methods.METHODS.values():
        seen[result] = seen.get(result, 0) + 1
    return {
        result
        for result, count in seen.items()
        if isinstance(result, type) and (count > 1 or result.__module__ != methods.__name__)
    }


# -- document -------------------------------------------------------------------------------


def render_reference() -> str:
    shapes: dict[str, mi.StructType] = {}
    out: list[str] = [
        INTRO.replace("@VERSION@", str(methods.PROTOCOL_VERSION))
        .replace("@LIMIT@", f"{DEFAULT_MAX_FRAME_BYTES:,}")
        .rstrip()
    ]
    standard = [-32700, -32600, -32601, -32602, -32603, -32800]
    for code in standard + sorted((c for c in errors.CODES if c not in standard), reverse=True):
        out.append(f"| {code} | {errors.CODES[code].__name__} | {ERROR_DATA[code]} |")

    out += ["", "## Methods", ""]
    shared = _shared_results()
    for name, (params_type, result_type) in methods.METHODS.items():
        out += [f"### `{name}`", "", SUMMARIES[name], "", "**Params**", ""]
        out += _render_value(mi.type_info(params_type), shapes, with_doc=False)
        out += ["", "**Result**", ""]
        result_info = mi.type_info(result_type)
        if result_type in shared:
            out.append(render_type(result_info, shapes))
        else:
            out += _render_value(result_info, shapes)
        out.append("")

    out += [
        "## Notifications: `session/event`",
        "",
        " ".join((events.__doc__ or "").split("\n\n")[1].replace("``", "`").split()),
        "",
    ]
    for tag, cls in events.EVENT_TYPES.items():
        out += [f"### `{tag}`", ""]
        out += _render_value(mi.type_info(cls), shapes)
        out.append("")

    out += ["## Shapes", ""]
    done: set[str] = set()
    while pending := sorted(set(shapes) - done):
        for name in pending:
            done.add(name)
            struct = shapes[name]
            out += [f"### {name}", ""]
            doc = _struct_doc(struct.cls)
            if doc:
                out += [doc, ""]
            out += render_fields(struct, shapes)
            out.append("")

    out.append(EXAMPLES)
    return "\n".join(out).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    text = render_reference()
    if args == ["--check"]:
        current = REFERENCE_PATH.read_text(encoding="utf-8") if REFERENCE_PATH.exists() else ""
        if current != text:
            print(f"{REFERENCE_PATH} is out of date: run python -m protocol.gen_reference")
            return 1
        return 0
    if args:
        print("usage: python -m protocol.gen_reference [--check]", file=sys.stderr)
        return 2
    REFERENCE_PATH.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
