"""A full disk, for real (PROTOCOL.md §10.1 StorageFailed): robotad's state folder is a 4 MiB
tmpfs the test fills to the last byte.

Every refused write answers -32016 naming the file (relative to the state folder) and the
cause; the previous record stands byte for byte; the daemon goes on serving every session;
and once the space is back the same session runs again without a restart and its next save
holds everything. Skips, saying why, where a tmpfs cannot be mounted (not root)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from protocol.errors import StorageFailed
from robotad.storage.record import Valid, decode_record
from tests.daemon_helpers import (
    IO_TIMEOUT,
    PROCESS_TIMEOUT,
    Client,
    DaemonHome,
    connect,
    running_daemon,
    start_robotad,
)
from tests.full_disk import fill, small_tmpfs

from .test_daemon_lifecycle import create_waiting, log_events

#: Refused turns in a row before the space comes back.
REFUSALS = 3


async def test_a_full_disk_refuses_cleanly_and_the_session_goes_on_once_space_returns(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    home = DaemonHome(tmp_path_factory.mktemp("full-disk"))
    with small_tmpfs(home.state_dir), running_daemon(home) as daemon:
        with trio.fail_after(IO_TIMEOUT * 3):
            async with connect(daemon) as client:
                steps = [{"text": f"reply {n}"} for n in range(REFUSALS + 3)]
                created = await client.call(
                    "session/create", {"cwd": str(home.root), "script": steps}
                )
                first = created["sessionId"]
                other = (
                    await client.call(
                        "session/create", {"cwd": str(home.root), "script": [{"text": "b"}]}
                    )
                )["sessionId"]
                done = await client.call("session/run", {"sessionId": first, "prompt": "one"})
                assert done["status"] == "completed"
                before = home.record_path(first).read_bytes()

                filler = fill(home.state_dir)
                refusals: list[StorageFailed] = []
                for n in range(REFUSALS):
                    with pytest.raises(StorageFailed) as refused:
                        await client.call("session/run", {"sessionId": first, "prompt": f"r{n}"})
                    refusals.append(refused.value)
                    assert home.record_path(first).read_bytes() == before
                with pytest.raises(StorageFailed) as create_refused:
                    await client.call("session/create", {"cwd": str(home.root), "script": []})
                # Every other session is still served.
                info = await client.call("session/get", {"sessionId": other})
                history = await client.call("session/history", {"sessionId": other})
                status = await client.call("daemon/status", {})

                filler.unlink()  # the space comes back: no restart
                again = await client.call("session/run", {"sessionId": first, "prompt": "two"})
                after = decode_record(home.record_path(first).read_bytes())

    for error in refusals:
        assert error.code == -32016
        assert error.data is not None
        assert error.data["sessionId"] == first
        assert not Path(error.data["path"]).is_absolute()
        assert error.data["path"].startswith(("journal/", "sessions/", "logs/"))
        assert error.data["reason"] == "no space left on device"
    create_data = create_refused.value.data or {}
    assert create_data["path"].startswith("sessions/")
    assert create_data["reason"] == "no space left on device"
    assert info["sessionId"] == other
    assert history["total"] == 0
    assert status["sessions"]["loaded"] >= 2
    assert again["status"] == "completed"
    assert isinstance(after, Valid)
    contents = [m.content for m in after.record.messages]
    assert contents.count("one") == 1
    assert contents[-2:] == ["two", again["response"]]


async def test_a_close_that_cannot_save_says_so_and_keeps_the_session(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """The disk fills while a turn streams, so its save is refused. Closing the session then
    answered ``closed`` and dropped that turn; now the close is refused too (-32016), the
    session stays loaded with the turn, and once space is back the close saves it."""
    home = DaemonHome(tmp_path_factory.mktemp("full-close"))
    with small_tmpfs(home.state_dir), running_daemon(home) as daemon:
        with trio.fail_after(IO_TIMEOUT * 3):
            async with connect(daemon) as client:
                steps = [{"text": "slow " * 20, "chunks": 20, "delayMs": 50}]
                created = await client.call(
                    "session/create", {"cwd": str(home.root), "script": steps}
                )
                session_id = created["sessionId"]
                await client.call("session/subscribe", {"sessionId": session_id})
                filler: list[Path] = []

                async def run() -> None:
                    with pytest.raises(StorageFailed):
                        await client.call("session/run", {"sessionId": session_id, "prompt": "p"})

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(run)
                    await client.wait_for_event(session_id, "text_delta")
                    filler.append(fill(home.state_dir))
                with pytest.raises(StorageFailed) as refused:
                    await client.call("session/close", {"sessionId": session_id})
                still = await client.call("session/get", {"sessionId": session_id})
                filler[0].unlink()
                closed = await client.call("session/close", {"sessionId": session_id})
                stored = decode_record(home.record_path(session_id).read_bytes())
    assert refused.value.data is not None
    assert refused.value.data["path"] == f"sessions/{session_id}.json"
    assert still["messageCount"] == 2  # the prompt and the reply the refused save held
    assert closed == {"closed": True}
    assert isinstance(stored, Valid)
    assert [m.content for m in stored.record.messages if m.role == "user"] == ["p"]


async def test_an_abandon_that_cannot_save_says_so_and_the_execution_still_waits(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    """G-087, G-099: an abandon is done only once its closed round is saved. A refused save
    answered StorageFailed while the session had abandoned the execution anyway: nothing
    pending, a retry StaleResponse, the log saying ``execution_abandoned``, and after a
    restart the execution waited again. Now history is put back, the execution still waits
    and nothing is logged abandoned; once space is back the same abandon goes through."""
    home = DaemonHome(tmp_path_factory.mktemp("full-abandon"))
    with small_tmpfs(home.state_dir), running_daemon(home) as daemon:
        with trio.fail_after(IO_TIMEOUT * 3):
            async with connect(daemon) as client:
                session_id = await create_waiting(client, tmp_path)
                ref = {"sessionId": session_id}
                pending = (await client.call("session/pending", ref))["pending"]
                abandon = {**ref, "executionId": pending["executionId"]}
                filler = fill(home.state_dir)
                with pytest.raises(StorageFailed):
                    await client.call("session/abandon", abandon)
                still = (await client.call("session/pending", ref))["pending"]
                history = (await client.call("session/history", ref))["messages"]
                events = log_events(home, session_id)
                filler.unlink()
                await client.call("session/abandon", abandon)
                after = (await client.call("session/pending", ref))["pending"]
    assert still == pending
    assert [m["role"] for m in history] == ["user", "assistant"]
    assert "execution_abandoned" not in events
    assert after is None


async def test_a_permission_change_that_cannot_save_says_so_and_changes_nothing(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    """G-010's rule for a settings change: setPermissionMode and a session addRule answer
    once saved. A refused save used to be logged only: "plan" and a deny rule were
    acknowledged, and after a SIGKILL the session was back in bypassPermissions without
    the rule. Now each answers StorageFailed and changes nothing; once space is back the
    same changes are acknowledged, and they survive a SIGKILL."""
    home = DaemonHome(tmp_path_factory.mktemp("full-mode"))
    plan = {"mode": "plan"}
    deny = {"rule": "Bash", "kind": "deny", "scope": "session"}
    with small_tmpfs(home.state_dir):
        daemon = start_robotad(home)
        try:
            with trio.fail_after(IO_TIMEOUT * 3):
                async with connect(daemon) as client:
                    params = {"cwd": str(tmp_path), "permissionMode": "bypassPermissions"}
                    ref = {"sessionId": (await client.call("session/create", params))["sessionId"]}
                    filler = fill(home.state_dir)
                    for method, change in (("setPermissionMode", plan), ("addRule", deny)):
                        with pytest.raises(StorageFailed):
                            await client.call(f"session/{method}", {**ref, **change})
                    refused = await _settings(client, ref)
                    filler.unlink()
                    await client.call("session/setPermissionMode", {**ref, **plan})
                    await client.call("session/addRule", {**ref, **deny})
        finally:
            daemon.process.kill()
            daemon.process.wait(PROCESS_TIMEOUT)
        with running_daemon(home) as again, trio.fail_after(IO_TIMEOUT):
            async with connect(again) as client:
                kept = await _settings(client, ref)
    assert (refused["permissionMode"], refused["permissions"]["deny"]) == ("bypassPermissions", [])
    assert (kept["permissionMode"], kept["permissions"]["deny"]) == ("plan", ["Bash"])


async def _settings(client: Client, ref: dict[str, str]) -> dict[str, Any]:
    """The session's settings as its export shows them (the live ones for a loaded session)."""
    settings: dict[str, Any] = (await client.call("session/export", ref))["artifact"]["record"][
        "settings"
    ]
    return settings
