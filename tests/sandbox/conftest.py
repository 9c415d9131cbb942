"""Fixtures of the sandbox tests: this machine's bubblewrap, and an arena outside /tmp.

The arena lives under /var/tmp, not /tmp: a sandboxed command gets a private /tmp, so a write
to a path under the real /tmp would land there and prove nothing. It holds the session's
workspace (`ws`, a git-like tree) and a folder outside it with a file every escape attempt
tries to change; HOME points at a third folder, so ``~`` is outside the workspace too.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import trio

from robotad.sandbox import (
    Confinement,
    SandboxMode,
    SandboxPolicy,
    SandboxProbe,
    SandboxSupport,
    probe_sandbox,
)

ORIGINAL = "original\n"


@pytest.fixture(scope="session")
def sandbox_support() -> SandboxSupport:
    """This machine's sandbox support; the test is skipped, saying why, when there is none
    (CI installs bubblewrap, so it never skips there)."""
    support = trio.run(probe_sandbox)
    if not support.available:
        pytest.skip(f"bubblewrap cannot sandbox here: {support.reason}")
    return support


def confinement(
    support: SandboxSupport,
    mode: SandboxMode = "workspace-write",
    *,
    network: bool = False,
    roots: tuple[str, ...] = (),
    protected: tuple[str, ...] = (),
) -> Confinement:
    """A session's confinement on this machine."""
    policy = SandboxPolicy(mode=mode, network=network, writable_roots=roots)
    return Confinement(policy, probe=SandboxProbe(known=support), protected=protected)


@dataclass
class Arena:
    base: Path
    ws: Path
    outside: Path
    home: Path

    @property
    def target(self) -> Path:
        """The file outside the workspace that no attempt may change."""
        return self.outside / "target.txt"

    def untouched(self) -> bool:
        """Nothing outside the workspace changed: the target as it was, nothing added."""
        return (
            self.target.read_text() == ORIGINAL
            and sorted(os.listdir(self.outside)) == ["target.txt"]
            and os.listdir(self.home) == []
            and sorted(os.listdir(self.ws / ".git")) == ["HEAD", "hooks"]
            and os.listdir(self.ws / ".git" / "hooks") == []
            and (self.ws / ".git" / "HEAD").read_text() == "ref: refs/heads/main\n"
        )


@pytest.fixture
def arena(monkeypatch: pytest.MonkeyPatch) -> Iterator[Arena]:
    base = Path(tempfile.mkdtemp(prefix="robota-sandbox-", dir="/var/tmp"))
    try:
        ws, outside, home = base / "ws", base / "outside", base / "home"
        for folder in (ws / ".git" / "hooks", outside, home):
            folder.mkdir(parents=True)
        (ws / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
        (outside / "target.txt").write_text(ORIGINAL)
        monkeypatch.setenv("HOME", str(home))
        yield Arena(base, ws, outside, home)
    finally:
        shutil.rmtree(base, ignore_errors=True)
