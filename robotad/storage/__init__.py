"""Persistence that never lies: records, artifacts, session logs, prompt history, spill store.

- `record` — the session record Structs and their total codec (`decode_record`).
- `store` — `FileSessionStore`: ``sessions/<id>.json``, atomic, durable, owner-only.
- `artifact` — export/import envelope (`export_artifact`, `import_artifact`, `redact_sensitive`).
- `scrub` — the one definition of sensitive keys (`is_sensitive_key`, `scrub_sensitive_keys`).
- `session_log`, `log_events`, `sidecars`, `log_files`, `log_replay`, `log_readback` — the JSONL
  session log.
- `prompt_history` — ``prompt-history.jsonl`` and its backwards search.
- `spill` — `SpillStore` for oversized tool results.
- `journal`, `journal_records`, `journal_folder` — the durable execution journal, its records
  and its blocking work on one locked folder (not re-exported: import them from their
  modules).
- `ids`, `fsio` — session-id validation and the durable file primitives underneath.
"""

from __future__ import annotations

from .artifact import ARTIFACT_KIND, export_artifact, import_artifact, redact_sensitive
from .ids import is_safe_session_id, validate_session_id
from .log_events import LOG_EVENTS, LOG_SCHEMA_VERSION, LogEventName
from .log_files import FileLogSink, FileLogSource, log_paths
from .log_replay import LogReport, ReplayError, replay_history, replay_log, validate_log
from .prompt_history import HISTORY_FILE, PromptEntry, PromptHistory, SearchResult
from .record import (
    SCHEMA_VERSION,
    Corrupt,
    ForkedFrom,
    HistoryEntry,
    Permissions,
    SessionRecord,
    SessionSettings,
    StoredToolSchema,
    Unsupported,
    Valid,
    decode_record,
    encode_record,
)
from .scrub import REDACTED, is_sensitive_key, scrub_sensitive_keys
from .session_log import (
    LogDecodeError,
    LogEntry,
    LogProblem,
    LogSink,
    LogSource,
    SessionLogger,
    decode_log,
)
from .spill import SpillError, SpillNotFound, SpillStore
from .store import SESSION_OWNED, FileSessionStore, LoadOutcome, Missing, StoredSession

__all__ = [
    "ARTIFACT_KIND",
    "HISTORY_FILE",
    "LOG_EVENTS",
    "LOG_SCHEMA_VERSION",
    "REDACTED",
    "SCHEMA_VERSION",
    "SESSION_OWNED",
    "Corrupt",
    "FileLogSink",
    "FileLogSource",
    "FileSessionStore",
    "ForkedFrom",
    "HistoryEntry",
    "LoadOutcome",
    "LogDecodeError",
    "LogEntry",
    "LogEventName",
    "LogProblem",
    "LogReport",
    "LogSink",
    "LogSource",
    "Missing",
    "Permissions",
    "PromptEntry",
    "PromptHistory",
    "ReplayError",
    "SearchResult",
    "SessionLogger",
    "SessionRecord",
    "SessionSettings",
    "SpillError",
    "SpillNotFound",
    "SpillStore",
    "StoredSession",
    "StoredToolSchema",
    "Unsupported",
    "Valid",
    "decode_log",
    "decode_record",
    "encode_record",
    "export_artifact",
    "import_artifact",
    "is_safe_session_id",
    "is_sensitive_key",
    "log_paths",
    "redact_sensitive",
    "replay_history",
    "replay_log",
    "scrub_sensitive_keys",
    "validate_log",
    "validate_session_id",
]
