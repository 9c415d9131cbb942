"""The official TypeScript ACP SDK for the tests, installed once into the user's cache.

`typescript_sdk()` returns a folder whose ``node_modules`` holds ``@agentclientprotocol/sdk``
at `TS_SDK_VERSION`, installing it with npm on first use into
``$XDG_CACHE_HOME/robota-test/npm/acp-sdk-VERSION`` (the cache of the user running the tests,
read before the suite isolates XDG folders). Concurrent test runs take turns under a lock; an
install goes to a temporary folder renamed into place whole, so a broken or interrupted one
never looks installed.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Final

__all__ = ["NPM_TIMEOUT", "TS_SDK_VERSION", "node_tools_missing", "typescript_sdk"]

TS_SDK_VERSION: Final = "2.4.0"
#: Absolute bound on the one npm install.
NPM_TIMEOUT: Final = 300.0

_USER_CACHE: Final = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")


def node_tools_missing() -> str | None:
    """Why the TypeScript editor cannot run here, or None."""
    missing = [tool for tool in ("node", "npm") if shutil.which(tool) is None]
    return (
        f"{' and '.join(missing)} not installed (apt-get install nodejs npm)" if missing else None
    )


def typescript_sdk() -> Path:
    """The folder holding the SDK (installed now if it is not yet)."""
    root = _USER_CACHE / "robota-test" / "npm"
    target = root / f"acp-sdk-{TS_SDK_VERSION}"
    if _installed(target):
        return target
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f"acp-sdk-{TS_SDK_VERSION}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _installed(target):
            return target
        staging = Path(tempfile.mkdtemp(prefix=".acp-sdk-", dir=root))
        try:
            subprocess.run(
                [
                    "npm",
                    "install",
                    "--prefix",
                    str(staging),
                    "--no-audit",
                    "--no-fund",
                    "--loglevel=error",
                    f"@agentclientprotocol/sdk@{TS_SDK_VERSION}",
                ],
                check=True,
                capture_output=True,
                timeout=NPM_TIMEOUT,
            )
            if target.exists():
                shutil.rmtree(target)
            staging.rename(target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return target


def _installed(folder: Path) -> bool:
    package = folder / "node_modules" / "@agentclientprotocol" / "sdk" / "package.json"
    return package.is_file() and f'"version": "{TS_SDK_VERSION}"' in package.read_text()
