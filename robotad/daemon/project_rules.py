"""Project-scoped permission rules: one owner-only file per canonical working folder.

``session/addRule {scope: "project"}`` persists a rule for the session's *canonical* cwd (its
real path, symlinks resolved, so two spellings of one folder are one project); every session
created or loaded later with that canonical cwd starts with the project's rules (G-115).

Layout: ``<state>/projects/<sha256 of the canonical cwd>.json`` holding
``{schemaVersion, cwd, allow, ask, deny}``; the folder is 0700 and the file 0600 whatever the
umask, and every write is atomic and durable (`fsio.atomic_write`). A rule is added by
rewriting the file with the rule appended, so a failed write leaves the previous rules intact
and adds nothing (the caller reports it; the session then adds nothing either, G-114).

A file that does not decode — or names another folder than the one it is addressed by — is
`ProjectRulesUnreadable`: never read as "no rules" (that would silently drop deny rules) and
never overwritten. So is one holding a malformed rule, except an MCP rule robotad took before
it refused it — an argument pattern on an MCP tool (``mcp__files__write(/etc/**)``, decision 73)
or an MCP name whose ``mcp__`` is in another case (``Mcp__files``, decision 81) — which never
matched a call; `load` returns those as stored, and the session's assembly leaves them out
(`robotad.daemon.inert_rules`).

Blocking I/O; async callers go through ``trio.to_thread.run_sync``. One instance serialises its
own writes; it assumes no other process writes the folder (the daemon is single-instance).
"""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path
from typing import Final

import msgspec

from robotad.storage import fsio
from robotad.storage.failure import refusing_writes, unreadable

__all__ = ["PROJECTS_DIR", "ProjectRules", "ProjectRulesUnreadable", "canonical_cwd"]

PROJECTS_DIR: Final = "projects"
_SCHEMA_VERSION: Final = 1

_RULE_KINDS: Final = ("allow", "ask", "deny")


class ProjectRulesUnreadable(Exception):
    """A project's rule file exists but cannot be used; the message names the folder, not the
    file's content."""


class _ProjectFile(msgspec.Struct, rename="camel", forbid_unknown_fields=True):
    schema_version: int
    cwd: str
    allow: list[str] = msgspec.field(default_factory=list)
    ask: list[str] = msgspec.field(default_factory=list)
    deny: list[str] = msgspec.field(default_factory=list)

    def rules(self) -> dict[str, list[str]]:
        return {"allow": list(self.allow), "ask": list(self.ask), "deny": list(self.deny)}


def canonical_cwd(cwd: str | os.PathLike[str]) -> str:
    """The one spelling of a working folder that names its project: the real path."""
    return os.path.realpath(os.fspath(cwd))


class ProjectRules:
    """The project rule files under ``<state_dir>/projects/``."""

    def __init__(self, state_dir: Path) -> None:
        self._dir = Path(state_dir) / PROJECTS_DIR
        self._lock = threading.Lock()
        self._decoder = msgspec.json.Decoder(_ProjectFile)
        self._encoder = msgspec.json.Encoder()

    @property
    def directory(self) -> Path:
        return self._dir

    def path_for(self, cwd: str | os.PathLike[str]) -> Path:
        """The rule file of the project `cwd` belongs to."""
        digest = hashlib.sha256(canonical_cwd(cwd).encode("utf-8", "surrogateescape"))
        return self._dir / f"{digest.hexdigest()}.json"

    def load(self, cwd: str | os.PathLike[str]) -> dict[str, list[str]]:
        """``{allow, ask, deny}`` of the project (all empty when it has no file).

        Raises `ProjectRulesUnreadable` for a file that cannot be used and `StorageFailed`
        (PROTOCOL §10.1) when it cannot be read at all.
        """
        return self._read(canonical_cwd(cwd)).rules()

    def add(self, cwd: str | os.PathLike[str], rule: str, kind: str) -> dict[str, list[str]]:
        """Persist `rule` under `kind` (allow, ask or deny; else ValueError) for the project —
        a duplicate changes nothing — and return the project's rules. Durable when it
        returns; on any failure nothing was added."""
        if kind not in _RULE_KINDS:
            raise ValueError(f"unknown rule kind {kind!r}")
        canonical = canonical_cwd(cwd)
        with self._lock:
            current = self._read(canonical)
            rules = current.rules()
            if rule in rules[kind]:
                return rules
            rules[kind].append(rule)
            updated = _ProjectFile(_SCHEMA_VERSION, canonical, **rules)
            path = self.path_for(canonical)
            with refusing_writes(path, self._dir.parent):
                fsio.ensure_durable_dir(self._dir)
                fsio.atomic_write(path, self._encoder.encode(updated))
            return updated.rules()

    def sweep_temp_files(self) -> int:
        """Remove the temp files a write killed midway left (at start-up, before any write);
        how many."""
        with self._lock:
            return fsio.remove_temp_files(self._dir)

    def _read(self, canonical: str) -> _ProjectFile:
        path = self.path_for(canonical)
        said = f"the project rule file {path} (of {canonical})"
        try:
            data = fsio.read_regular(path)
        except fsio.UnsafePath:
            raise ProjectRulesUnreadable(f"{said} is not a regular file") from None
        except OSError as exc:  # the system refused (no permission, too many open files…)
            raise unreadable(exc, path, self._dir.parent) from exc
        if data is None:
            return _ProjectFile(_SCHEMA_VERSION, canonical)
        try:
            stored = self._decoder.decode(data)
        except (msgspec.DecodeError, msgspec.ValidationError):
            raise ProjectRulesUnreadable(
                f"{said} does not decode; fix or remove it (`robotactl rule --project` "
                "writes it again)"
            ) from None
        if stored.schema_version != _SCHEMA_VERSION or stored.cwd != canonical:
            raise ProjectRulesUnreadable(
                f"{said} has an unsupported version or names another folder"
            )
        problems = _rule_problems(stored)
        if problems:
            raise ProjectRulesUnreadable(f"{said} holds a malformed rule: {problems}")
        return stored


def _rule_problems(stored: _ProjectFile) -> str:
    """Every malformed rule of a hand-edited file (``deny[1]: …``), joined; "" when none. An
    MCP rule robotad took before it refused it is no problem here (see the module doc)."""
    from robotad.session.errors import InvalidSetting
    from robotad.session.permissions.patterns import mcp_rule_refusal, parse_rule

    problems: list[str] = []
    for kind, texts in stored.rules().items():
        for index, text in enumerate(texts):
            if mcp_rule_refusal(text) is not None:
                continue
            try:
                parse_rule(text)
            except InvalidSetting as exc:
                problems.extend(f"{kind}[{index}]: {issue['message']}" for issue in exc.issues)
    return "; ".join(problems)
