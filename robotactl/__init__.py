"""robotactl — the command-line client of robotad (PROTOCOL.md §9).

A thin client: each command resolves the socket, connects (starting robotad when nothing
answers, unless told not to), makes its JSON-RPC call(s) through `protocol`, and renders the
result. It never imports `robotad`. Importing this package is cheap on purpose: msgspec loads
only inside the commands that talk to the daemon, and trio only inside those that stream a
turn (or start a missing daemon).
"""

from __future__ import annotations

__all__ = ["__version__"]

#: Kept equal to ``[project] version`` in pyproject.toml (a test checks it); read here rather
#: than through importlib.metadata so ``--version`` works uninstalled and costs nothing.
__version__ = "0.1.0"
