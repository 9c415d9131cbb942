"""config.toml: strict decoding with every problem located, defaults, folders."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from robotad.config import (
    ClassifierConfig,
    Config,
    ConfigError,
    HookHandler,
    HookMatcher,
    ProviderConfig,
    config_path,
    load_config,
    read_config,
    runtime_dir,
    state_dir,
)

VALID = """
default_provider = "local"

[providers.local]
kind = "openai"
base_url = "http://127.0.0.1:11434/v1"
model = "qwen2.5-coder"
api_key_env = "LOCAL_KEY"
context_window = 32768

[providers.claude]
kind = "anthropic"
max_tokens = 4096

[permissions]
allow = ["Read(*)", "Bash(git status:*)"]
ask = []
deny = ["WebFetch(domain:example.com)"]

[classifier]
command = "my-classifier --strict"

[[hooks.PreToolUse]]
matcher = "Bash|Write"
hooks = [{ type = "command", command = "guard.sh", timeout = 5 }]

[[hooks.Stop]]
hooks = [{ type = "command", command = "notify-send done" }]
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return path


def refusals(tmp_path: Path, text: str) -> tuple[dict[str, str], ConfigError]:
    """What `load_config` refuses in config.toml `text`: each problem's message by its path,
    and the error itself."""
    with pytest.raises(ConfigError) as caught:
        load_config(_write(tmp_path, text))
    return {issue["path"]: issue["message"] for issue in caught.value.issues}, caught.value


def test_a_valid_file_decodes_every_table(tmp_path: Path) -> None:
    config = load_config(_write(tmp_path, VALID))

    assert config.default_provider == "local"
    assert config.providers["local"] == ProviderConfig(
        kind="openai",
        base_url="http://127.0.0.1:11434/v1",
        model="qwen2.5-coder",
        api_key_env="LOCAL_KEY",
        context_window=32768,
    )
    assert config.providers["claude"].max_tokens == 4096
    assert config.permissions.allow == ["Read(*)", "Bash(git status:*)"]
    assert config.permissions.deny == ["WebFetch(domain:example.com)"]
    assert config.classifier == ClassifierConfig("my-classifier --strict")
    assert config.hooks["PreToolUse"] == [
        HookMatcher(hooks=[HookHandler("command", "guard.sh", 5.0)], matcher="Bash|Write")
    ]
    assert config.hooks["Stop"][0].matcher is None


def test_a_missing_file_is_the_defaults(tmp_path: Path) -> None:
    config = load_config(tmp_path / "absent.toml")
    assert config == Config()
    assert config.default_provider == "scripted"
    assert config.providers == {}
    assert config.classifier is None
    assert config.hooks == {}


def test_what_was_read_is_said_and_so_is_a_file_not_found(tmp_path: Path) -> None:
    """`read_config` says which file it read, or that it found none and where it looked:
    what robotad's ``serving`` line shows."""
    absent = read_config(tmp_path / "absent.toml")
    assert (absent.config, absent.found) == (Config(), False)
    assert absent.source() == f"none: no file at {tmp_path / 'absent.toml'}, the defaults"
    present = read_config(_write(tmp_path, VALID))
    assert (present.found, present.source()) == (True, str(tmp_path / "config.toml"))
    assert present.config.default_provider == "local"


def test_every_bad_key_and_type_is_reported_with_its_toml_path(tmp_path: Path) -> None:
    text = """
default_provider = "nowhere"
colour = "blue"

[providers.local]
kind = "openai"
base_url = 11434
context_window = 0
api_key = "sk-do-not-echo-me"

[providers."my box"]
kind = "gemini"
base_url = "ftp://example.com"

[permissions]
allow = ["Read(*)", 3]
maybe = []

[classifier]

[[hooks.PreToolUse]]
matcher = "Bash("
hooks = [{ type = "command" }, { type = "command", command = "x", timeout = -1, shell = "zsh" }]

[[hooks.PreToolUs]]
hooks = []
"""
    located, error = refusals(tmp_path, text)
    assert set(located) == {
        "colour",
        "default_provider",
        "providers.local.base_url",
        "providers.local.context_window",
        "providers.local.api_key",
        'providers."my box".kind',
        'providers."my box".base_url',
        "permissions.allow[1]",
        "permissions.maybe",
        "classifier.command",
        "hooks.PreToolUse[0].matcher",
        "hooks.PreToolUse[0].hooks[0].command",
        "hooks.PreToolUse[0].hooks[1].timeout",
        "hooks.PreToolUse[0].hooks[1].shell",
        "hooks.PreToolUs",
    }
    assert located["colour"] == (
        "unknown key (the top level takes: default_provider, providers, permissions, "
        "defaults, instructions, classifier, hooks, mcp_servers, sandbox)"
    )
    assert located["providers.local.base_url"] == "expected string or null, got integer"
    assert "PreToolUse" in located["hooks.PreToolUs"]
    message = str(error)
    assert str(tmp_path / "config.toml") in message
    assert all(path in message for path in located)
    assert "sk-do-not-echo-me" not in message
    assert "sk-do-not-echo-me" not in repr(error.issues)


def test_a_number_past_what_a_record_holds_is_a_start_up_error(tmp_path: Path) -> None:
    """A ``[defaults] max_rounds`` goes into every new session's record, which holds at most
    2**53 - 1 (PROTOCOL §2): a larger one made sessions whose record no longer loaded
    (RecordCorrupt). Such a number is a start-up error at its path, as any bad value is."""
    text = """
[defaults]
max_rounds = 9007199254740992

[providers.local]
kind = "openai"
context_window = 9007199254740992
"""
    with pytest.raises(ConfigError) as caught:
        load_config(_write(tmp_path, text))
    assert caught.value.issues == [
        {"path": path, "message": "expected <= 9007199254740991"}
        for path in ("providers.local.context_window", "defaults.max_rounds")
    ]


def test_pattern_and_hook_problems_are_listed_beside_type_errors_in_one_pass(
    tmp_path: Path,
) -> None:
    """A user fixing the file should see every problem at once: malformed rule patterns and
    hook tables the session layer refuses used to surface only once the types were right."""
    text = """
bogus = 1
[permissions]
allow = ["Read(", "Bash(ls"]
deny = ["Write(**"]
[[hooks.PostToolUse]]
hooks = [{ type = "command", command = "  ", timeout = nan }]
[[hooks.PreToolUse]]
hooks = [{ type = "command", command = "x", timeout = inf }]
"""
    located, error = refusals(tmp_path, text)
    assert set(located) == {
        "bogus",
        "permissions.allow[0]",
        "permissions.allow[1]",
        "permissions.deny[0]",
        "hooks.PostToolUse[0].hooks[0].timeout",
        "hooks.PostToolUse[0].hooks[0].command",
        "hooks.PreToolUse[0].hooks[0].timeout",
    }
    assert "unbalanced parentheses" in located["permissions.deny[0]"]
    assert len(error.issues) == len(located)  # one problem a path


def test_an_argument_pattern_on_an_mcp_tool_is_located_in_the_file(tmp_path: Path) -> None:
    """Decision 73: ``deny = ["mcp__files__write(/etc/**)"]`` denied nothing (MCP tools have
    no argument a pattern could match); it is refused at its path like any malformed rule,
    saying what to write, while the bare names stay accepted."""
    text = """
[permissions]
allow = ["mcp__files__read_text_file", "mcp__docs"]
deny = ["mcp__files", "mcp__files__write(/etc/**)"]
"""
    located, _ = refusals(tmp_path, text)
    assert list(located) == ["permissions.deny[1]"]
    message = located["permissions.deny[1]"]
    assert message.startswith("MCP tools take no argument pattern")
    assert "write 'mcp__files__write' for every call of that tool" in message


def test_an_mcp_name_in_another_case_is_located_in_the_file(tmp_path: Path) -> None:
    """Decision 81: ``allow = ["Mcp__files"]`` allowed nothing (every MCP tool's name starts
    with ``mcp__`` itself, and names are compared exactly); it is refused at its path like any
    malformed rule, saying what to write, while the lower-case names stay accepted."""
    text = """
[permissions]
allow = ["mcp__files__read_text_file", "Mcp__files"]
deny = ["mcp__files", "MCP__files__write"]
"""
    located, _ = refusals(tmp_path, text)
    assert list(located) == ["permissions.allow[1]", "permissions.deny[1]"]
    assert located["permissions.allow[1]"].startswith(
        "MCP tools are named with 'mcp__' in lower case"
    )
    assert located["permissions.allow[1]"].endswith(
        "; write 'mcp__files' for every tool of that server"
    )
    assert located["permissions.deny[1]"].endswith(
        "; write 'mcp__files__write' for every call of that tool"
    )


def test_an_unknown_hook_type_is_not_a_start_up_error(tmp_path: Path) -> None:
    text = """
[[hooks.PreToolUse]]
hooks = [{ type = "prompt", prompt = "Is this safe?", timeout = 30 }]
"""
    config = load_config(_write(tmp_path, text))
    assert config.hooks["PreToolUse"][0].hooks == [HookHandler("prompt", None, 30.0)]


def test_toml_syntax_errors_are_located(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(_write(tmp_path, 'default_provider = "x"\n[providers\n'))
    [issue] = caught.value.issues
    assert issue["path"] == ""
    assert "invalid TOML" in issue["message"]
    assert "line 2" in issue["message"]


def test_a_byte_order_mark_at_the_start_is_no_error(tmp_path: Path) -> None:
    """Editors on some systems save UTF-8 with a BOM, which tomllib calls line 1's error."""
    path = _write(tmp_path, '\ufeffdefault_provider = "scripted"\n')
    assert load_config(path).default_provider == "scripted"


def test_undecodable_bytes_are_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_bytes(b"default_provider = '\xff'\n")
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_config(path)


def test_the_config_path_follows_robota_config_then_xdg(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert config_path() == tmp_path / "xdg" / "robota" / "config.toml"
    monkeypatch.setenv("ROBOTA_CONFIG", str(tmp_path / "elsewhere.toml"))
    assert config_path() == tmp_path / "elsewhere.toml"
    (tmp_path / "elsewhere.toml").write_text('default_provider = "openai"\n')
    assert load_config().default_provider == "openai"


def test_state_and_runtime_folders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    assert state_dir() == tmp_path / "state" / "robota"
    assert runtime_dir() == tmp_path / "run" / "robota"
    monkeypatch.setenv("ROBOTA_STATE_DIR", str(tmp_path / "mine"))
    assert state_dir() == tmp_path / "mine"
    monkeypatch.delenv("XDG_RUNTIME_DIR")
    assert runtime_dir().name.startswith("robota-")


def test_a_table_named_after_a_built_in_kind_configures_that_kind_only(tmp_path: Path) -> None:
    """``[providers.openai]`` of kind openai configures the built-in; ``[providers.scripted]``
    of another kind would quietly put a real model behind every session that asks for the
    offline provider (the default): refused, located at its kind."""
    ok = load_config(
        _write(
            tmp_path, '[providers.openai]\nkind = "openai"\nbase_url = "http://127.0.0.1:1/v1"\n'
        )
    )
    assert ok.providers["openai"].kind == "openai"
    text = '[providers.scripted]\nkind = "openai"\nbase_url = "http://127.0.0.1:1/v1"\n'
    located, _ = refusals(tmp_path, text)
    assert set(located) == {"providers.scripted.kind"}
    assert "built-in 'scripted'" in located["providers.scripted.kind"]


def test_a_hook_command_holding_a_nul_is_refused_at_its_path(tmp_path: Path) -> None:
    """TOML lets ``\\u0000`` into a string, but no command line can hold one: such a hook
    was accepted, and every firing then failed as "hook PreToolUse[0].hooks[0] failed:
    ValueError" (a traceback in robotad's log), denying every call it guarded."""
    text = '[[hooks.PreToolUse]]\nhooks = [{ type = "command", command = "check\\u0000.sh" }]\n'
    located, _ = refusals(tmp_path, text)
    assert located == {
        "hooks.PreToolUse[0].hooks[0].command": (
            "holds a NUL character (\\u0000), which no path, command or name can hold"
        )
    }


def test_a_toml_date_or_time_where_none_belongs_is_located_not_a_crash(tmp_path: Path) -> None:
    """TOML has dates and times of day that JSON lacks; one where a string or a number
    belongs stopped robotad with a traceback (the problem walker took it for a string)."""
    text = """
default_provider = 1979-05-27

[providers.local]
kind = "openai"
model = 07:32:00
context_window = 1979-05-27T07:32:00
"""
    with pytest.raises(ConfigError) as caught:
        load_config(_write(tmp_path, text))
    assert caught.value.issues == [
        {"path": "default_provider", "message": "expected string, got date"},
        {"path": "providers.local.model", "message": "expected string or null, got time"},
        {
            "path": "providers.local.context_window",
            "message": "expected integer or null, got datetime",
        },
    ]


def test_a_nul_in_any_string_or_key_is_located_not_a_crash(tmp_path: Path) -> None:
    """TOML lets a string hold ``\\u0000``, which no path, command or name can: a sandbox
    root holding one stopped robotad with a traceback (resolving it raised), and elsewhere
    it failed only when used. Each is a start-up error at its path."""
    text = r"""
[sandbox]
writable_roots = ["/srv/a\u0000b"]

[classifier]
command = "judge\u0000"

[mcp_servers.files]
command = "srv"
env = { "A\u0000" = "x", B = "y\u0000" }
"""
    with pytest.raises(ConfigError) as caught:
        load_config(_write(tmp_path, text))
    assert [issue["path"] for issue in caught.value.issues] == [
        "sandbox.writable_roots[0]",
        "classifier.command",
        'mcp_servers.files.env."A\\u0000"',
        "mcp_servers.files.env.B",
    ]
    assert all("NUL" in issue["message"] for issue in caught.value.issues)


def test_arrays_nested_past_the_parser_are_a_syntax_error_not_a_crash(tmp_path: Path) -> None:
    """tomllib recurses per nesting level; a file nested thousands deep stopped robotad with
    a RecursionError traceback."""
    with pytest.raises(ConfigError) as caught:
        load_config(_write(tmp_path, "a = " + "[" * 5000 + "]" * 5000 + "\n"))
    assert caught.value.issues == [
        {"path": "", "message": "invalid TOML: arrays or inline tables nested too deeply"}
    ]


def test_an_mcp_env_name_or_header_no_server_can_get_is_a_start_up_error(tmp_path: Path) -> None:
    """An ``env`` name with ``=`` (or none) and a header with a line break or a bad name were
    accepted at start; the server then failed when first used, its status showing a bare
    ``ValueError: illegal environment variable name`` with no key path."""
    text = """
[mcp_servers.files]
command = "srv"
env = { "A=B" = "x", "" = "y", GOOD_NAME = "z" }

[mcp_servers.remote]
url = "http://127.0.0.1:3001/mcp"
headers = { Authorization = "Bearer a\\nX-Evil: 1", "X Y" = "v", X-Fine = "tab\\tok" }
"""
    located, error = refusals(tmp_path, text)
    assert set(located) == {
        'mcp_servers.files.env."A=B"',
        'mcp_servers.files.env.""',
        "mcp_servers.remote.headers.Authorization",
        'mcp_servers.remote.headers."X Y"',
    }
    assert "without '='" in located['mcp_servers.files.env."A=B"']
    assert "line break" in located["mcp_servers.remote.headers.Authorization"]
    assert "Bearer" not in str(error)  # a header's value may be a secret: never echoed


def test_an_unknown_key_names_the_keys_its_table_takes(tmp_path: Path) -> None:
    """A typo in a key said only "unknown member" (a JSON word, in a TOML file): the message
    now lists the keys that table takes, so the fix is in sight, and speaks of tables."""
    text = """
[providers."my box"]
kind = "openai"
api_key_enf = "MY_KEY"

[[hooks.PreToolUse]]
hooks = [{ type = "command", command = "x", shel = "zsh" }]

[classifier]

[sandbox]
net = true

[mcp_servers]
files = 3
"""
    located, _ = refusals(tmp_path, text)
    assert located == {
        'providers."my box".api_key_enf': "unknown key (this table takes: kind, base_url, "
        "model, api_key_env, context_window, max_tokens, idle_timeout_ms, "
        "connect_timeout_ms, api_key_command)",
        "hooks.PreToolUse[0].hooks[0].shel": "unknown key (this table takes: type, command, "
        "timeout)",
        "classifier.command": "missing required key",
        "sandbox.net": "unknown key (this table takes: mode, network, writable_roots)",
        "mcp_servers.files": "expected table, got integer",
    }


def test_a_default_file_that_links_to_nothing_is_an_error_not_the_defaults(
    tmp_path: Path,
) -> None:
    """A config.toml kept elsewhere (a dotfiles checkout) and linked into place: when the
    checkout moved, robotad silently ran on the defaults, the user's providers, rules and
    hooks gone without a word. A link to nothing now stops the start, naming its target."""
    link = tmp_path / "config.toml"
    link.symlink_to(tmp_path / "dotfiles" / "robota.toml")
    with pytest.raises(ConfigError) as caught:
        load_config(link)
    [issue] = caught.value.issues
    assert str(tmp_path / "dotfiles" / "robota.toml") in issue["message"]
    assert "remove the link" in issue["message"]


@pytest.mark.parametrize("name", ["", " ", "\t", "\u3000 "])
def test_a_provider_table_without_a_name_is_refused_at_its_path(tmp_path: Path, name: str) -> None:
    """``[providers.""]`` was accepted: a provider nothing could choose (every place that
    names one takes a non-empty name), and one named with spaces only showed as a blank
    wherever its sessions were listed. Refused at start, located, saying what to do."""
    quoted = json.dumps(name, ensure_ascii=False)
    located, error = refusals(tmp_path, f'[providers.{quoted}]\nkind = "openai"\n')
    assert located == {f"providers.{quoted}": located[f"providers.{quoted}"]}
    assert "cannot be empty or only spaces" in located[f"providers.{quoted}"]
    assert "such as [providers.local]" in str(error)
    config = load_config(_write(tmp_path, '[providers."my box"]\nkind = "openai"\n'))
    assert list(config.providers) == ["my box"]  # a name with a space in it is a name


def test_a_hook_event_or_key_that_is_no_bare_key_is_located_once_in_toml_terms(
    tmp_path: Path,
) -> None:
    """An empty hook event (``[hooks] "" = []``) was reported twice, once at ``hooks.``, a
    path no file has; an unknown key with a space in it likewise at ``…hooks[0].a b``
    besides its quoted spelling. Each is one problem at the path the file spells."""
    text = """
[hooks]
"" = []

[[hooks.PreToolUse]]
hooks = [{ type = "command", command = "x", "a b" = 1 }]
"""
    located, error = refusals(tmp_path, text)
    assert set(located) == {'hooks.""', 'hooks.PreToolUse[0].hooks[0]."a b"'}
    assert len(error.issues) == 2


_UNUSABLE_URLS = {
    # An unclosed IPv6 bracket passed the start and answered session/create with -32603.
    "http://[::1/v1": "names no valid host",
    # A port past 65535 passed too, and a failed call named 127.0.0.1:80, not the port given.
    "http://127.0.0.1:99999/v1": "a port that is not a number from 1 to 65535",
    "http://127.0.0.1:0/v1": "a port that is not a number from 1 to 65535",
    "http://127.0.0.1:8o80/v1": "a port that is not a number from 1 to 65535",
    "http://127.0.0.1:/v1": "no port",
    "http:///v1": "names no host",
    "http://256.0.0.1/v1": "invalid IPv4 address",
    # Sent as …/v1%20/chat/completions: a 404 that named no space.
    "http://127.0.0.1:8080/v1 ": "holds a space",
    "ftp://127.0.0.1/v1": "expected an http:// or https:// URL",
}


@pytest.mark.parametrize(("url", "why"), list(_UNUSABLE_URLS.items()))
def test_a_server_url_no_request_can_go_to_is_a_start_up_error_at_its_key(
    tmp_path: Path, url: str, why: str
) -> None:
    """A model server's ``base_url`` and an MCP server's ``url`` that the HTTP client would
    refuse, or send elsewhere than written, are located start-up errors that never echo the
    URL (it may hold credentials)."""
    text = f"""
[providers.local]
kind = "openai"
base_url = {json.dumps(url)}

[mcp_servers.web]
url = {json.dumps(url)}
"""
    located, _ = refusals(tmp_path, text)
    assert set(located) == {"providers.local.base_url", "mcp_servers.web.url"}
    assert all(why in message for message in located.values())
    assert url.strip() not in "".join(located.values())


def test_the_server_urls_people_write_are_taken(tmp_path: Path) -> None:
    urls = [
        "http://127.0.0.1:11434/v1",
        "http://localhost:8080",
        "https://api.openai.com/v1",
        "HTTP://[::1]:8000/v1",
        "http://user:secret@models.internal:443/v1?route=a",
    ]
    text = "".join(
        f'[providers.p{n}]\nkind = "openai"\nbase_url = "{url}"\n'
        f'[mcp_servers.m{n}]\nurl = "{url}"\n'
        for n, url in enumerate(urls)
    )
    config = load_config(_write(tmp_path, text))
    assert [provider.base_url for provider in config.providers.values()] == urls
    assert [server.url for server in config.mcp_servers.values()] == urls
