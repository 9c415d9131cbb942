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


def test_a_root_that_holds_the_home_or_its_start_up_folders_is_refused_at_start() -> None:
    """`writable_roots = ["~"]` would be silently read-only (the sandbox never lets a command
    write where files that run later live): say so when robotad starts instead."""
    with pytest.raises(ValidationFailed) as refused:
        decode_config(
            '[sandbox]\nwritable_roots = ["~", "/", "~/.config", "~/.ssh", "~/.cache", "/srv"]\n'
        )
    said = {issue["path"]: issue["message"] for issue in refused.value.issues}
    assert sorted(said) == [f"sandbox.writable_roots[{index}]" for index in range(4)]
    assert "is or holds ~," in said["sandbox.writable_roots[0]"]
    assert "~/.config/autostart" in said["sandbox.writable_roots[2]"]
