"""Lazy re-exports for a package `__init__`: names resolved from their home module on first use.

A package that re-exports a small public surface without importing it eagerly (to keep a
client's start-up lean, or to break an import cycle) sets::

    __getattr__ = lazy_attributes(globals(), {"run_turn": ".loop", "RpcError": "protocol.errors"})

A home starting with ``.`` is relative to the package. A resolved name is cached in the
package's namespace, so the lookup runs once per name.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_attributes"]


def lazy_attributes(namespace: dict[str, Any], homes: Mapping[str, str]) -> Callable[[str], Any]:
    """A module-level ``__getattr__`` for the package whose globals are `namespace`."""
    package = str(namespace["__name__"])

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home, package), name)
        namespace[name] = value
        return value

    return __getattr__
