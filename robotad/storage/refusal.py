"""Storage's refusal of an input it was handed, as a domain error.

An id that is no safe path segment, or an export artifact that does not decode, is refused
with `InputRejected` before anything touches the disk. Its `issues` locate each problem by the
JSON path the caller gave the input (``$.sessionId``, ``$.artifact.record.cwd``), so the
daemon's edge answers it as InvalidParams (-32602) without rewriting anything.
"""

from __future__ import annotations

from collections.abc import Iterable

from protocol.errors import Issue

__all__ = ["InputRejected"]


class InputRejected(ValueError):
    """A refused input; `issues` locates each problem (``{"path", "message"}``)."""

    def __init__(self, issues: Iterable[Issue]) -> None:
        self.issues: list[Issue] = list(issues)
        super().__init__("; ".join(f"{i['path']}: {i['message']}" for i in self.issues))
