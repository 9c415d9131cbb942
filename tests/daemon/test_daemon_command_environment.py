"""A model-run command never gets a configured provider's key variable, whatever it is called
(``api_key_env``): the daemon hands the names to Bash, on top of the secret-looking ones."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from tests.daemon_helpers import IO_TIMEOUT, DaemonHome, connect, running_daemon

KEY_VARIABLE = "LOCAL_LLAMA_CREDS"  # no secret-looking word in it
PLANTED = "creds-7c1e"


async def test_a_providers_key_variable_never_reaches_a_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_VARIABLE, PLANTED)
    monkeypatch.setenv("LOCAL_LLAMA_MODEL", "visible")
    home = DaemonHome(tmp_path / "home")
    home.write_config(
        '[providers.local]\nkind = "openai"\nbase_url = "http://127.0.0.1:9/v1"\n'
        f'api_key_env = "{KEY_VARIABLE}"\n'
    )
    command = f'echo "key=[${KEY_VARIABLE}] model=[$LOCAL_LLAMA_MODEL]"'
    script = [{"toolCalls": [{"name": "Bash", "arguments": {"command": command}}]}, {"text": "ok"}]
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with running_daemon(home) as daemon, trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            info = await client.call(
                "session/create",
                {"cwd": str(workspace), "script": script, "permissionMode": "bypassPermissions"},
            )
            await client.call("session/run", {"sessionId": info["sessionId"], "prompt": "go"})
            history = await client.call("session/history", {"sessionId": info["sessionId"]})
    [tool] = [m for m in history["messages"] if m["role"] == "tool"]
    assert "key=[]" in tool["content"]
    assert "model=[visible]" in tool["content"]
    assert PLANTED not in tool["content"]
