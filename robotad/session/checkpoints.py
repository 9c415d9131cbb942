"""A branching conversation as a tree of checkpoints: pure bookkeeping, no I/O.

A checkpoint is a message id; each one but the root has a parent, the message it follows. The
conversation a session shows is the path from the root to the **active** checkpoint. A
**branch** is named by its leaf: `branches()` lists every leaf, and the active branch is the
one whose path ends at `active` (after switching back to an inner checkpoint, `active` is that
inner node and the next message starts a new branch there).

- `add(node, parent)` records a message after `parent` (``None`` only for the one root). When
  `parent` is the active checkpoint, the active branch grows: `active` moves to the new node.
  Adding elsewhere grows another branch and leaves `active` where it is.
- `fork(from_node, new_node)` starts a new branch at `from_node` and makes it active.
- `switch(node)` makes any known checkpoint active (a leaf: change branch; an inner node: rewind).
  It never adds or removes a node.
- `ancestry(node)` is root..node; `path()` is the active one; `children(node)` in the order
  they were added.
- `from_parents(...)` rebuilds a stored tree and `to_parents()` gives the mapping to store.

Nodes are never removed or re-parented, so a node's ancestry never changes once it is added.
Every refusal is a `CheckpointError` subclass naming the offending id, and leaves the tree
unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

__all__ = [
    "CheckpointCycle",
    "CheckpointError",
    "CheckpointTree",
    "DuplicateCheckpoint",
    "RootExists",
    "UnknownCheckpoint",
]


class CheckpointError(ValueError):
    """A checkpoint operation was refused; the tree is unchanged."""


class UnknownCheckpoint(CheckpointError):
    def __init__(self, node_id: str) -> None:
        self.node_id = node_id
        super().__init__(f"unknown checkpoint {node_id!r}")


class DuplicateCheckpoint(CheckpointError):
    def __init__(self, node_id: str) -> None:
        self.node_id = node_id
        super().__init__(f"checkpoint {node_id!r} already exists")


class RootExists(CheckpointError):
    """A second parentless checkpoint: a tree has exactly one root."""

    def __init__(self, root_id: str, node_id: str) -> None:
        self.root_id = root_id
        self.node_id = node_id
        super().__init__(f"checkpoint {node_id!r} has no parent but {root_id!r} is the root")


class CheckpointCycle(CheckpointError):
    """Parent links that loop back (a node its own ancestor) instead of reaching the root."""

    def __init__(self, node_ids: list[str]) -> None:
        self.node_ids = node_ids
        super().__init__(f"checkpoints form a cycle: {' -> '.join(map(repr, node_ids))}")


def _check_id(value: object) -> str:
    if not isinstance(value, str) or not value:
        raise CheckpointError("a checkpoint id is a non-empty string")
    return value


class CheckpointTree:
    """Checkpoints with parent links, one root, and an active checkpoint (module docstring)."""

    def __init__(self) -> None:
        self._parent: dict[str, str | None] = {}
        self._children: dict[str, list[str]] = {}
        self._root: str | None = None
        self._active: str | None = None

    # -- building --------------------------------------------------------------------------

    def add(self, node_id: str, parent_id: str | None) -> None:
        """Record `node_id` after `parent_id`; the active branch grows when that was active."""
        _check_id(node_id)
        if parent_id is not None:
            _check_id(parent_id)
        if node_id in self._parent:
            raise DuplicateCheckpoint(node_id)
        if parent_id is None:
            if self._root is not None:
                raise RootExists(self._root, node_id)
            self._root = node_id
        elif parent_id == node_id:
            raise CheckpointCycle([node_id, node_id])
        elif parent_id not in self._parent:
            raise UnknownCheckpoint(parent_id)
        else:
            self._children[parent_id].append(node_id)
        self._parent[node_id] = parent_id
        self._children[node_id] = []
        if self._active == parent_id:
            self._active = node_id

    def fork(self, from_id: str, new_id: str) -> None:
        """Start a new branch at `from_id` with `new_id` as its first checkpoint; it becomes
        active. Existing nodes keep their ancestry."""
        _check_id(new_id)
        if _check_id(from_id) not in self._parent:
            raise UnknownCheckpoint(from_id)
        if new_id in self._parent:
            raise DuplicateCheckpoint(new_id)
        self.add(new_id, from_id)
        self._active = new_id

    def switch(self, node_id: str) -> None:
        """Make `node_id` (a branch's leaf or any inner checkpoint) the active checkpoint."""
        if _check_id(node_id) not in self._parent:
            raise UnknownCheckpoint(node_id)
        self._active = node_id

    @classmethod
    def from_parents(
        cls, parents: Mapping[str, str | None], *, active: str | None = None
    ) -> CheckpointTree:
        """Rebuild a tree from ``{node: parent}`` (any order). `active` defaults to the last
        leaf in mapping order. Refuses a missing or second root, unknown parents and cycles."""
        tree = cls()
        for node_id, parent_id in parents.items():
            _check_id(node_id)
            if parent_id is None:
                if tree._root is not None:
                    raise RootExists(tree._root, node_id)
                tree._root = node_id
            elif _check_id(parent_id) not in parents:
                raise UnknownCheckpoint(parent_id)
        for node_id in parents:
            tree._parent[node_id] = parents[node_id]
            tree._children[node_id] = []
        for node_id, parent_id in parents.items():
            if parent_id is not None:
                tree._children[parent_id].append(node_id)
        tree._refuse_cycles()
        if active is not None:
            tree.switch(active)
        else:
            leaves = tree.branches()
            tree._active = leaves[-1] if leaves else None
        return tree

    def _refuse_cycles(self) -> None:
        """Every node must reach the root; walk down from it and report a loop otherwise."""
        reached: set[str] = set()
        stack = [self._root] if self._root is not None else []
        while stack:
            node = stack.pop()
            reached.add(node)
            stack.extend(self._children[node])
        for node_id in self._parent:
            if node_id not in reached:
                loop = [node_id]
                parent = self._parent[node_id]
                while parent is not None and parent not in loop:
                    loop.append(parent)
                    parent = self._parent[parent]
                raise CheckpointCycle([*loop[loop.index(parent) :], parent] if parent else loop)

    def to_parents(self) -> dict[str, str | None]:
        """``{node: parent}`` in the order nodes were added (what `from_parents` takes)."""
        return dict(self._parent)

    # -- reading ---------------------------------------------------------------------------

    @property
    def root(self) -> str | None:
        return self._root

    @property
    def active(self) -> str | None:
        """The checkpoint the conversation currently ends at (None for an empty tree)."""
        return self._active

    def __contains__(self, node_id: object) -> bool:
        return node_id in self._parent

    def __len__(self) -> int:
        return len(self._parent)

    def __iter__(self) -> Iterator[str]:
        """Every checkpoint, in the order it was added."""
        return iter(list(self._parent))

    def parent(self, node_id: str) -> str | None:
        if node_id not in self._parent:
            raise UnknownCheckpoint(node_id)
        return self._parent[node_id]

    def children(self, node_id: str) -> list[str]:
        """The checkpoints that follow `node_id`, in the order they were added."""
        if node_id not in self._children:
            raise UnknownCheckpoint(node_id)
        return list(self._children[node_id])

    def branches(self) -> list[str]:
        """Every branch, named by its leaf, in the order the leaves were added."""
        return [node for node, kids in self._children.items() if not kids]

    def ancestry(self, node_id: str) -> list[str]:
        """root..`node_id`: each element is the parent of the next."""
        if node_id not in self._parent:
            raise UnknownCheckpoint(node_id)
        chain: list[str] = []
        current: str | None = node_id
        while current is not None:
            chain.append(current)
            current = self._parent[current]
        chain.reverse()
        return chain

    def path(self) -> list[str]:
        """The active branch up to the active checkpoint; empty for an empty tree."""
        return [] if self._active is None else self.ancestry(self._active)
