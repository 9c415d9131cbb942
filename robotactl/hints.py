"""What to do next, for the application errors a person meets most (PROTOCOL.md §3).

`hint_for` maps an error's code and data to one sentence naming the robotactl command (or the
config.toml key) that helps; `call_daemon` and `run_with_daemon` attach it to every
`RpcFailed`, which prints it after the error. A pure function over values: nothing here
talks to the daemon.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["hint_for"]


def hint_for(code: int, data: Any, *, from_environment: str | None = None) -> str | None:
    """The hint for error `code` with `data` (the error's data object), or None.
    `from_environment` is the session ``ROBOTA_SESSION`` named, if that is how the command
    was given one: a session that does not exist then says where its id came from."""
    facts: Mapping[str, Any] = data if isinstance(data, Mapping) else {}
    sid = facts.get("sessionId")
    session = f" -s {sid}" if isinstance(sid, str) else ""
    if code == -32001:
        running = "a turn" if isinstance(facts.get("turnId"), str) else "something"
        return f"{running} is running: wait for it, or stop it with `robotactl abort{session}`"
    if code == -32002:
        message_id = facts.get("messageId")
        if isinstance(message_id, str):
            return f"`robotactl show{session}` lists the messages and their ids"
        if from_environment is not None and from_environment == sid:
            return (
                "the id came from ROBOTA_SESSION: unset it to use this folder's session, or "
                "`robotactl ls` lists the sessions"
            )
        return "`robotactl ls` lists the sessions"
    if code == -32005:
        return (
            f"an execution is parked: `robotactl show{session}` shows it; answer it with "
            f"`robotactl approve{session}` or `robotactl deny{session}`, or give it up with "
            f"`robotactl abandon{session}`"
        )
    if code == -32009:
        return "the history was left as it was"
    if code == -32010:
        return "choose another id, or remove that session with `robotactl rm ID`"
    if code == -32011:
        return (
            f"the request was already answered or the turn has ended; "
            f"`robotactl show{session}` shows where it stands"
        )
    if code == -32012:
        return "events were dropped from the replay buffer; subscribe without afterSeq"
    if code == -32015:
        return (
            "a tool was running when robotad stopped, so whether it took effect is unknown; "
            f"check, then close the execution with `robotactl abandon{session}`"
        )
    if code == -32016:
        where = facts.get("path")
        place = f" ({where} in robotad's state folder)" if isinstance(where, str) else ""
        return (
            f"robotad could not write to disk{place}; nothing was half-written: free space "
            "or fix the folder, then try again (no restart needed)"
        )
    limit = facts.get("limit")
    if code == -32600 and isinstance(limit, int) and not isinstance(limit, bool):
        return (
            f"robotad reads at most {limit:,} bytes per message (robotad --max-message-bytes): "
            "send less, such as a shorter prompt or a smaller file"
        )
    if code == -32013 and facts.get("mode") == "auto":
        return "`auto` mode needs a [classifier] command in robotad's config.toml"
    if code == -32007:
        return _provider_hint(facts)
    return None


def _provider_hint(facts: Mapping[str, Any]) -> str | None:
    """What to do about a model call that failed (-32007), by the cause its reason names."""
    reason, name = facts.get("reason"), facts.get("provider")
    if not isinstance(reason, str) or not isinstance(name, str):
        return None
    table = name if re.fullmatch(r"[A-Za-z0-9_-]+", name) else json.dumps(name)
    where = f"[providers.{table}] of robotad's config.toml (then restart robotad)"
    if any(cause in reason for cause in _UNREACHABLE):
        return (
            f"nothing answers at that address: start the model server, or fix base_url in {where}"
        )
    if "(idle timeout)" in reason:
        return (
            "the model sent nothing for that long: give a new session more time "
            f"(`robotactl new --idle-timeout SECONDS`), or raise idle_timeout_ms in {where}"
        )
    if "HTTP 401" in reason or "HTTP 403" in reason:
        return f"the server refused the API key: check api_key_env or api_key_command in {where}"
    if "not an event stream" in reason:
        return (
            "base_url leads to a web page, not the model API (an OpenAI-compatible one "
            f"usually ends in /v1): fix it in {where}"
        )
    return None


#: The reasons of a model server that cannot be reached at all (`robotad.providers.failures`).
_UNREACHABLE = ("connection refused", "cannot resolve the host name", "no connection within")
