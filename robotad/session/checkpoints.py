"""A conversation as a tree of checkpoints, as `session/fork` reads it: pure bookkeeping, no I/O.

A checkpoint is a message id; each one but the root has a parent, the message it follows. The
conversation a session shows is the path from the root to the **active** checkpoint.

- `add(node, parent)` records a message after `parent` (``None`` only for the one root). When
  `parent` is the active checkpoint, the active branch grows: `active` moves to the new node.
  Adding elsewhere grows another branch and leaves `active` where it is.
- `ancestry(node)` is root..node; `path()` is the active one.

Nodes are never removed or re-parented, so a node's ancestry never changes once it is added.
Every refusal is a `CheckpointError` subclass naming the offending id, and leaves the tree
unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator

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
