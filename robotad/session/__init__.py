"""The seeds' Session and its collaborators.

The public surface: `Session`; its ports and result shapes (`SessionStorePort`, `NullStore`,
`SessionSnapshot`, `PermissionHandler`, `ApprovalAnswer`, `CompactOutcome`, `Denial`,
`EventSink`); `ReconciliationFailed` (a resume refused for an effect of unknown outcome); the
turn claim (`TurnClaim`, `ClaimToken`); and the collaborators a host builds a
session from (`HookRunner`, `parse_hooks_config`, `CommandClassifier`, `Classifier`).

Names are resolved on first use, so importing one collaborator module (e.g.
``robotad.session.patterns``) does not import the whole session stack.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from protocol.lazy import lazy_attributes

if TYPE_CHECKING:
    from robotad.session.classifier import Classifier, CommandClassifier
    from robotad.session.hook_config import parse_hooks_config
    from robotad.session.hooks import HookRunner
    from robotad.session.ports import (
        ApprovalAnswer,
        CompactOutcome,
        Denial,
        EventSink,
        NullStore,
        PermissionHandler,
        SessionSnapshot,
        SessionStorePort,
    )
    from robotad.session.recoverable import ReconciliationFailed
    from robotad.session.session import Session
    from robotad.session.turn_claim import ClaimToken, TurnClaim

_HOMES = {
    "Classifier": ".classifier",
    "CommandClassifier": ".classifier",
    "parse_hooks_config": ".hook_config",
    "HookRunner": ".hooks",
    "ApprovalAnswer": ".ports",
    "CompactOutcome": ".ports",
    "Denial": ".ports",
    "EventSink": ".ports",
    "NullStore": ".ports",
    "PermissionHandler": ".ports",
    "SessionSnapshot": ".ports",
    "SessionStorePort": ".ports",
    "ReconciliationFailed": ".recoverable",
    "Session": ".session",
    "ClaimToken": ".turn_claim",
    "TurnClaim": ".turn_claim",
}

__all__ = [
    "ApprovalAnswer",
    "ClaimToken",
    "Classifier",
    "CommandClassifier",
    "CompactOutcome",
    "Denial",
    "EventSink",
    "HookRunner",
    "NullStore",
    "PermissionHandler",
    "ReconciliationFailed",
    "Session",
    "SessionSnapshot",
    "SessionStorePort",
    "TurnClaim",
    "parse_hooks_config",
]


__getattr__ = lazy_attributes(globals(), _HOMES)
