"""The security sweep: planted secrets, file modes and path attacks against a real daemon.

A daemon is started with a planted API key in its environment (``OPENAI_API_KEY``, named by a
configured provider), a PreToolUse hook that reads its input and a PostToolUse hook that
prints a sensitive key and fails. A workload then runs turns whose tool calls carry secrets
under sensitive keys (top level and nested), imports a session whose metadata and messages
hold secrets under sensitive keys, runs a turn of a provider that must fail (a closed
loopback port) with the key loaded, exports redacted, and writes a large payload (sidecars).

Then EVERY file under the state dir and the runtime dir, the daemon's own output and every RPC
reply of the workload are scanned:

- the environment key appears nowhere at all — not even in records: it is never sent to a
  command (``env`` is run as a tool) nor written (G-152, G-206);
- a secret under a sensitive key appears only where values are kept by design: session
  records and journals (PROTOCOL §8, G-036); never in a log line or sidecar (G-152, G-155's
  payload folder included), the prompt history or the spill store, nor in a redacted export
  (G-028); what a hook printed under a sensitive key is stored nowhere at all;
- every file and folder under both dirs is owner-only: 0600 files (and socket), 0700
  folders (G-009, G-155, G-198).

Path attacks: every method taking ``sessionId`` (and ``newSessionId``) refuses ``..``,
``a/b``, ``/etc/passwd``, empty, 200 characters, ``.``, non-ASCII and friends with -32602 at
that parameter, and nothing appears on disk anywhere under the daemon's home (G-156).
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec.inspect as mi
import pytest
import trio

from protocol.errors import InvalidParams, ProviderFailed, RpcError, StaleResponse
from protocol.methods import METHODS
from tests.system.daemon_process import DaemonHome, DaemonProcess, daemon_home
from tests.system.soak_client import SoakConnection, open_soak_connection

ENV_SECRET = "sk-planted-env-7c1e55aa90d4f00d"
ARG_SECRET = "planted-arg-secret-51d0c3e9"
NESTED_SECRET = "planted-nested-password-e2b7a1"
META_SECRET = "planted-metadata-token-9a4f0b"
HOOK_SECRET = "planted-hook-output-token-3c88"
KEY_SECRETS = (ARG_SECRET, NESTED_SECRET, META_SECRET, HOOK_SECRET)

SWEEP_TIMEOUT = 60.0

#: Reads its input, prints a sensitive key's value and fails (an advisory hook failure).
POST_HOOK = f'cat > /dev/null; echo \'{{\\"api_key\\": \\"{HOOK_SECRET}\\"}}\'; exit 1'

CONFIG = f"""
default_provider = "scripted"

[providers.local]
kind = "openai"
base_url = "http://127.0.0.1:9/v1"
model = "planted-model"
api_key_env = "OPENAI_API_KEY"

[[hooks.PreToolUse]]
matcher = "*"
hooks = [{{ type = "command", command = "cat > /dev/null", timeout = 10 }}]

[[hooks.PostToolUse]]
matcher = "*"
hooks = [{{ type = "command", command = "{POST_HOOK}", timeout = 10 }}]
"""

BAD_IDS = (
    "..",
    ".",
    "../escape",
    "a/b",
    "/etc/passwd",
    "",
    "a" * 200,
    "é",
    "über-session",
    "a\x00b",
    "x/../../y",
    ".hidden",
    "-dash",
    " spaced",
)


# -- the workload ---------------------------------------------------------------------------


def _script() -> list[dict[str, Any]]:
    return [
        {
            "toolCalls": [
                {"name": "Read", "arguments": {"file_path": "seed.txt", "api_key": ARG_SECRET}},
                {
                    "name": "Write",
                    "arguments": {
                        "file_path": "notes/a.txt",
                        "content": "x",
                        "options": {"credentials": {"password": NESTED_SECRET}},
                    },
                },
                {"name": "Bash", "arguments": {"command": "env"}},
                {"name": "Write", "arguments": {"file_path": "big.txt", "content": "y" * 300_000}},
            ]
        },
        {"text": "done with the tools", "chunks": 3},
    ]


def _artifact(cwd: Path) -> dict[str, Any]:
    message = {
        "id": "m-1",
        "role": "user",
        "content": "hello",
        "state": "complete",
        "timestamp": "2024-05-01T12:00:00Z",
        "metadata": {"token": META_SECRET},
    }
    record = {
        "id": "imported",
        "cwd": str(cwd),
        "createdAt": "2024-05-01T12:00:00Z",
        "updatedAt": "2024-05-01T12:00:00Z",
        "messages": [message],
        "history": [],
        "systemPrompt": None,
        "toolSchemas": [],
        "settings": {
            "provider": "scripted",
            "model": "scripted",
            "permissionMode": "default",
            "permissions": {"allow": [], "ask": [], "deny": []},
            "autoCompactThreshold": 0.835,
        },
        "turnCount": 0,
        "metadata": {"client_secret": META_SECRET, "nested": {"authorization": META_SECRET}},
    }
    return {
        "schemaVersion": 1,
        "kind": "robota.session",
        "exportedAt": "2024-05-01T12:00:00Z",
        "record": record,
    }


async def _workload(connection: SoakConnection, home: DaemonHome) -> list[Any]:
    """Run the secret-bearing workload; every reply, for the scan."""
    replies: list[Any] = []
    cwd = home.workspace("secrets")
    (cwd / "seed.txt").write_text("seed\n")
    (cwd / "notes").mkdir(exist_ok=True)

    async def call(method: str, params: dict[str, Any]) -> Any:
        reply = await connection.call(method, params)
        replies.append(reply)
        return reply

    await call(
        "session/create",
        {
            "cwd": str(cwd),
            "sessionId": "sec-1",
            "permissionMode": "bypassPermissions",
            "script": _script(),
        },
    )
    await connection.subscribe("sec-1")
    await call("session/run", {"sessionId": "sec-1", "prompt": "use the tools"})
    await call("session/run", {"sessionId": "sec-1", "prompt": "and once more"})
    await call("session/import", {"artifact": _artifact(cwd), "sessionId": "sec-imported"})
    await call("session/run", {"sessionId": "sec-imported", "prompt": "continue"})
    redacted = await call("session/export", {"sessionId": "sec-imported", "redact": True})
    assert META_SECRET not in json.dumps(redacted)  # G-028
    full = await connection.call("session/export", {"sessionId": "sec-imported"})
    assert META_SECRET in json.dumps(full)  # G-027: the local round trip keeps values
    await call("session/create", {"cwd": str(cwd), "sessionId": "sec-net", "provider": "local"})
    with pytest.raises(ProviderFailed) as failed:
        await connection.call("session/run", {"sessionId": "sec-net", "prompt": "hi"})
    replies.append(repr(failed.value) + json.dumps(failed.value.data))
    for session_id in ("sec-1", "sec-imported", "sec-net"):
        await call("session/log", {"sessionId": session_id})
        await call("session/history", {"sessionId": session_id})
    await call("history/search", {})
    return replies


# -- the scan -------------------------------------------------------------------------------


def _files(root: Path) -> Iterator[Path]:
    for directory, folders, files in os.walk(root):
        for name in folders + files:
            yield Path(directory) / name


def _keeps_values(state_dir: Path, path: Path) -> bool:
    """Records and journals keep every value by design (PROTOCOL §8)."""
    relative = path.relative_to(state_dir).parts if path.is_relative_to(state_dir) else ()
    return bool(relative) and relative[0] in ("sessions", "journal")


def scan(home: DaemonHome, replies: list[Any], output: str) -> list[str]:
    problems: list[str] = []
    roots = (home.state_dir, home.runtime_dir / "robota")
    for root in roots:
        for path in _files(root):
            info = path.lstat()
            mode = stat.S_IMODE(info.st_mode)
            wanted = 0o700 if stat.S_ISDIR(info.st_mode) else 0o600
            if mode != wanted:
                problems.append(f"{path} has mode {mode:04o}, wanted {wanted:04o}")
            if stat.S_ISLNK(info.st_mode):
                problems.append(f"{path} is a symbolic link")
            if not stat.S_ISREG(info.st_mode):
                continue
            data = path.read_bytes()
            if ENV_SECRET.encode() in data:
                problems.append(f"{path} holds the environment's API key")
            if HOOK_SECRET.encode() in data:
                problems.append(f"{path} holds a sensitive key's value from a hook's output")
            if not _keeps_values(home.state_dir, path):
                problems += [
                    f"{path} holds the value of a sensitive key ({secret})"
                    for secret in KEY_SECRETS
                    if secret != HOOK_SECRET and secret.encode() in data
                ]
    # History and exports return stored values by design; the environment's key and a hook's
    # output are stored nowhere, so they must not come back either.
    wire = json.dumps(replies)
    problems += [
        f"an RPC reply holds {what}"
        for secret, what in (
            (ENV_SECRET, "the environment's API key"),
            (HOOK_SECRET, "hook output"),
        )
        if secret in wire
    ]
    if ENV_SECRET in output:
        problems.append("the daemon's output holds the environment's API key")
    problems += [
        f"the daemon's output holds a sensitive key's value ({secret})"
        for secret in KEY_SECRETS
        if secret in output
    ]
    return problems


async def test_planted_secrets_stay_where_they_belong_and_files_are_private() -> None:
    """G-009, G-028, G-036, G-152, G-155, G-198, G-206: see the module docstring."""
    with daemon_home({"OPENAI_API_KEY": ENV_SECRET}) as home:
        home.config_path.write_text(CONFIG)
        daemon = DaemonProcess(home).start()
        try:
            with trio.fail_after(SWEEP_TIMEOUT):
                async with open_soak_connection(daemon.socket_path) as connection:
                    replies = await _workload(connection, home)
            running = scan(home, replies, daemon.output())
            environ = Path(f"/proc/{daemon.pid}/environ").read_bytes()
        finally:
            status = daemon.stop()
        stopped = scan(home, replies, daemon.output())
        records = sorted(p.name for p in (home.state_dir / "sessions").iterdir())
        sidecars = list((home.state_dir / "logs").glob("*.payloads/*"))
        record = home.record_path("sec-1").read_text()
        imported = home.record_path("sec-imported").read_text()
        log = (home.state_dir / "logs" / "sec-1.jsonl").read_text()
    # Controls: the key reached the daemon, the tools ran, the scan can see kept values.
    assert ENV_SECRET.encode() in environ
    assert "PATH=" in record, "the Bash env call must have run"
    assert ARG_SECRET in record
    assert NESTED_SECRET in record
    assert META_SECRET in imported
    assert "[REDACTED]" in log
    assert "hook_failure" in log, "the failing PostToolUse hook must have run"
    assert status == 0
    assert records == ["sec-1.json", "sec-imported.json", "sec-net.json"]
    assert sidecars, "the workload must have written a sidecar"
    assert running == []
    assert stopped == []


# -- path attacks ---------------------------------------------------------------------------


def _id_members() -> dict[str, list[str]]:
    """Every method taking a session id, and the members that carry one."""
    found: dict[str, list[str]] = {}
    for method, (params, _) in METHODS.items():
        info = mi.type_info(params)
        assert isinstance(info, mi.StructType)
        members = [f.encode_name for f in info.fields if f.encode_name.endswith("essionId")]
        if members:
            found[method] = members
    return found


def _base_params(method: str, cwd: Path, artifact: dict[str, Any]) -> dict[str, Any]:
    """Valid params but for the id under attack (the session ``sec-1`` exists)."""
    extra: dict[str, dict[str, Any]] = {
        "session/create": {"cwd": str(cwd)},
        "session/run": {"prompt": "x"},
        "session/resume": {"executionId": "e-1", "responses": []},
        "session/abandon": {"executionId": "e-1"},
        "session/setPermissionMode": {"mode": "default"},
        "session/addRule": {"rule": "Read", "kind": "allow", "scope": "session"},
        "session/import": {"artifact": artifact},
    }
    return {"sessionId": "sec-1", **extra.get(method, {})}


def _tree(root: Path) -> set[str]:
    return {str(p) for p in _files(root) if p.name != "robotad.log"}


def _escape_targets(home: DaemonHome, bad: str) -> list[Path]:
    """Where a careless daemon would write for `bad`."""
    targets = []
    for folder, suffix in (("sessions", ".json"), ("logs", ".jsonl"), ("journal", "")):
        try:
            targets.append(Path(os.path.normpath(home.state_dir / folder / f"{bad}{suffix}")))
        except ValueError:
            continue  # a NUL byte: no path at all
    return targets


async def test_unsafe_session_ids_are_refused_by_every_method_before_any_path() -> None:
    """G-156: -32602 at the id's own path for every method, and nothing created anywhere."""
    methods = _id_members()
    assert {"session/get", "session/run", "session/fork", "session/import"} <= set(methods)
    assert "newSessionId" in methods["session/fork"]
    with daemon_home() as home:
        daemon = DaemonProcess(home).start()
        try:
            cwd = home.workspace("paths")
            with trio.fail_after(SWEEP_TIMEOUT):
                async with open_soak_connection(daemon.socket_path) as connection:
                    await connection.call("session/create", {"cwd": str(cwd), "sessionId": "sec-1"})
                    artifact = (await connection.call("session/export", {"sessionId": "sec-1"}))[
                        "artifact"
                    ]
                    before = _tree(home.root)
                    existed = {
                        str(t) for bad in BAD_IDS for t in _escape_targets(home, bad) if t.exists()
                    }
                    wrong = []
                    for method, members in sorted(methods.items()):
                        for member in members:
                            for bad in BAD_IDS:
                                params = {**_base_params(method, cwd, artifact), member: bad}
                                wrong += await _expect_refusal(connection, method, params, member)
                    for method in ("session/resume", "session/abandon"):
                        for bad in BAD_IDS:
                            params = {**_base_params(method, cwd, artifact), "executionId": bad}
                            wrong += await _expect_execution_refusal(connection, method, params)
                    after = _tree(home.root)
                    appeared = {
                        str(t)
                        for bad in BAD_IDS
                        for t in _escape_targets(home, bad)
                        if t.exists() and str(t) not in existed
                    }
        finally:
            daemon.stop()
    assert wrong == []
    assert after - before == set()
    assert appeared == set()


async def _expect_refusal(
    connection: SoakConnection, method: str, params: dict[str, Any], member: str
) -> list[str]:
    try:
        await connection.call(method, params)
    except InvalidParams as refusal:
        if any(issue["path"] == f"$.{member}" for issue in refusal.issues):
            return []
        return [f"{method} {member}={params[member]!r}: issues {refusal.issues}"]
    except RpcError as error:
        return [f"{method} {member}={params[member]!r}: {error!r}, not -32602"]
    return [f"{method} {member}={params[member]!r} was accepted"]


async def _expect_execution_refusal(
    connection: SoakConnection, method: str, params: dict[str, Any]
) -> list[str]:
    """An unsafe execution id is refused as invalid, or as naming no waiting execution."""
    try:
        await connection.call(method, params)
    except (InvalidParams, StaleResponse):
        return []
    except RpcError as error:
        return [f"{method} executionId={params['executionId']!r}: {error!r}"]
    return [f"{method} executionId={params['executionId']!r} was accepted"]
