"""Where keys and timeouts come from (PROTOCOL §10.3): ``api_key_command``, robotad's own
environment, the message that says so, and the per-provider ``idle_timeout_ms`` /
``connect_timeout_ms``."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from protocol.validate import ValidationFailed
from robotad.config import Config, ProviderConfig, decode_config
from robotad.providers import ProviderUnavailable, build_provider, keys
from robotad.providers.openai import OpenAIProvider
from robotad.providers.scripted import ScriptedProvider

from .conftest import SECRET_KEY


def _openai(**table: object) -> Config:
    return Config(providers={"gpt": ProviderConfig(kind="openai", **table)})  # type: ignore[arg-type]


async def test_api_key_command_gives_the_key_from_its_first_line() -> None:
    config = _openai(api_key_command=f"printf '{SECRET_KEY}\\nsecond line\\n'")
    provider = build_provider("gpt", config, environ={})
    try:
        assert isinstance(provider, OpenAIProvider)
        assert provider._client.api_key == SECRET_KEY
    finally:
        await provider.aclose()


async def test_api_key_command_wins_over_the_variable() -> None:
    config = _openai(api_key_env="MY_KEY", api_key_command="echo from-command")
    provider = build_provider("gpt", config, environ={"MY_KEY": "from-variable"})
    try:
        assert isinstance(provider, OpenAIProvider)
        assert provider._client.api_key == "from-command"
    finally:
        await provider.aclose()


@pytest.mark.parametrize(
    ("command", "said"),
    [
        (f"echo {SECRET_KEY}; exit 3", "exited with status 3"),
        ("printf '\\n'", "printed no key"),
    ],
)
def test_a_failing_key_command_is_refused_without_its_output(command: str, said: str) -> None:
    with pytest.raises(ProviderUnavailable, match=said) as caught:
        build_provider("gpt", _openai(api_key_command=command), environ={})
    assert "api_key_command of provider 'gpt'" in str(caught.value)
    assert SECRET_KEY not in str(caught.value)


def _alive(pid: int) -> bool:
    """Whether `pid` runs (an unreaped zombie does not count)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rpartition(")")[2].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _ends_soon(pid: int) -> bool:
    deadline = time.monotonic() + 5
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def test_a_key_command_that_overruns_is_killed_with_what_it_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It used to kill only the shell: what the command started ran on, past robotad's own
    end."""
    monkeypatch.setattr(keys, "KEY_COMMAND_TIMEOUT", 0.5)
    pid_file = tmp_path / "pid"
    command = f"sh -c 'echo $$ > {pid_file}; exec sleep 60' & wait"
    with pytest.raises(ProviderUnavailable, match=r"did not finish within 0\.5 s"):
        build_provider("gpt", _openai(api_key_command=command), environ={})
    assert _ends_soon(int(pid_file.read_text()))


@pytest.mark.parametrize("ending", ["echo sk-ok", "exit 3"], ids=["key-given", "failed"])
def test_a_key_command_leaves_nothing_running_even_in_a_group_of_its_own(
    tmp_path: Path, ending: str
) -> None:
    """What a key command left in the background (here in a process group of its own, as GNU
    timeout makes) ran on when it had printed its key or failed, and a timeout's kill missed
    it: its whole session is stopped now, however the command ended."""
    pid_file = tmp_path / "pid"
    python = (
        f"import os, time; os.setpgid(0, 0); open({str(pid_file)!r}, 'w')"
        ".write(str(os.getpid())); time.sleep(60)"
    )
    command = f'{sys.executable} -c "{python}" </dev/null >/dev/null 2>&1 & '
    command += f"while [ ! -s {pid_file} ]; do sleep 0.01; done; {ending}"
    try:
        if ending.startswith("echo"):
            assert keys._run_key_command("p", command, os.environ) == "sk-ok"
        else:
            with pytest.raises(keys.KeyUnavailable, match="exited with status 3"):
                keys._run_key_command("p", command, os.environ)
        assert _ends_soon(int(pid_file.read_text()))
    finally:
        with contextlib.suppress(OSError, ValueError):
            os.kill(int(pid_file.read_text()), signal.SIGKILL)


def test_a_key_command_that_prints_without_end_keeps_only_its_first_bytes() -> None:
    """Its output is capped, so a runaway command cannot fill robotad's memory."""
    key = keys.resolve_api_key(
        "gpt",
        command="head -c 1000000 /dev/zero | tr '\\0' k; echo",
        variable=None,
        required=True,
        environ={"PATH": os.environ["PATH"]},
    )
    assert key == "k" * keys.KEY_OUTPUT_LIMIT


@pytest.mark.parametrize(
    ("table", "environ", "source"),
    [
        ({"api_key_env": "GPT_KEY"}, {"GPT_KEY": "sk-one two"}, "from GPT_KEY"),
        ({"api_key_env": "GPT_KEY"}, {"GPT_KEY": "sk-pasted\u2026"}, "from GPT_KEY"),
        ({"api_key_command": "printf 'sk-tab\\tkey\\n'"}, {}, "from api_key_command"),
    ],
)
def test_a_key_that_cannot_be_sent_is_refused_naming_its_source_never_the_key(
    table: dict[str, str], environ: dict[str, str], source: str
) -> None:
    """A key with a space, a pasted non-ASCII character or a control character cannot travel
    in an HTTP header: refused as the provider being unavailable (a located InvalidParams at
    session/create), not an internal error, and the message never quotes it."""
    with pytest.raises(ProviderUnavailable, match="cannot be sent") as caught:
        build_provider("gpt", _openai(**table), environ=environ)
    message = str(caught.value)
    assert source in message
    assert "sk-" not in message


def test_a_missing_key_says_whose_environment_and_how_to_give_one() -> None:
    with pytest.raises(ProviderUnavailable) as caught:
        build_provider("gpt", _openai(api_key_env="GPT_KEY"), environ={})
    message = str(caught.value)
    assert "GPT_KEY is not set in robotad's environment" in message
    assert "api_key_command in [providers.gpt]" in message
    assert "~/.config/robota/env" in message
    assert "EnvironmentFile" in message


def test_a_key_variable_set_but_empty_is_not_called_unset() -> None:
    """``GPT_KEY=`` in robotad's environment (a ``KEY=`` line in the env file, an ``export
    KEY=$(pass show x)`` whose command failed) was refused as "not set", with advice about
    exporting it before the start: the one thing the person had done."""
    with pytest.raises(ProviderUnavailable) as caught:
        build_provider("gpt", _openai(api_key_env="GPT_KEY"), environ={"GPT_KEY": ""})
    message = str(caught.value)
    assert "GPT_KEY is set in robotad's environment, but empty" in message
    assert "not set" not in message
    assert "api_key_command in [providers.gpt]" in message


def test_timeouts_default_per_protocol_and_reach_the_provider() -> None:
    table = ProviderConfig(kind="scripted")
    assert (table.idle_timeout_ms, table.connect_timeout_ms) == (120_000, 10_000)
    config = decode_config(
        '[providers.slow]\nkind = "scripted"\nidle_timeout_ms = 2500\nconnect_timeout_ms = 700\n'
    )
    provider = build_provider("slow", config)
    assert isinstance(provider, ScriptedProvider)
    assert provider.idle_timeout == 2.5


async def test_the_connect_timeout_reaches_the_sdk() -> None:
    config = _openai(base_url="http://127.0.0.1:1/v1", connect_timeout_ms=1500)
    provider = build_provider("gpt", config, environ={})
    try:
        assert isinstance(provider, OpenAIProvider)
        assert provider.connect_timeout == 1.5
        assert provider.idle_timeout == 120.0
    finally:
        await provider.aclose()


def test_bad_timeouts_are_located_config_errors() -> None:
    text = (
        '[providers.x]\nkind = "openai"\nidle_timeout_ms = 0\n'
        'connect_timeout_ms = "soon"\napi_key_command = ""\n'
    )
    with pytest.raises(ValidationFailed) as caught:
        decode_config(text)
    paths = sorted(issue["path"] for issue in caught.value.issues)
    assert paths == [
        "providers.x.api_key_command",
        "providers.x.connect_timeout_ms",
        "providers.x.idle_timeout_ms",
    ]
