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
    assert len(tree) == 0
    with pytest.raises(UnknownCheckpoint):
        tree.ancestry("m1")


def test_adding_after_the_active_checkpoint_grows_the_active_branch() -> None:
    tree = linear("m1", "m2", "m3")
    assert tree.active == "m3"
    assert tree.path() == ["m1", "m2", "m3"]
    assert tree.parent("m1") is None
    assert tree.parent("m2") == "m1"


def test_adding_elsewhere_grows_another_branch_and_keeps_the_active_one() -> None:
    tree = linear("m1", "m2", "m3")
    tree.add("b1", "m1")
    assert tree.active == "m3"
    assert tree.path() == ["m1", "m2", "m3"]
    assert tree.ancestry("b1") == ["m1", "b1"]


def test_refusals_name_the_id_and_change_nothing() -> None:
    tree = linear("m1", "m2")
    before = (list(tree), tree.active)
    with pytest.raises(DuplicateCheckpoint, match="'m2'"):
        tree.add("m2", "m1")
    with pytest.raises(UnknownCheckpoint, match="'nope'"):
        tree.add("m3", "nope")
    with pytest.raises(RootExists, match="'m1'"):
        tree.add("r2", None)
    with pytest.raises(CheckpointCycle):
        tree.add("self", "self")
    for bad in ("", None, 3):
        with pytest.raises(CheckpointError):
            tree.add(bad, "m1")  # type: ignore[arg-type]
    for read in (tree.ancestry, tree.parent):
        with pytest.raises(UnknownCheckpoint):
            read("nope")
    assert (list(tree), tree.active) == before
    assert "m3" not in tree
    assert len(tree) == 2
