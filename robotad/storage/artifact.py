"""The export/import artifact: ``{schemaVersion, kind: "robota.session", exportedAt, record}``.

Exactly those four members and nothing about links, clouds, access, pairing, transport or
redaction policy (G-026). Two operations:

- `export_artifact(record)` — the full-fidelity round trip: importing it yields an equal record,
  sensitive values included (G-027, G-036);
- `export_artifact(record, redact=...)` — the share path: a policy-free transform over the
  record's JSON form runs before the artifact exists. `redact_sensitive` is the built-in one
  (the scrubber of `scrub.py`, G-028/G-033). A redact must still return a valid record:
  required members blanked, only optional ones removed (G-029). Export does not judge it;
  import does, with a located reason.

`import_artifact` reads the version first (an unimplemented one is refused with that single
issue, G-031), then runs the store's own record decoder (G-214), refusing with `InputRejected`
that lists every failing path under ``$.artifact`` (G-030). It writes nothing (G-032).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import msgspec
from msgspec import Struct

from protocol.errors import Issue
from protocol.shapes import utc_now
from protocol.validate import ValidationFailed, convert, join_path

from .record import SCHEMA_VERSION, SessionRecord, check_record, instant_problem
from .refusal import InputRejected
from .scrub import scrub_sensitive_keys

__all__ = [
    "ARTIFACT_KIND",
    "Redact",
    "export_artifact",
    "import_artifact",
    "redact_sensitive",
]

ARTIFACT_KIND = "robota.session"

#: A transform over the record's JSON form (camelCase builtins) returning a record's JSON form.
Redact = Callable[[dict[str, Any]], dict[str, Any]]

_ROOT = "$.artifact"


class _ArtifactHead(Struct, rename="camel", forbid_unknown_fields=True):
    """The artifact's own members; `record` is checked by the record decoder."""

    schema_version: int
    kind: Literal["robota.session"]
    exported_at: str
    record: Any


def redact_sensitive(record: dict[str, Any]) -> dict[str, Any]:
    """The built-in share redaction: every sensitive key's value, at any depth, becomes
    ``"[REDACTED]"``. No declared record member has a sensitive name, so only values inside
    open maps (metadata, tool arguments, schemas, scripts…) change and the result stays a
    valid record; free text is not inspected."""
    redacted = scrub_sensitive_keys(record)
    assert isinstance(redacted, dict)
    return redacted


def export_artifact(record: SessionRecord, redact: Redact | None = None) -> dict[str, Any]:
    """The artifact of `record` as JSON builtins; `redact` (if any) runs before it is built."""
    body: dict[str, Any] = msgspec.to_builtins(record)
    if redact is not None:
        body = redact(body)
    exported_at = msgspec.to_builtins(utc_now())
    return {
        "schemaVersion": SCHEMA_VERSION,
        "kind": ARTIFACT_KIND,
        "exportedAt": exported_at,
        "record": body,
    }


def import_artifact(artifact: Any, *, root: str = _ROOT) -> SessionRecord:
    """The record inside `artifact` (JSON builtins), decoded totally, or `InputRejected`.

    Issues are located under `root` (``$.artifact`` — the ``session/import`` parameter).
    """
    if isinstance(artifact, dict):
        version = artifact.get("schemaVersion")
        if type(version) is int and version != SCHEMA_VERSION:
            raise InputRejected(
                [
                    {
                        "path": join_path(root, "schemaVersion"),
                        "message": f"unsupported schema version {version} "
                        f"(this build implements {SCHEMA_VERSION})",
                    }
                ]
            )
    issues: list[Issue] = []
    try:
        convert(artifact, _ArtifactHead)
    except ValidationFailed as exc:
        issues = [{"path": root + i["path"][1:], "message": i["message"]} for i in exc.issues]
    exported_at = artifact.get("exportedAt") if isinstance(artifact, dict) else None
    problem = instant_problem(exported_at, "exportedAt") if isinstance(exported_at, str) else None
    if problem is not None:
        issues.append({"path": join_path(root, "exportedAt"), "message": problem})
    record_root = join_path(root, "record")
    if isinstance(artifact, dict) and "record" in artifact:
        checked = check_record(artifact["record"], record_root)
        if isinstance(checked, list):
            issues += checked
        elif not issues:
            return checked
    raise InputRejected(issues)
