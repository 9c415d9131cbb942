"""``history/search`` through a real robotad when the prompt history is unusual: a file that
cannot be read is a named StorageFailed, never an internal error."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from protocol.errors import StorageFailed
from tests.daemon_helpers import IO_TIMEOUT, DaemonHome, connect, running_daemon


async def test_an_unreadable_prompt_history_is_storage_failed(tmp_path: Path) -> None:
    """G-171, PROTOCOL §10.1: a symlink in place of the prompt history is refused (never
    followed, never taken as empty) as StorageFailed (-32016) naming the file relative to
    the state folder and saying it cannot be read — it used to answer -32603; once the file
    is back, the search works again."""
    home = DaemonHome(tmp_path / "home")
    with running_daemon(home) as daemon, trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            info = await client.call("session/create", {"cwd": str(tmp_path)})
            await client.call("session/run", {"sessionId": info["sessionId"], "prompt": "walrus"})
            prompts = home.state_dir / "prompt-history.jsonl"
            moved = prompts.with_name("moved.jsonl")
            prompts.rename(moved)
            prompts.symlink_to(moved)
            with pytest.raises(StorageFailed) as refused:
                await client.call("history/search", {})
            prompts.unlink()
            moved.rename(prompts)
            found = await client.call("history/search", {})
    assert refused.value.data is not None
    assert refused.value.data["path"] == "prompt-history.jsonl"
    assert "symbolic link" in refused.value.data["reason"]
    assert refused.value.message.startswith("cannot read prompt-history.jsonl: ")
    assert [entry["prompt"] for entry in found["entries"]] == ["walrus"]
