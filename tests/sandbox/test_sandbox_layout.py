"""Which folders a sandboxed command may write, and what stays read-only inside them."""

from __future__ import annotations

import os
from pathlib import Path

from robotad.sandbox import SandboxPolicy, plan_mounts, writable_dirs
from robotad.sandbox.layout import GIT_SCAN_DEPTH, find_git_entries


def test_read_only_and_off_write_nothing(tmp_path: Path) -> None:
    for mode in ("off", "read-only"):
        assert writable_dirs(SandboxPolicy(mode=mode), str(tmp_path)) == []


def test_the_cwd_and_existing_roots_resolved(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "alias").symlink_to(real)
    policy = SandboxPolicy(
        mode="workspace-write",
        writable_roots=(str(tmp_path / "alias"), str(tmp_path / "missing"), str(real)),
    )
    cwd = tmp_path / "ws"
    cwd.mkdir()
    assert writable_dirs(policy, str(cwd)) == [os.path.realpath(cwd), os.path.realpath(real)]


def test_git_entries_are_found_to_the_depth_bound_but_not_through_links(tmp_path: Path) -> None:
    shallow = tmp_path / ".git"
    shallow.mkdir()
    nested = tmp_path / "a" / "b" / "c"
    (nested / ".git").mkdir(parents=True)
    (tmp_path / "worktree").mkdir()
    (tmp_path / "worktree" / ".git").write_text("gitdir: /elsewhere\n")  # a file counts too
    too_deep = tmp_path / "a" / "b" / "c" / "d" / "e"
    (too_deep / ".git").mkdir(parents=True)
    (tmp_path / "linked").symlink_to(nested)
    (tmp_path / "ln").mkdir()
    (tmp_path / "ln" / ".git").symlink_to(shallow)
    found = sorted(find_git_entries(str(tmp_path)))
    assert GIT_SCAN_DEPTH == 3
    assert found == sorted(
        [str(shallow), str(nested / ".git"), str(tmp_path / "worktree" / ".git")]
    )


def test_the_plan_protects_git_and_robotas_folders_inside_writable_ones(tmp_path: Path) -> None:
    (tmp_path / "ws" / ".git").mkdir(parents=True)
    config = tmp_path / "ws" / ".config" / "robota"
    config.mkdir(parents=True)
    elsewhere = tmp_path / "state"
    elsewhere.mkdir()
    policy = SandboxPolicy(mode="workspace-write", network=True)
    plan = plan_mounts(policy, str(tmp_path / "ws"), (str(config), str(elsewhere)))
    assert plan.cwd == str(tmp_path / "ws")
    assert plan.network
    assert plan.writable == (os.path.realpath(tmp_path / "ws"),)
    assert sorted(plan.read_only) == sorted(
        [os.path.realpath(tmp_path / "ws" / ".git"), os.path.realpath(config)]
    )


def test_a_protected_folder_holding_the_workspace_covers_it(tmp_path: Path) -> None:
    config = tmp_path / "robota"
    (config / "project").mkdir(parents=True)
    plan = plan_mounts(
        SandboxPolicy(mode="workspace-write"), str(config / "project"), (str(config),)
    )
    assert plan.read_only == (os.path.realpath(config),)
