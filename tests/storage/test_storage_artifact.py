"""Export/import artifacts (G-022, G-026…G-032, G-036, G-214)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from robotad.storage.artifact import export_artifact, import_artifact, redact_sensitive
from robotad.storage.record import SCHEMA_VERSION, Corrupt, encode_record
from robotad.storage.refusal import InputRejected
from robotad.storage.scrub import REDACTED
from robotad.storage.store import FileSessionStore

from .storage_factories import envelope_bytes, make_record, record_builtins


def _secretive_record() -> Any:
    record = make_record("s-secret", messages=4)
    record.metadata = {"apiKey": "sk-meta", "inputTokens": 12, "nested": [{"password": "pw"}]}
    record.messages[2].tool_calls = [
        msgspec.structs.replace(
            record.messages[2].calls[0],
            arguments={"headers": {"Authorization": "Bearer abc"}, "url": "https://x"},
        )
    ]
    record.settings.script = [{"text": "hi", "token": "tok-1"}]
    record.messages[1].content = "my password is hunter2"
    return record


def test_export_has_exactly_the_four_members() -> None:
    """G-026, G-022: schemaVersion (the store's number), kind, exportedAt, record — nothing
    about links, access, transport or redaction policy."""
    artifact = export_artifact(make_record())
    assert set(artifact) == {"schemaVersion", "kind", "exportedAt", "record"}
    assert artifact["kind"] == "robota.session"
    assert artifact["schemaVersion"] == SCHEMA_VERSION
    assert json.loads(encode_record(make_record()))["schemaVersion"] == artifact["schemaVersion"]
    assert artifact["exportedAt"].endswith("Z")
    assert set(export_artifact(make_record(), redact_sensitive)) == set(artifact)


def test_an_unredacted_export_imports_equal_with_secrets_intact() -> None:
    """G-027, G-036: the full-fidelity round trip keeps every sensitive value."""
    record = _secretive_record()
    artifact = json.loads(json.dumps(export_artifact(record)))
    imported = import_artifact(artifact)
    assert imported == record
    assert imported.metadata["apiKey"] == "sk-meta"


def test_a_redacted_export_removes_every_sensitive_value_and_still_imports() -> None:
    """G-028, G-029, G-033: sensitive values at any depth are gone before the artifact exists;
    required members are never deleted, so the artifact imports; free text is untouched."""
    record = _secretive_record()
    artifact = export_artifact(record, redact=redact_sensitive)
    text = json.dumps(artifact)
    for secret in ("sk-meta", "Bearer abc", "tok-1", '"pw"'):
        assert secret not in text
    body = artifact["record"]
    assert body["metadata"]["apiKey"] == REDACTED
    assert body["metadata"]["inputTokens"] == 12
    assert body["messages"][2]["toolCalls"][0]["arguments"]["headers"]["Authorization"] == REDACTED
    assert body["messages"][1]["content"] == "my password is hunter2"
    imported = import_artifact(artifact)
    assert imported.settings.script == [{"text": "hi", "token": REDACTED}]
    assert record.metadata["apiKey"] == "sk-meta", "export never mutates the record"


def test_a_redact_that_deletes_a_required_member_fails_at_import() -> None:
    """G-029, G-030: located refusal, not a partial session."""

    def careless(body: dict[str, Any]) -> dict[str, Any]:
        body = copy.deepcopy(body)
        del body["cwd"]
        del body["messages"][0]["content"]
        return body

    artifact = export_artifact(make_record(), redact=careless)
    with pytest.raises(InputRejected) as caught:
        import_artifact(artifact)
    assert caught.value.issues == [
        {"path": "$.artifact.record.cwd", "message": "missing required member"},
        {"path": "$.artifact.record.messages[0].content", "message": "missing required member"},
    ]


def test_import_lists_every_failing_path() -> None:
    """G-030: every defect of artifact and record, each located under $.artifact."""
    artifact = export_artifact(make_record())
    artifact["kind"] = "other"
    artifact["exportedAt"] = "later"
    artifact["link"] = "https://share"
    artifact["record"]["turnCount"] = -1
    artifact["record"]["messages"][1]["role"] = "admin"
    with pytest.raises(InputRejected) as caught:
        import_artifact(artifact)
    assert {issue["path"] for issue in caught.value.issues} == {
        "$.artifact.kind",
        "$.artifact.link",
        "$.artifact.exportedAt",
        "$.artifact.record.turnCount",
        "$.artifact.record.messages[1].role",
    }
    bad: Any
    for bad in (None, [], "artifact"):
        with pytest.raises(InputRejected) as caught:
            import_artifact(bad)
        assert caught.value.issues[0]["path"] == "$.artifact"


def test_an_export_time_with_no_utc_date_is_refused_where_it_stands() -> None:
    """G-030: ``exportedAt`` was checked only to parse, so ``9999-12-31T23:59:59-05:00``
    (in UTC, year 10000) passed; it is refused at its path as the record's instants are."""
    artifact = export_artifact(make_record())
    artifact["exportedAt"] = "9999-12-31T23:59:59-05:00"
    with pytest.raises(InputRejected) as caught:
        import_artifact(artifact)
    assert caught.value.issues == [
        {
            "path": "$.artifact.exportedAt",
            "message": "exportedAt is out of range: in UTC it falls outside years 1-9999",
        }
    ]


def test_import_reads_the_version_first() -> None:
    """G-031: an unimplemented version is the only issue, however broken the record."""
    artifact = export_artifact(make_record())
    artifact["schemaVersion"] = SCHEMA_VERSION + 1
    artifact["record"] = {"nonsense": True}
    artifact["kind"] = 3
    with pytest.raises(InputRejected) as caught:
        import_artifact(artifact)
    assert [issue["path"] for issue in caught.value.issues] == ["$.artifact.schemaVersion"]
    assert "unsupported schema version" in caught.value.issues[0]["message"]


def test_a_refused_import_writes_nothing(tmp_path: Path) -> None:
    """G-032: the importer is a pure decoder; nothing exists afterwards."""
    artifact = export_artifact(make_record())
    del artifact["record"]["settings"]
    with pytest.raises(InputRejected):
        import_artifact(artifact)
    assert list(tmp_path.iterdir()) == []


def test_store_and_import_report_the_same_defect_at_the_same_record_path(tmp_path: Path) -> None:
    """G-214: one decoder: the record-relative issue paths are identical."""
    body = record_builtins(make_record("s"))
    body["messages"][2]["toolCalls"][0]["arguments"] = "{}"
    body["settings"]["autoCompactThreshold"] = 0
    store = FileSessionStore(tmp_path)
    store.directory.mkdir(mode=0o700)
    store.path_for("s").write_bytes(envelope_bytes(body))
    stored = store.load("s")
    assert isinstance(stored, Corrupt)
    artifact = {
        "schemaVersion": SCHEMA_VERSION,
        "kind": "robota.session",
        "exportedAt": "2024-01-01T00:00:00Z",
        "record": body,
    }
    with pytest.raises(InputRejected) as caught:
        import_artifact(artifact)
    from_store = [(i["path"].removeprefix("$.record"), i["message"]) for i in stored.issues]
    from_import = [
        (i["path"].removeprefix("$.artifact.record"), i["message"]) for i in caught.value.issues
    ]
    assert from_store == from_import
    assert len(from_store) == 2
