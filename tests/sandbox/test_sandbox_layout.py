"""Which folders a sandboxed command may write, and what stays read-only inside them."""

from __future__ import annotations

import os
from pathlib import Path

from robotad.sandbox import SandboxPolicy, plan_mounts, policy_for_session, writable_dirs
from robotad.sandbox.layout import GIT_SCAN_DEPTH, find_git_entries, links_on


def test_read_only_and_off_write_nothing(tmp_path: Path) -> None:
    for mode in ("off", "read-only"):
        assert writable_dirs(SandboxPolicy(mode=mode), str(tmp_path)) == []


def test_the_cwd_and_existing_roots_resolved(tmp_path: Path) -> None:
    """The cwd's own links are followed (the user's project may live behind one); a root is
    taken as written, so one given through a link is not writable."""
    base = Path(os.path.realpath(tmp_path))
    real = base / "real"
    real.mkdir()
    (base / "alias").symlink_to(real)
    (base / "ws-real").mkdir()
    (base / "ws").symlink_to(base / "ws-real")
    policy = SandboxPolicy(
        mode="workspace-write",
        writable_roots=(str(base / "alias"), str(base / "missing"), str(real)),
    )
    assert writable_dirs(policy, str(base / "ws")) == [str(base / "ws-real"), str(real)]


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


def test_links_on_names_every_link_met_where_it_lies(tmp_path: Path) -> None:
    base = Path(os.path.realpath(tmp_path))
    (base / "real" / "deep").mkdir(parents=True)
    (base / "rel").symlink_to("real")  # relative target
    (base / "real" / "abs").symlink_to(base / "real" / "deep")  # absolute target
    (base / "chain").symlink_to(base / "rel")  # a link to a link
    assert links_on(str(base / "real" / "deep")) == []
    assert links_on(str(base / "rel" / "abs")) == [str(base / "rel"), str(base / "real" / "abs")]
    assert links_on(str(base / "chain" / "deep")) == [str(base / "chain"), str(base / "rel")]
    assert links_on(str(base / "real" / "abs" / ".." / "missing")) == [str(base / "real" / "abs")]
    (base / "loop").symlink_to(base / "loop")
    assert len(links_on(str(base / "loop"))) > 40  # a loop ends, with the link named


def test_a_root_through_a_link_is_not_writable_wherever_the_link_lies(tmp_path: Path) -> None:
    """A link inside the workspace may be an earlier command's, one elsewhere in the home
    another session's: a root is taken as written, never through a link. The cwd's own links
    are followed unless a writable folder holds them."""
    base = Path(os.path.realpath(tmp_path))
    cwd, outside, home = base / "ws", base / "outside", base / "home"
    for folder in (cwd, outside, home / "cache"):
        folder.mkdir(parents=True)
    (cwd / ".cache").symlink_to(outside)
    (home / "linked").symlink_to(outside)
    roots = [str(cwd / ".cache"), str(home / "linked"), str(home / "cache")]
    policy = policy_for_session("workspace-write", network=False, writable_roots=roots)
    assert writable_dirs(policy, str(cwd)) == [str(cwd), str(home / "cache")]


def test_every_folder_between_a_root_and_a_protected_entry_is_pinned(tmp_path: Path) -> None:
    ws = Path(os.path.realpath(tmp_path / "ws"))
    (ws / "a" / "b" / ".git").mkdir(parents=True)
    (ws / ".git").mkdir()
    config = ws / "home" / ".config" / "robota"
    config.mkdir(parents=True)
    plan = plan_mounts(SandboxPolicy(mode="workspace-write"), str(ws), (str(config),))
    assert plan.pinned == tuple(sorted(str(ws / p) for p in ("a", "a/b", "home", "home/.config")))
