"""An editor's MCP servers, translated into robotad's session-scoped servers (PROTOCOL §10.5,
§10.6): arrays of name/value pairs become objects, HTTP servers lose their ACP `type`, unsafe
names are made safe, and what robotad cannot run is left out with a reason; and a new
session starts none of robotad's own servers (decision 70)."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from protocol.blocking_client import open_blocking_connection
from protocol.methods import MCP_SERVER_NAME_MAX, McpServer
from robotactl.acp.mcp_servers import (
    in_editor_terms,
    kept_indexes,
    mcp_servers,
    named_servers,
    refused_servers,
)
from robotactl.acp.schema import McpServerEntry, NameValue
from robotad.mcp.config import name_problem
from tests.acp.conftest import agent_argv
from tests.acp.editors import open_editor
from tests.acp.sdk_cache import typescript_sdk
from tests.robotad_process import child_environment, start_robotad, stop_robotad


def test_stdio_and_http_servers_become_robotads_shapes() -> None:
    entries = [
        McpServerEntry(
            "notes",
            command="notes-mcp",
            args=["--stdio"],
            env=[NameValue("NOTES_DIR", "/tmp"), NameValue("LANG", "C")],
        ),
        McpServerEntry(
            "web",
            type="http",
            url="http://127.0.0.1:8080/mcp",
            headers=[NameValue("Authorization", "Bearer x")],
        ),
        McpServerEntry("bare", command="bare-mcp"),
    ]
    servers, left_out = mcp_servers(entries)
    assert left_out == []
    assert servers == [
        {
            "name": "notes",
            "command": "notes-mcp",
            "args": ["--stdio"],
            "env": {"NOTES_DIR": "/tmp", "LANG": "C"},
        },
        {
            "name": "web",
            "url": "http://127.0.0.1:8080/mcp",
            "headers": {"Authorization": "Bearer x"},
        },
        {"name": "bare", "command": "bare-mcp"},
    ]
    for server in servers:  # each decodes as robotad's strict params shape
        msgspec.convert(server, McpServer)


def test_unsafe_names_are_made_safe_and_unrunnable_servers_are_left_out() -> None:
    servers, left_out = mcp_servers(
        [
            McpServerEntry("My Notes!", command="notes-mcp"),
            McpServerEntry("old", type="sse", url="http://127.0.0.1:9/sse"),
            McpServerEntry("empty"),
            McpServerEntry("git  hub", command="gh-mcp"),
        ]
    )
    # No "__" and no trailing "_": robotad refuses those (mcp__NAME__TOOL must stay unambiguous).
    assert [server["name"] for server in servers] == ["My_Notes", "git_hub"]
    assert all(name_problem(server["name"]) is None for server in servers)
    assert len(left_out) == 2
    assert "SSE" in left_out[0]
    assert "neither a command nor a url" in left_out[1]


def test_names_that_clean_to_the_same_one_get_a_number() -> None:
    """Four names an editor may well send were refused as repeats of one robotad never saw."""
    entries = [
        McpServerEntry(name, command="x")
        for name in ("my server", "my-server", "my_server", "my.server")
    ]
    servers, _ = mcp_servers(entries)
    names = [server["name"] for server in servers]
    assert names == ["my_server", "my-server", "my_server-2", "my_server-3"]
    assert all(name_problem(name) is None for name in names)


def test_a_name_robotads_own_servers_use_gets_a_number() -> None:
    """An editor's "files" beside robotad's configured "files": robotad refuses the clash
    (that server's rules would apply to the editor's), so the editor's is renamed."""
    servers, _ = mcp_servers([McpServerEntry("files", command="x")], reserved={"files"})
    assert [server["name"] for server in servers] == ["files-2"]


def test_robotads_issues_name_the_editors_own_server() -> None:
    """An SSE server is left out before the list goes to robotad, so robotad's
    ``$.mcpServers[0]`` is the editor's second: the editor is told of its ``[1]``."""
    entries = [
        McpServerEntry("old", type="sse", url="http://127.0.0.1:9/sse"),
        McpServerEntry("web", type="http", url="ftp://127.0.0.1/x"),
    ]
    kept = kept_indexes(entries)
    assert kept == [1]
    issues = [{"path": "$.mcpServers[0].url", "message": "expected an http:// or https:// URL"}]
    assert in_editor_terms(issues, kept) == [
        {"path": "$.mcpServers[1].url", "message": "expected an http:// or https:// URL"}
    ]
    assert in_editor_terms([{"path": "$.cwd", "message": "x"}], kept) == [
        {"path": "$.cwd", "message": "x"}
    ]


def test_refused_servers_are_read_from_robotads_issues() -> None:
    """robotad's located issues say which servers it refused and why; an issue about anything
    else (the session itself) refuses the whole request."""
    issues = [
        {"path": "$.mcpServers[2].url", "message": "expected an http:// or https:// URL"},
        {"path": "$.mcpServers[2].headers.X-Key", "message": "not a valid header value"},
        {"path": "$.mcpServers[0]", "message": "give either command or url"},
    ]
    assert refused_servers(issues) == {
        2: "url: expected an http:// or https:// URL; headers.X-Key: not a valid header value",
        0: "give either command or url",
    }
    assert refused_servers([*issues, {"path": "$.cwd", "message": "not absolute"}]) is None
    assert refused_servers([]) is None


def test_long_names_are_cut_to_what_robotad_takes() -> None:
    """robotad takes server names of at most 41 characters (decision 68): a longer one is cut,
    without a trailing "_", and a repeat's number fits within the length too."""
    long = "Company Knowledge Base (read-only mirror of the wiki)"
    entries = [
        McpServerEntry(long, command="x"),
        McpServerEntry(long, command="x"),
        McpServerEntry("k" * 40 + " tail", command="x"),
    ]
    servers, left_out = mcp_servers(entries)
    names = [server["name"] for server in servers]
    assert left_out == []
    assert names == [
        "Company_Knowledge_Base_read-only_mirror_o",
        "Company_Knowledge_Base_read-only_mirror-2",
        "k" * 40,
    ]
    assert all(len(name) <= MCP_SERVER_NAME_MAX for name in names)
    assert all(name_problem(name) is None for name in names)


def test_names_robotad_refused_are_read_from_its_issues() -> None:
    issues = [
        {"path": "$.mcpServers[1].name", "message": "'files' names a server of robotad's ..."},
        {"path": "$.mcpServers[0].url", "message": "expected an http:// or https:// URL"},
        {"path": "$.mcpServers[2].name.x", "message": "not a name issue"},
    ]
    assert named_servers(issues) == {1}


async def test_a_new_session_starts_none_of_robotads_servers_and_a_clash_is_renamed(
    kind: str, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Every session/new listed robotad's servers first (``mcp/list``), which starts each one
    and waits for it: a configured server that cannot start made every new thread wait its
    startup timeout. robotad's configured "files" here only leaves a mark when started; the
    editor's own "files" is still renamed, from robotad's refusal."""
    started = tmp_path / "files-started"
    config = tmp_path / "config" / "robota"
    config.mkdir(parents=True)
    config.joinpath("config.toml").write_text(
        f'[mcp_servers.files]\ncommand = "touch"\nargs = ["{started}"]\n'
    )
    socket_dir = tmp_path_factory.mktemp("sock")
    socket_dir.chmod(0o700)
    env = child_environment(
        ROBOTA_STATE_DIR=str(tmp_path / "state"),
        XDG_CONFIG_HOME=str(tmp_path / "config"),
        XDG_RUNTIME_DIR=str(socket_dir),
    )
    daemon = start_robotad(socket_dir / "robotad.sock", tmp_path / "robotad.log", env=env)
    workspace = tmp_path / "work"
    workspace.mkdir()
    editors_files = {"name": "files", "command": "notes-mcp", "args": [], "env": []}
    try:
        sdk = typescript_sdk() if kind == "ts" else None
        async with open_editor(kind, agent_argv(daemon), tmp_path / "editor.log", sdk) as editor:
            await editor.initialize()
            plain = await editor.new_session(workspace)
            clashing = await editor.new_session(workspace, mcpServers=[editors_files])
            assert not started.exists(), "started"
        with open_blocking_connection(daemon.socket_path, timeout=30) as robotad:
            listed = robotad.request("mcp/list", {"sessionId": clashing})["servers"]
            assert robotad.request("session/get", {"sessionId": plain})["sessionId"] == plain
    finally:
        stop_robotad(daemon)
    assert {(server["name"], server["scope"]) for server in listed} == {
        ("files", "daemon"),
        ("files-2", "session"),
    }
