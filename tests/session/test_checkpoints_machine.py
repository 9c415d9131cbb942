"""`CheckpointTree` against a plain parent map, driven by a Hypothesis state machine.

Invariants after every step: every node is reachable from the root, each ancestry is a path of
parent links from the root, the tree equals the model, adding never changes an existing node's
ancestry, and every refusal leaves the tree unchanged.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
)

from robotad.session.checkpoints import (
    CheckpointError,
    CheckpointTree,
    DuplicateCheckpoint,
    RootExists,
    UnknownCheckpoint,
)

fresh_ids = st.uuids().map(lambda u: f"m-{u.hex[:12]}")


class CheckpointMachine(RuleBasedStateMachine):
    nodes = Bundle("nodes")

    def __init__(self) -> None:
        super().__init__()
        self.tree = CheckpointTree()
        self.parents: dict[str, str | None] = {}
        self.active: str | None = None

    def _ancestries(self) -> dict[str, list[str]]:
        return {node: self.tree.ancestry(node) for node in self.parents}

    def _model_add(self, node: str, parent: str | None) -> None:
        self.parents[node] = parent
        if self.active == parent:
            self.active = node

    @initialize(target=nodes, root=fresh_ids)
    def make_root(self, root: str) -> str:
        self.tree.add(root, None)
        self._model_add(root, None)
        return root

    @rule(target=nodes, parent=nodes, node=fresh_ids)
    def add(self, parent: str, node: str) -> str:
        before = self._ancestries()
        self.tree.add(node, parent)
        self._model_add(node, parent)
        assert {n: self.tree.ancestry(n) for n in before} == before
        return node

    @rule(node=nodes, parent=nodes)
    def duplicate_is_refused(self, node: str, parent: str) -> None:
        self._refused(DuplicateCheckpoint, self.tree.add, node, parent)

    @rule(node=fresh_ids, ghost=fresh_ids)
    def unknown_is_refused(self, node: str, ghost: str) -> None:
        self._refused(UnknownCheckpoint, self.tree.add, node, ghost)
        self._refused(UnknownCheckpoint, self.tree.ancestry, ghost)

    @rule(node=fresh_ids)
    def second_root_is_refused(self, node: str) -> None:
        self._refused(RootExists, self.tree.add, node, None)

    def _refused(self, error: type[CheckpointError], operation: object, *args: object) -> None:
        before = (self._parent_map(), self.tree.active)
        with pytest.raises(error):
            operation(*args)  # type: ignore[operator]
        assert (self._parent_map(), self.tree.active) == before

    def _parent_map(self) -> dict[str, str | None]:
        return {node: self.tree.parent(node) for node in self.tree}

    @invariant()
    def matches_the_model(self) -> None:
        assert self._parent_map() == self.parents
        assert list(self.tree) == list(self.parents)
        assert self.tree.active == self.active

    @invariant()
    def every_node_is_reachable_and_every_ancestry_is_a_path(self) -> None:
        if not self.parents:
            return
        root = self.tree.root
        for node in self.parents:
            chain = self.tree.ancestry(node)
            assert chain[0] == root
            assert chain[-1] == node
            assert len(set(chain)) == len(chain)
            for parent, child in itertools.pairwise(chain):
                assert self.tree.parent(child) == parent
        assert self.tree.path() == self.tree.ancestry(self.active or "")


CheckpointMachine.TestCase.settings = settings(
    max_examples=120, stateful_step_count=30, deadline=None
)
TestCheckpointTree = CheckpointMachine.TestCase
