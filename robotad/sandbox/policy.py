"""What a session's sandbox is: its mode, whether it has network, and its extra writable roots.

`SandboxPolicy` is the one shape of that choice, kept in the session's record (so a reloaded
session is confined exactly as it was created) and built for a new session from
``session/create {sandbox}`` over the ``[sandbox]`` table of the configuration
(`policy_for_session`). PROTOCOL.md §10.4:

- ``off``: commands run as the user, unconfined (the default).
- ``read-only``: nothing is writable but a private ``/tmp``.
- ``workspace-write``: the session's cwd tree and `writable_roots` are writable too, except
  every ``.git`` and robota's own folders inside them.

`writable_roots` are absolute paths (``~`` expanded when the policy is made), taken as written:
a root whose path goes through a symlink is not writable (`layout.writable_dirs`; whoever made
the link, a command of this session or another's could have); `network` lets commands reach
the network (otherwise not even the machine's loopback is reachable).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Final

from msgspec import Struct

from protocol.shapes import SandboxMode

__all__ = ["SANDBOX_MODES", "UNCONFINED", "SandboxMode", "SandboxPolicy", "policy_for_session"]

SANDBOX_MODES: Final[tuple[SandboxMode, ...]] = ("off", "read-only", "workspace-write")


class SandboxPolicy(Struct, frozen=True, rename="camel", forbid_unknown_fields=True):
    """A session's confinement (stored in its record as ``settings.sandbox``)."""

    mode: SandboxMode = "off"
    network: bool = False
    writable_roots: tuple[str, ...] = ()

    @property
    def confined(self) -> bool:
        """Whether commands run inside the sandbox at all."""
        return self.mode != "off"


UNCONFINED: Final = SandboxPolicy()
"""The policy of a session created without a sandbox, or stored before sandboxes existed."""


def policy_for_session(
    mode: SandboxMode, *, network: bool, writable_roots: Sequence[str]
) -> SandboxPolicy:
    """A new session's policy: `mode` (from ``session/create`` or the configuration) with the
    configured network switch and roots, ``~`` expanded and each root normalised."""
    roots = tuple(os.path.normpath(os.path.expanduser(root)) for root in writable_roots)
    return SandboxPolicy(mode=mode, network=network, writable_roots=roots)
