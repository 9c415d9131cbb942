"""What must hold of a daemon's stored state, read straight from its files.

`check_storage_offline` runs while the daemon is dead (after a SIGKILL): every session record
decodes `Valid` (G-007: no torn or half-written record under its name), every journal decodes
once a torn final line — an append that never returned, which the journal's own ``open()``
cuts away — is set aside, and every session log decodes line by line once its torn final line
is set aside the same way.

`check_settled` runs after a soak that ended cleanly: records valid, every journal and every
log line decodes, and every effect marker appended no more often than its approvals allowed.
Every record's ``turnCount`` is at least the completed turns its clients were told of
(nothing acknowledged is lost). Without crashes (`exact`) also: it equals them (G-010), every
log replays complete (G-145, G-151), every effect ran exactly as
often as approved ("no effect ran twice", G-084). After crashes a log may honestly end a
provider call or a tool call a kill cut off: `log_gaps` lists those.

Both return a list of problems (empty when everything holds), each naming the file.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from pathlib import Path

from robotad.storage.journal import JournalCorrupt, decode_journal
from robotad.storage.log_files import FileLogSource
from robotad.storage.log_replay import validate_log
from robotad.storage.record import Valid, decode_record
from robotad.storage.session_log import decode_lines
from tests.system.daemon_process import DaemonHome

__all__ = [
    "check_settled",
    "check_storage_offline",
    "effect_problems",
    "log_gaps",
    "record_problems",
]


def record_problems(state_dir: Path) -> list[str]:
    problems = []
    for path in sorted((state_dir / "sessions").glob("*.json")):
        outcome = decode_record(path.read_bytes())
        if not isinstance(outcome, Valid):
            problems.append(f"{path.name}: {outcome}")
    return problems


def _without_torn_tail(data: bytes) -> bytes:
    return data[: data.rfind(b"\n") + 1]


def journal_problems(state_dir: Path, *, allow_torn_tail: bool) -> list[str]:
    problems = []
    for path in sorted((state_dir / "journal").glob("*/*.jsonl")):
        data = path.read_bytes()
        if allow_torn_tail:
            data = _without_torn_tail(data)
        try:
            decode_journal(path.stem, data)
        except JournalCorrupt as corrupt:
            problems.append(f"journal {path.parent.name}/{path.name}: {corrupt.issues[:3]}")
    return problems


class _TornTailSource(FileLogSource):
    """A log read as a restarted daemon would see it: a torn final line set aside."""

    def read(self) -> bytes | None:
        data = super().read()
        return None if data is None else _without_torn_tail(data)


def log_line_problems(state_dir: Path) -> list[str]:
    problems = []
    for path in sorted((state_dir / "logs").glob("*.jsonl")):
        _, bad = decode_lines(_TornTailSource(path))
        if bad:
            problems.append(f"log {path.name}: {bad[:3]}")
    return problems


def check_storage_offline(home: DaemonHome) -> list[str]:
    """Problems of the stored state of a dead daemon (see the module docstring)."""
    return [
        *record_problems(home.state_dir),
        *journal_problems(home.state_dir, allow_torn_tail=True),
        *log_line_problems(home.state_dir),
    ]


def effect_problems(
    home: DaemonHome, granted: Mapping[str, str], session_ids: list[str], *, exact: bool
) -> list[str]:
    """Each marker appended at most (with `exact`: exactly) as often as it was granted."""
    allowed = Counter(granted.values())
    ran: Counter[str] = Counter()
    for session_id in session_ids:
        log = home.work_dir / session_id / "effects.log"
        if log.exists():
            ran.update(log.read_text().split())
    problems = [
        f"effect {marker} ran {count} times, approved {allowed[marker]} times"
        for marker, count in sorted(ran.items())
        if count > allowed[marker]
    ]
    if exact:
        problems += [
            f"effect {marker} approved {count} times, ran {ran[marker]} times"
            for marker, count in sorted(allowed.items())
            if ran[marker] != count
        ]
    return problems


def log_gaps(home: DaemonHome) -> list[str]:
    """What the session logs leave open (a provider request a kill cut off, a tool call whose
    result never came): expected after crashes, reported rather than failed."""
    gaps = []
    for path in sorted((home.state_dir / "logs").glob("*.jsonl")):
        report = validate_log(FileLogSource(path))
        gaps += [f"{path.name}: {problem}" for problem in report.problems]
    return gaps


def check_settled(
    home: DaemonHome,
    completed_by_session: Mapping[str, int],
    granted: Mapping[str, str],
    *,
    exact: bool,
) -> list[str]:
    """Problems of the stored state once every turn has settled (module docstring). Every
    record holds at least the turns its clients were told completed; with `exact` (no crash
    happened) the turn counts and effects must match the clients' view exactly; after crashes
    a reply may have died with the daemon, so effects are bounded by their approvals only."""
    problems = record_problems(home.state_dir)
    problems += journal_problems(home.state_dir, allow_torn_tail=False)
    for session_id, completed in sorted(completed_by_session.items()):
        # A turn a client was told completed is in the record (nothing acknowledged is lost);
        # after crashes the record may hold more: a reply can die with the daemon.
        outcome = decode_record(home.record_path(session_id).read_bytes())
        if not isinstance(outcome, Valid):
            continue
        stored = outcome.record.turn_count
        if stored < completed or (exact and stored != completed):
            problems.append(
                f"{session_id}: record turnCount {stored}, "
                f"clients were told {completed} turns completed"
            )
    if exact:
        for path in sorted((home.state_dir / "logs").glob("*.jsonl")):
            report = validate_log(FileLogSource(path))
            if not report.complete:
                problems.append(f"log {path.name} incomplete: {report.problems[:3]}")
    else:
        problems += [
            f"log {path.name}: {bad[:3]}"
            for path in sorted((home.state_dir / "logs").glob("*.jsonl"))
            if (bad := decode_lines(FileLogSource(path))[1])
        ]
    sessions = sorted(completed_by_session)
    problems += effect_problems(home, granted, sessions, exact=exact)
    return problems
