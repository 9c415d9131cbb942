"""An editor's MCP servers, translated into robotad's session-scoped servers (PROTOCOL §10.5,
§10.6): arrays of name/value pairs become objects, HTTP servers lose their ACP `type`, unsafe
names are made safe, and what robotad cannot run is left out with a reason."""

from __future__ import annotations

import msgspec

from protocol.methods import MCP_SERVER_NAME_MAX, McpServer
from robotactl.acp.mcp_servers import in_editor_terms, kept_indexes, mcp_servers, refused_servers
from robotactl.acp.schema import McpServerEntry, NameValue
from robotad.mcp.config import name_problem


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
