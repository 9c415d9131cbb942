"""Whether this machine can sandbox: the probe, the refusal when it cannot, and bubblewrap run
by an unprivileged user (user namespaces) as well as by root."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
import trio

from robotad.sandbox import (
    Confinement,
    MountPlan,
    SandboxPolicy,
    SandboxProbe,
    SandboxSupport,
    bwrap_argv,
    probe_sandbox,
)
from robotad.sandbox.support import remedy, seccomp_descriptor
from robotad.tools import BashTool
from tests.tools.tool_calls import call


async def test_without_bwrap_on_the_path_the_probe_says_why(tmp_path: Path) -> None:
    with trio.fail_after(20):
        support = await probe_sandbox(str(tmp_path))
    assert not support.available
    assert "bwrap" in (support.reason or "")
    assert "bubblewrap" in support.describe()


UID_MAP = "bwrap: setting up uid map: Permission denied"


def kernel(**switches: str) -> Callable[[str], str | None]:
    """A sysctl reader over `switches` (dots as underscores: ``kernel__x`` is ``kernel.x``)."""
    values = {name.replace("__", "."): value for name, value in switches.items()}
    return values.get


def test_the_apparmor_restriction_is_named_with_what_to_do() -> None:
    advice = remedy(UID_MAP, kernel(kernel__apparmor_restrict_unprivileged_userns="1"))
    assert advice is not None
    assert "AppArmor" in advice
    assert "kernel.apparmor_restrict_unprivileged_userns=0" in advice


def test_the_other_namespace_switches_are_named() -> None:
    clone_off = remedy(
        "bwrap: No permissions to create new namespace, likely because the kernel does not "
        "allow non-privileged user namespaces.",
        kernel(
            kernel__apparmor_restrict_unprivileged_userns="0", kernel__unprivileged_userns_clone="0"
        ),
    )
    assert clone_off is not None
    assert "kernel.unprivileged_userns_clone=1" in clone_off
    none_allowed = remedy(UID_MAP, kernel(user__max_user_namespaces="0"))
    assert none_allowed is not None
    assert "user.max_user_namespaces" in none_allowed


def test_an_old_bubblewrap_is_named() -> None:
    advice = remedy("bwrap: Unknown option --disable-userns", kernel())
    assert advice is not None
    assert "0.8.0" in advice


def test_no_advice_is_made_up() -> None:
    """A namespace complaint with every switch open, or a complaint of another kind, gets no
    guess."""
    assert remedy(UID_MAP, kernel(kernel__apparmor_restrict_unprivileged_userns="0")) is None
    restricted = kernel(kernel__apparmor_restrict_unprivileged_userns="1")
    assert remedy("bwrap: Can't find source path /nix: No such file", restricted) is None


async def test_the_probe_passes_on_the_advice(tmp_path: Path) -> None:
    """A bwrap that fails as Ubuntu 24.04's does: the probe's answer (what the daemon logs and
    a refused sandboxed session says) quotes it and says what to do."""
    fake = tmp_path / "bwrap"
    fake.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = --version ]; then echo "bubblewrap 0.9.0"; exit 0; fi\n'
        f"echo '{UID_MAP}' >&2\nexit 1\n"
    )
    fake.chmod(0o755)
    with trio.fail_after(20):
        support = await probe_sandbox(
            str(tmp_path), sysctl=kernel(kernel__apparmor_restrict_unprivileged_userns="1")
        )
    assert not support.available
    assert support.reason is not None
    assert UID_MAP in support.reason
    assert "kernel.apparmor_restrict_unprivileged_userns=0" in support.reason


async def test_a_sandboxed_bash_without_bwrap_runs_nothing(tmp_path: Path) -> None:
    confinement = Confinement(
        SandboxPolicy(mode="workspace-write"), probe=SandboxProbe(str(tmp_path / "empty"))
    )
    with trio.fail_after(20):
        result = await call(BashTool(confinement), tmp_path, command="echo ran > ran.txt")
    assert not result.ok
    assert result.content.startswith("not run: the sandbox cannot be set up")
    assert not (tmp_path / "ran.txt").exists()


async def test_a_bwrap_that_vanished_after_the_probe_runs_nothing(tmp_path: Path) -> None:
    gone = SandboxSupport(bwrap=str(tmp_path / "bwrap"), version="bubblewrap 0")
    confinement = Confinement(SandboxPolicy(mode="read-only"), probe=SandboxProbe(known=gone))
    with trio.fail_after(20):
        result = await call(BashTool(confinement), tmp_path, command="true")
    assert not result.ok
    assert "no longer executable" in result.content


async def test_a_failed_probe_is_asked_again(tmp_path: Path) -> None:
    probe = SandboxProbe(known=SandboxSupport(reason="earlier: no"))
    with trio.fail_after(20):
        support = await probe.current()
    assert support.reason != "earlier: no"


def test_an_unprivileged_user_can_run_the_same_sandbox(sandbox_support: SandboxSupport) -> None:
    """robotad usually runs as a plain user: the same argv must work with only user
    namespaces to go on, and confine as well."""
    setpriv = shutil.which("setpriv")
    if os.geteuid() != 0 or setpriv is None:
        pytest.skip("needs root (to become another user) and setpriv")
    assert sandbox_support.bwrap is not None
    base = Path(tempfile.mkdtemp(prefix="robota-sandbox-", dir="/var/tmp"))
    try:
        ws = base / "ws"
        ws.mkdir()
        os.chown(ws, 65534, 65534)
        base.chmod(0o755)
        outside = base / "outside.txt"
        outside.write_text("original\n")
        outside.chmod(0o666)  # the user could write it unconfined
        plan = MountPlan(cwd=str(ws), writable=(str(ws),))
        command = ["/bin/sh", "-c", f"id -u; echo made > made.txt; echo pwned > {outside}"]
        fd = seccomp_descriptor()
        try:
            argv = bwrap_argv(sandbox_support.bwrap, plan, command, seccomp_fd=fd)
            done = subprocess.run(
                [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", *argv],
                capture_output=True,
                text=True,
                pass_fds=(fd,),
                timeout=30,
                check=False,
            )
        finally:
            os.close(fd)
        assert done.stdout.splitlines()[0] == "65534", done.stderr
        assert (ws / "made.txt").read_text() == "made\n"
        assert done.returncode != 0
        assert "Read-only file system" in done.stderr
        assert outside.read_text() == "original\n"
    finally:
        shutil.rmtree(base, ignore_errors=True)
