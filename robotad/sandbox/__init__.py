"""Confining model-run commands with bubblewrap (PROTOCOL.md §10.4).

- `SandboxPolicy` (`policy`): a session's mode, network switch and extra writable roots.
- `bwrap_argv` / `MountPlan` (`bwrap`): the pure command-line builder.
- `plan_mounts` (`layout`): which folders are writable and which stay read-only inside them.
- `filter_program` (`seccomp`): the second layer, a seccomp filter against Unix sockets.
- `probe_sandbox` / `SandboxSupport` (`support`): whether this machine can sandbox at all.
- `write_refusal` (`roots`): Write and Edit held to the same writable roots.
- `Confinement` (`confinement`): one session's sandbox as Bash, Write and Edit use it.
- `hold` (`workspaces`): confined work on overlapping folders, one piece at a time.
"""

from __future__ import annotations

from robotad.sandbox.bwrap import MountPlan, bwrap_argv
from robotad.sandbox.confinement import Confinement, Launch, SandboxUnavailable
from robotad.sandbox.layout import plan_mounts, writable_dirs
from robotad.sandbox.policy import (
    SANDBOX_MODES,
    UNCONFINED,
    SandboxMode,
    SandboxPolicy,
    policy_for_session,
)
from robotad.sandbox.roots import write_refusal
from robotad.sandbox.support import SandboxProbe, SandboxSupport, probe_sandbox

__all__ = [
    "SANDBOX_MODES",
    "UNCONFINED",
    "Confinement",
    "Launch",
    "MountPlan",
    "SandboxMode",
    "SandboxPolicy",
    "SandboxProbe",
    "SandboxSupport",
    "SandboxUnavailable",
    "bwrap_argv",
    "plan_mounts",
    "policy_for_session",
    "probe_sandbox",
    "writable_dirs",
    "write_refusal",
]
