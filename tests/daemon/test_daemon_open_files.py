"""Out of file descriptors, through a real robotad: a create either makes the session or
answers StorageFailed naming the cause, and leaves nothing of itself behind."""

from __future__ import annotations

import os
import resource
from pathlib import Path

import pytest
import trio

from protocol.errors import SessionNotFound, StorageFailed
from tests.daemon_helpers import IO_TIMEOUT, DaemonHome, connect, running_daemon


async def test_a_create_that_runs_out_of_descriptors_is_storage_failed_and_not_made(
    tmp_path: Path,
) -> None:
    """PROTOCOL §10.1: with the daemon's descriptors nearly used up, creates used to answer
    -32603 (the journal could not be opened) for sessions whose records were written anyway:
    told "internal error", a retry was SessionExists. Now each create is all or nothing, and
    a refused one is -32016 saying "too many open files"."""
    home = DaemonHome(tmp_path / "home")
    created: list[str] = []
    refused: list[tuple[str, StorageFailed]] = []
    with running_daemon(home) as daemon, trio.fail_after(IO_TIMEOUT):
        pid = daemon.process.pid
        async with connect(daemon) as client:
            in_use = len(os.listdir(f"/proc/{pid}/fd"))
            resource.prlimit(pid, resource.RLIMIT_NOFILE, (in_use + 12, in_use + 12))
            for index in range(40):
                session_id = f"s{index}"
                try:
                    await client.call(
                        "session/create", {"cwd": str(tmp_path), "sessionId": session_id}
                    )
                except StorageFailed as exc:
                    refused.append((session_id, exc))
                else:
                    created.append(session_id)
            status = await client.call("daemon/status")
            for session_id in created:  # each frees the descriptors its session held
                await client.call("session/close", {"sessionId": session_id})
            for session_id, _ in refused:
                with pytest.raises(SessionNotFound):
                    await client.call("session/get", {"sessionId": session_id})
            listed = {row["sessionId"] for row in (await client.call("session/list"))["sessions"]}
    assert created
    assert refused
    assert listed == set(created)
    assert status["sessions"]["loaded"] == len(created)
    assert all("too many open files" in str(exc) for _, exc in refused), refused
    records = {p.stem for p in (home.state_dir / "sessions").iterdir()}
    journals = {p.name for p in (home.state_dir / "journal").iterdir()}
    logs = {p.name.split(".")[0] for p in (home.state_dir / "logs").iterdir()}
    assert records == set(created)  # nothing of a refused create stays on disk
    assert journals <= set(created)
    assert logs <= set(created)


async def test_a_journal_folder_that_cannot_be_opened_is_storage_failed(tmp_path: Path) -> None:
    """PROTOCOL §10.1: a session whose journal folder the system will not open (here a file
    stands in its place) answers StorageFailed naming ``journal/<id>`` and why; it was
    -32603."""
    home = DaemonHome(tmp_path / "home")
    with running_daemon(home) as daemon, trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            await client.call("session/create", {"cwd": str(tmp_path), "sessionId": "s"})
            await client.call("session/close", {"sessionId": "s"})
            folder = home.state_dir / "journal" / "s"
            folder.rmdir()
            folder.write_text("not a folder")
            with pytest.raises(StorageFailed) as refused:
                await client.call("session/open", {"sessionId": "s"})
            status = await client.call("daemon/status")
    assert refused.value.data == {
        "sessionId": "s",
        "path": "journal/s",
        "reason": "a storage folder's path is not a folder",
    }
    assert status["sessions"]["loaded"] == 0
