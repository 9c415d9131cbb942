"""`ProjectRules`: one owner-only file per canonical cwd, durable adds, never read as empty
when damaged."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from robotad.daemon.project_rules import ProjectRules, ProjectRulesUnreadable, canonical_cwd


def test_rules_round_trip_per_canonical_cwd(tmp_path: Path) -> None:
    """G-115: a rule persisted for a folder is found under any spelling of it, not others."""
    project = tmp_path / "project"
    project.mkdir()
    (tmp_path / "link").symlink_to(project)
    rules = ProjectRules(tmp_path / "state")
    assert rules.load(project) == {"allow": [], "ask": [], "deny": []}
    rules.add(project, "Bash(rm:*)", "deny")
    rules.add(tmp_path / "link", "Read", "allow")
    rules.add(project, "Read", "allow")
    assert rules.load(tmp_path / "link" / ".") == {
        "allow": ["Read"],
        "ask": [],
        "deny": ["Bash(rm:*)"],
    }
    assert rules.load(tmp_path) == {"allow": [], "ask": [], "deny": []}
    assert rules.path_for(project) == rules.path_for(tmp_path / "link")
    assert canonical_cwd(tmp_path / "link") == str(project.resolve())


def test_files_are_owner_only_whatever_the_umask(tmp_path: Path) -> None:
    """G-009: the folder is 0700 and the file 0600 whatever the process umask."""
    rules = ProjectRules(tmp_path / "state")
    previous = os.umask(0)
    try:
        rules.add(tmp_path, "Glob", "allow")
    finally:
        os.umask(previous)
    path = rules.path_for(tmp_path)
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.parent.stat().st_mode & 0o777 == 0o700


def test_a_damaged_file_is_never_read_as_no_rules(tmp_path: Path) -> None:
    """Dropping a project's deny rules silently would widen permissions: refuse instead, and
    never overwrite the file."""
    rules = ProjectRules(tmp_path / "state")
    rules.add(tmp_path, "Bash", "deny")
    path = rules.path_for(tmp_path)
    path.write_bytes(b'{"schemaVersion": 1, "cwd": "/elsewhere", "deny": []}')
    with pytest.raises(ProjectRulesUnreadable):
        rules.load(tmp_path)
    with pytest.raises(ProjectRulesUnreadable):
        rules.add(tmp_path, "Read", "allow")
    path.write_bytes(b"not json")
    with pytest.raises(ProjectRulesUnreadable):
        rules.load(tmp_path)
    assert path.read_bytes() == b"not json"


def test_a_hand_edited_malformed_rule_is_the_files_fault_named_with_its_path(
    tmp_path: Path,
) -> None:
    """A bad rule typed into the file by hand was reported as if the user had passed it with
    --deny, and a file that does not decode without its path."""
    rules = ProjectRules(tmp_path / "state")
    rules.add(tmp_path, "Bash(rm:*)", "deny")
    path = rules.path_for(tmp_path)
    stored = json.loads(path.read_text())
    stored["deny"].append("Bash(ls")
    path.write_text(json.dumps(stored))
    with pytest.raises(ProjectRulesUnreadable) as refused:
        rules.load(tmp_path)
    message = str(refused.value)
    assert str(path) in message
    assert "deny[1]: unbalanced parentheses" in message
    path.write_bytes(b"not json")
    with pytest.raises(ProjectRulesUnreadable, match="fix or remove it") as undecodable:
        rules.load(tmp_path)
    assert str(path) in str(undecodable.value)


def test_a_stored_argument_pattern_on_an_mcp_tool_does_not_make_the_file_unreadable(
    tmp_path: Path,
) -> None:
    """Decisions 73 and 81: ``mcp__files__write(/etc/**)`` and ``MCP__files`` were taken before
    robotad refused them, so a file may hold one; it is returned as stored (the assembly
    leaves it out, with a warning) and a later add keeps it, while any other malformed rule
    still makes the file unusable."""
    rules = ProjectRules(tmp_path / "state")
    rules.add(tmp_path, "Bash(rm:*)", "deny")
    path = rules.path_for(tmp_path)
    stored = json.loads(path.read_text())
    stored["deny"] += ["mcp__files__write(/etc/**)", "MCP__files"]
    path.write_text(json.dumps(stored))
    kept = ["Bash(rm:*)", "mcp__files__write(/etc/**)", "MCP__files"]
    assert rules.load(tmp_path)["deny"] == kept
    rules.add(tmp_path, "Read", "allow")
    assert json.loads(path.read_text())["deny"] == kept
    stored = json.loads(path.read_text())
    stored["ask"].append("Bash(ls")
    path.write_text(json.dumps(stored))
    with pytest.raises(ProjectRulesUnreadable) as refused:
        rules.load(tmp_path)
    assert str(refused.value).endswith(
        "holds a malformed rule: ask[0]: unbalanced parentheses in pattern 'Bash(ls'"
    )


def test_a_failed_write_adds_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """G-114 (storage side): when the durable write fails, the stored rules are unchanged and
    the failure names the file and the cause (PROTOCOL.md §10.1)."""
    from robotad.storage import fsio
    from robotad.storage.failure import StorageError

    rules = ProjectRules(tmp_path / "state")
    rules.add(tmp_path, "Glob", "allow")

    def failing(path: Path, data: bytes) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(fsio, "atomic_write", failing)
    with pytest.raises(StorageError, match=r"cannot write projects/\w+\.json: no space left") as e:
        rules.add(tmp_path, "Read", "allow")
    monkeypatch.undo()
    assert not e.value.path.startswith("/")  # relative to the state folder, for -32016
    assert rules.load(tmp_path)["allow"] == ["Glob"]


def test_a_file_the_system_will_not_read_is_storage_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PROTOCOL §10.1: a rule file that cannot be read at all (out of descriptors, no
    permission, an I/O error) is StorageFailed naming it relative to the state folder and the
    cause; it used to reach session/create as NotAllowed quoting the errno and the absolute
    path."""
    from protocol.errors import StorageFailed
    from robotad.storage import fsio

    rules = ProjectRules(tmp_path / "state")
    rules.add(tmp_path, "Glob", "allow")

    def exhausted(path: Path) -> bytes:
        raise OSError(24, "Too many open files", str(path))

    monkeypatch.setattr(fsio, "read_regular", exhausted)
    with pytest.raises(StorageFailed) as refused:
        rules.load(tmp_path)
    assert str(refused.value).startswith("cannot read projects/")
    assert str(refused.value).endswith(": too many open files")
    assert refused.value.data is not None
    assert not refused.value.data["path"].startswith("/")


def test_duplicates_change_nothing_and_unknown_kinds_are_refused(tmp_path: Path) -> None:
    rules = ProjectRules(tmp_path / "state")
    rules.add(tmp_path, "Glob", "allow")
    before = rules.path_for(tmp_path).read_bytes()
    assert rules.add(tmp_path, "Glob", "allow")["allow"] == ["Glob"]
    assert rules.path_for(tmp_path).read_bytes() == before
    with pytest.raises(ValueError, match="unknown rule kind"):
        rules.add(tmp_path, "Glob", "maybe")


def test_the_first_rule_makes_its_folders_durable_in_their_parents(
    tmp_path: Path, fsyncs: list[str]
) -> None:
    """The first project rule creates robotad's project-rules folder: each new folder's entry
    is synced in its parent before the rule's file is written, so an acknowledged "always"
    grant cannot vanish with its folder. A second rule syncs only its file and folder."""
    project = tmp_path / "project"
    project.mkdir()
    rules = ProjectRules(tmp_path / "state")
    rules.add(project, "Read", "allow")
    folder = rules.path_for(project).parent
    made = [tmp_path / "state", folder]
    assert fsyncs[: len(made)] == [os.path.realpath(path.parent) for path in made]
    assert fsyncs[-1] == os.path.realpath(folder)
    fsyncs.clear()
    rules.add(project, "Bash(ls)", "allow")
    assert len(fsyncs) == 2
