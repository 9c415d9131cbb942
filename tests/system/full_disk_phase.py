"""The soak's full-disk phase: a real full disk under several sessions, refusal after refusal.

`full_disk_phase` runs robotad with its state folder on a 4 MiB tmpfs (`tests.full_disk`),
gives each of `SESSIONS` sessions a saved turn, fills the file system to the last byte and
runs `refusals` turns round robin. Every one must be refused with StorageFailed (-32016)
naming a file relative to the state folder and the cause, while the other sessions keep being
served and every record stays byte for byte what it was. Then the space comes back and each
session runs a turn again, without a restart, and its record holds both turns: a refused turn
was refused before it began, so nothing of it entered history.

It returns a `FullDiskOutcome`: how many refusals were seen, the problems found, and why the
phase was skipped when a tmpfs cannot be mounted (not root). `summary` is the line the soak
prints: ``records intact after N full-disk refusals``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import trio

from protocol.errors import RpcError, StorageFailed
from robotad.storage.record import Valid, decode_record
from tests.daemon_helpers import IO_TIMEOUT, DaemonHome, RunningDaemon, connect, running_daemon
from tests.full_disk import fill, mount_refusal, unmount

__all__ = ["SESSIONS", "FullDiskOutcome", "full_disk_phase"]

SESSIONS = 4


@dataclass
class FullDiskOutcome:
    refusals: int = 0
    problems: list[str] = field(default_factory=list)
    skipped: str | None = None

    @property
    def summary(self) -> str:
        if self.skipped is not None:
            return f"full-disk phase skipped: {self.skipped}"
        verdict = "intact" if not self.problems else "NOT intact"
        return f"records {verdict} after {self.refusals} full-disk refusals"


async def full_disk_phase(root: Path, refusals: int) -> FullDiskOutcome:
    """Run the phase in a daemon home under `root` (see the module doc)."""
    home = DaemonHome(root)
    outcome = FullDiskOutcome()
    refused = mount_refusal(home.state_dir)
    if refused is not None:
        outcome.skipped = refused
        return outcome
    try:
        with running_daemon(home) as daemon:
            with trio.fail_after(IO_TIMEOUT + refusals):
                await _drive(home, daemon, refusals, outcome)
    finally:
        unmount(home.state_dir)
    return outcome


async def _drive(
    home: DaemonHome, daemon: RunningDaemon, refusals: int, outcome: FullDiskOutcome
) -> None:
    problems = outcome.problems
    async with connect(daemon) as client:
        steps = [{"text": f"reply {n}"} for n in range(refusals + 2)]
        sessions = []
        for _ in range(SESSIONS):
            created = await client.call("session/create", {"cwd": str(home.root), "script": steps})
            sessions.append(created["sessionId"])
            await client.call("session/run", {"sessionId": sessions[-1], "prompt": "before"})
        saved = {sid: home.record_path(sid).read_bytes() for sid in sessions}
        filler = fill(home.state_dir)
        for n in range(refusals):
            session_id = sessions[n % SESSIONS]
            try:
                await client.call("session/run", {"sessionId": session_id, "prompt": f"full {n}"})
                problems.append(f"turn {n} of {session_id} was not refused on a full disk")
            except StorageFailed as exc:
                outcome.refusals += 1
                data = exc.data or {}
                if Path(str(data.get("path", "/"))).is_absolute() or not data.get("reason"):
                    problems.append(f"refusal {n} does not name a relative path and a reason")
            except RpcError as exc:
                problems.append(f"turn {n} of {session_id} failed {exc.code}, not -32016")
            other = sessions[(n + 1) % SESSIONS]
            await client.call("session/get", {"sessionId": other})  # still served
            if home.record_path(session_id).read_bytes() != saved[session_id]:
                problems.append(f"record of {session_id} changed on refusal {n}")
        filler.unlink()
        for session_id in sessions:
            done = await client.call("session/run", {"sessionId": session_id, "prompt": "after"})
            stored = decode_record(home.record_path(session_id).read_bytes())
            if done["status"] != "completed" or not isinstance(stored, Valid):
                problems.append(f"{session_id} did not go on once the space came back")
                continue
            prompts = [m.content for m in stored.record.messages if m.role == "user"]
            if prompts != ["before", "after"]:
                problems.append(f"record of {session_id} holds prompts {prompts}")
