"""`CheckpointTree`: examples of each operation and refusal."""

from __future__ import annotations

import pytest

from robotad.session.checkpoints import (
    CheckpointCycle,
    CheckpointError,
    CheckpointTree,
    DuplicateCheckpoint,
    RootExists,
    UnknownCheckpoint,
)


def linear(*ids: str) -> CheckpointTree:
    tree = CheckpointTree()
    parent: str | None = None
    for node in ids:
        tree.add(node, parent)
        parent = node
    return tree


def test_an_empty_tree() -> None:
    tree = CheckpointTree()
    assert tree.root is None
    assert tree.active is None
    assert tree.path() == []
    assert tree.branches() == []
    assert len(tree) == 0
    with pytest.raises(UnknownCheckpoint):
        tree.switch("m1")


def test_adding_after_the_active_checkpoint_grows_the_active_branch() -> None:
    tree = linear("m1", "m2", "m3")
    assert tree.active == "m3"
    assert tree.path() == ["m1", "m2", "m3"]
    assert tree.branches() == ["m3"]
    assert tree.children("m1") == ["m2"]
    assert tree.parent("m1") is None


def test_adding_elsewhere_grows_another_branch_and_keeps_the_active_one() -> None:
    tree = linear("m1", "m2", "m3")
    tree.add("b1", "m1")
    assert tree.active == "m3"
    assert tree.branches() == ["m3", "b1"]
    assert tree.ancestry("b1") == ["m1", "b1"]
    assert tree.children("m1") == ["m2", "b1"]


def test_fork_starts_a_new_active_branch_and_switch_goes_back() -> None:
    tree = linear("m1", "m2", "m3")
    tree.fork("m2", "f1")
    assert tree.active == "f1"
    assert tree.path() == ["m1", "m2", "f1"]
    tree.add("f2", "f1")
    assert tree.path() == ["m1", "m2", "f1", "f2"]
    tree.switch("m3")
    assert tree.path() == ["m1", "m2", "m3"]
    assert sorted(tree.branches()) == ["f2", "m3"]


def test_switching_to_an_inner_checkpoint_rewinds_and_the_next_message_branches() -> None:
    tree = linear("m1", "m2", "m3")
    tree.switch("m2")
    assert tree.path() == ["m1", "m2"]
    tree.add("r1", tree.active)
    assert tree.path() == ["m1", "m2", "r1"]
    assert tree.ancestry("m3") == ["m1", "m2", "m3"]


def test_refusals_name_the_id_and_change_nothing() -> None:
    tree = linear("m1", "m2")
    before = (tree.to_parents(), tree.active)
    with pytest.raises(DuplicateCheckpoint, match="'m2'"):
        tree.add("m2", "m1")
    with pytest.raises(DuplicateCheckpoint):
        tree.fork("m1", "m2")
    with pytest.raises(UnknownCheckpoint, match="'nope'"):
        tree.add("m3", "nope")
    with pytest.raises(UnknownCheckpoint):
        tree.fork("nope", "m3")
    with pytest.raises(RootExists, match="'m1'"):
        tree.add("r2", None)
    with pytest.raises(CheckpointCycle):
        tree.add("self", "self")
    for bad in ("", None, 3):
        with pytest.raises(CheckpointError):
            tree.add(bad, "m1")  # type: ignore[arg-type]
    for read in (tree.ancestry, tree.children, tree.parent, tree.switch):
        with pytest.raises(UnknownCheckpoint):
            read("nope")
    assert (tree.to_parents(), tree.active) == before
    assert "m3" not in tree
    assert len(tree) == 2


def test_from_parents_rebuilds_and_validates() -> None:
    tree = linear("m1", "m2", "m3")
    tree.fork("m1", "b1")
    rebuilt = CheckpointTree.from_parents(tree.to_parents(), active="m3")
    assert rebuilt.to_parents() == tree.to_parents()
    assert rebuilt.path() == ["m1", "m2", "m3"]
    assert CheckpointTree.from_parents({"b": "a", "a": None}).path() == ["a", "b"]
    assert CheckpointTree.from_parents({}).path() == []
    with pytest.raises(RootExists):
        CheckpointTree.from_parents({"a": None, "b": None})
    with pytest.raises(UnknownCheckpoint):
        CheckpointTree.from_parents({"a": None, "b": "ghost"})
    with pytest.raises(UnknownCheckpoint):
        CheckpointTree.from_parents({"a": None}, active="ghost")


def test_from_parents_reports_the_cycle() -> None:
    with pytest.raises(CheckpointCycle) as caught:
        CheckpointTree.from_parents({"root": None, "a": "c", "b": "a", "c": "b", "d": "c"})
    assert sorted(set(caught.value.node_ids)) == ["a", "b", "c"]
    assert caught.value.node_ids[0] == caught.value.node_ids[-1]
    with pytest.raises(CheckpointCycle):
        CheckpointTree.from_parents({"a": "b", "b": "a"})  # no root at all
    with pytest.raises(CheckpointCycle):
        CheckpointTree.from_parents({"r": None, "a": "a"})
