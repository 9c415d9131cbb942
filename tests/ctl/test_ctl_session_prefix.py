"""A session named by a unique prefix of its id (decision 84): the matching rule on values, the
no-listing shortcut of a full generated id, and robotactl's one-shot and streaming commands
against a real robotad."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import pytest

from protocol.blocking_client import BlockingClient
from protocol.methods import SessionList, SessionSummary
from protocol.peer import JsonRpcPeer
from protocol.shapes import SessionInfo, new_id
from robotactl.exit_codes import ExitCode
from robotactl.sessions import (
    AmbiguousSession,
    is_full_id,
    match_session_id,
    resolve_session,
    resolve_session_streaming,
)

from .conftest import Ctl, RunningDaemon
from .ctl_helpers import decoded, new_session, sock

# -- the rule ------------------------------------------------------------------------------------

IDS = ["proj", "proj-alpha", "proj-beta", "other"]


def test_an_exact_id_wins_even_when_it_begins_others() -> None:
    assert match_session_id("proj", IDS) == "proj"


def test_a_unique_prefix_names_its_session() -> None:
    assert match_session_id("proj-a", IDS) == "proj-alpha"
    assert match_session_id("o", IDS) == "other"


def test_a_prefix_of_several_is_ambiguous_and_lists_them() -> None:
    with pytest.raises(AmbiguousSession) as raised:
        match_session_id("proj-", IDS)
    assert raised.value.matches == ["proj-alpha", "proj-beta"]
    assert raised.value.exit_code == ExitCode.ERROR
    assert raised.value.format_message() == (
        '"proj-" names 2 sessions: proj-alpha, proj-beta; give more of the id'
    )


def test_an_ambiguous_error_shortens_long_ids_and_lists_only_a_few() -> None:
    ids = [f"3f{index}{'0' * 29}" for index in range(6)]
    with pytest.raises(AmbiguousSession) as raised:
        match_session_id("3f", ids)
    assert raised.value.format_message() == (
        '"3f" names 6 sessions: 3f00000000…, 3f10000000…, 3f20000000…, 3f30000000…, '
        "…; give more of the id"
    )


def test_text_that_begins_no_id_is_passed_on_unchanged() -> None:
    assert match_session_id("nope", IDS) == "nope"
    assert match_session_id("proj", []) == "proj"


def test_only_the_generated_form_is_a_full_id() -> None:
    assert is_full_id(new_id())
    assert not is_full_id(new_id()[:31])
    assert not is_full_id(new_id().upper())
    assert not is_full_id(f"{new_id()}0")
    assert not is_full_id("proj-alpha")


def _summary(session_id: str) -> SessionSummary:
    return SessionSummary(
        session_id=session_id,
        cwd="/w",
        created_at=None,
        updated_at=None,
        message_count=0,
        loaded=False,
        running=False,
        waiting=False,
        status="ok",
    )


class Listing:
    """Answers ``session/list`` with `ids` (blocking and trio alike) and counts what it was
    asked."""

    def __init__(self, *ids: str) -> None:
        self.listing = SessionList(sessions=[_summary(session_id) for session_id in ids])
        self.asked: list[str] = []

    def request(self, method: str, params: Any, **_: Any) -> SessionList:
        self.asked.append(method)
        return self.listing

    async def request_streaming(self, method: str, params: Any, **_: Any) -> SessionList:
        return self.request(method, params)


def test_a_full_id_is_used_without_listing_and_a_prefix_is_listed() -> None:
    full = new_id()
    # A full id that is also a prefix of a longer stored id is still used as given.
    daemon = Listing(f"{full}-copy", "abc123")
    client = cast(BlockingClient, daemon)
    assert resolve_session(client, full) == full
    assert daemon.asked == []
    assert resolve_session(client, "abc") == "abc123"
    assert daemon.asked == ["session/list"]


async def test_the_streaming_client_resolves_alike() -> None:
    full = new_id()
    daemon = Listing(f"{full}-copy", "abc123")
    peer = cast(JsonRpcPeer, type("Peer", (), {"request": daemon.request_streaming})())
    assert await resolve_session_streaming(peer, full) == full
    assert daemon.asked == []
    assert await resolve_session_streaming(peer, "abc") == "abc123"
    with pytest.raises(AmbiguousSession):
        await resolve_session_streaming(peer, "")
    assert daemon.asked == ["session/list", "session/list"]


# -- robotactl against robotad -------------------------------------------------------------------


@pytest.fixture
def sessions(ctl: Ctl, robotad: RunningDaemon, work: Path) -> dict[str, str]:
    """Sessions ``proj`` (also a prefix of the next two), ``proj-alpha``, ``proj-beta`` and
    one with a generated id, each replying its own name; name → id."""
    made = {
        name: new_session(ctl, robotad, work, [{"text": name}], "--id", name)
        for name in ("proj", "proj-alpha", "proj-beta")
    }
    made["generated"] = new_session(ctl, robotad, work, [{"text": "generated"}])
    return made


def test_show_takes_a_unique_prefix_and_an_exact_id_wins(
    ctl: Ctl, robotad: RunningDaemon, sessions: dict[str, str]
) -> None:
    def shown(*args: str, **env: str) -> str:
        """The id in the first line `show` prints: ``session ID  CWD  …``."""
        result = ctl(*sock(robotad), "show", *args, NO_COLOR="1", **env)
        assert result.returncode == 0, result.stderr
        return result.stdout.split()[1]

    assert shown("-s", "proj-al") == "proj-alpha"
    assert shown("-s", sessions["generated"][:6]) == sessions["generated"]
    assert shown(ROBOTA_SESSION="proj-b") == "proj-beta"
    assert shown("-s", "proj") == "proj"  # exact, though it also begins proj-alpha and -beta
    # fork's source is a session named; its --id is a new name, taken as given.
    forked = decoded(
        ctl(*sock(robotad), "--json", "fork", "-s", "proj-al", "--id", "proj-a"), SessionInfo
    )
    assert forked.session_id == "proj-a"
    assert shown("-s", "proj-a") == "proj-a"


def test_an_ambiguous_prefix_exits_1_naming_the_sessions(
    ctl: Ctl, robotad: RunningDaemon, sessions: dict[str, str]
) -> None:
    result = ctl(*sock(robotad), "show", "-s", "proj-")
    assert (result.returncode, result.stdout) == (ExitCode.ERROR, "")
    said, _, named = result.stderr.rstrip("\n").partition(" sessions: ")
    assert said == 'robotactl: "proj-" names 2'
    listed, _, advice = named.partition("; ")
    assert (sorted(listed.split(", ")), advice) == (
        ["proj-alpha", "proj-beta"],
        "give more of the id",
    )
    as_json = ctl(*sock(robotad), "--json", "show", "-s", "proj-")
    assert as_json.returncode == ExitCode.ERROR
    error = json.loads(as_json.stderr)["error"]
    assert set(error) == {"message"}
    assert error["message"].startswith('"proj-" names 2 sessions: ')


def test_a_prefix_of_no_session_gets_robotads_own_not_found(
    ctl: Ctl, robotad: RunningDaemon, sessions: dict[str, str]
) -> None:
    result = ctl(*sock(robotad), "--json", "show", "-s", "zzz")
    assert result.returncode == ExitCode.ERROR
    error = json.loads(result.stderr)["error"]
    assert (error["code"], error["data"]) == (-32002, {"sessionId": "zzz"})


def test_a_streaming_command_takes_a_unique_prefix(
    ctl: Ctl, robotad: RunningDaemon, sessions: dict[str, str]
) -> None:
    result = ctl(*sock(robotad), "run", "-s", "proj-be", "hello")
    assert (result.returncode, result.stdout) == (ExitCode.COMPLETED, "proj-beta\n"), result.stderr
    refused = ctl(*sock(robotad), "run", "-s", "proj-", "hello")
    assert refused.returncode == ExitCode.ERROR
    assert 'robotactl: "proj-" names 2 sessions' in refused.stderr
    listing = decoded(ctl(*sock(robotad), "--json", "ls"), SessionList)
    counts = {entry.session_id: entry.message_count for entry in listing.sessions}
    assert counts["proj-beta"] == 2
    assert counts["proj-alpha"] == counts["proj"] == 0


def test_rm_and_mcp_take_a_unique_prefix(
    ctl: Ctl, robotad: RunningDaemon, sessions: dict[str, str]
) -> None:
    assert ctl(*sock(robotad), "mcp", "-s", "zzz").returncode == ExitCode.ERROR  # -32002
    listed = ctl(*sock(robotad), "--json", "mcp", "-s", "proj-al")
    assert listed.returncode == 0, listed.stderr
    removed = ctl(*sock(robotad), "rm", "--force", "proj-al")
    assert (removed.returncode, removed.stdout) == (0, "deleted proj-alpha\n"), removed.stderr
    listing = decoded(ctl(*sock(robotad), "--json", "ls"), SessionList)
    assert "proj-alpha" not in {entry.session_id for entry in listing.sessions}
