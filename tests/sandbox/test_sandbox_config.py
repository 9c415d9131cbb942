"""The ``[sandbox]`` table: defaults, the policy a new session gets, located refusals."""

from __future__ import annotations

import os

import pytest

from protocol.validate import ValidationFailed
from robotad.config import decode_config
from robotad.sandbox import SandboxPolicy, policy_for_session


def test_absent_means_off() -> None:
    sandbox = decode_config("").sandbox
    assert (sandbox.mode, sandbox.network, sandbox.writable_roots) == ("off", False, [])


def test_a_session_policy_expands_the_roots() -> None:
    sandbox = decode_config(
        '[sandbox]\nmode = "workspace-write"\nnetwork = true\n'
        'writable_roots = ["~/.cache", "/srv/data/"]\n'
    ).sandbox
    policy = policy_for_session(
        sandbox.mode, network=sandbox.network, writable_roots=sandbox.writable_roots
    )
    assert policy == SandboxPolicy(
        mode="workspace-write",
        network=True,
        writable_roots=(os.path.expanduser("~/.cache"), "/srv/data"),
    )


def test_every_problem_is_located() -> None:
    with pytest.raises(ValidationFailed) as refused:
        decode_config(
            '[sandbox]\nmode = "strict"\nwritable_roots = ["relative/dir", "/ok", "~other/x"]\n'
            "colour = 1\n"
        )
    paths = sorted(issue["path"] for issue in refused.value.issues)
    assert paths == [
        "sandbox.colour",
        "sandbox.mode",
        "sandbox.writable_roots[0]",
        "sandbox.writable_roots[2]",
    ]
