"""Permission patterns: parsing, located refusals and matching (PROTOCOL.md §4)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from robotad.agent.tool import ToolProfile
from robotad.session.errors import InvalidSetting
from robotad.session.permissions.patterns import (
    compile_rule,
    escape_pattern_text,
    mcp_rule_refusal,
    parse_rule,
    parse_rules,
)

READ = ToolProfile("inspect", "file_path", "path")
BASH = ToolProfile("execute", "command", "command")
FETCH = ToolProfile("inspect", "url", "url")
TODO = ToolProfile("modify", None, None)
PROFILES = {"Read": READ, "Bash": BASH, "WebFetch": FETCH, "TodoWrite": TODO}

CWD = "/work/proj"
HOME = "/home/me"


def identity(path: str) -> str:
    return path


def matches(pattern: str, value: str, profile: ToolProfile | None) -> bool:
    rule = parse_rule(pattern, profile)
    return compile_rule(rule, profile, CWD, home=HOME, resolve=identity).matches(value)


MALFORMED = [
    ("", "empty pattern"),
    ("Read(", "unbalanced"),
    ("Bash(ls", "unbalanced"),
    ("Read)", "unbalanced"),
    ("Read(a(b)", "unbalanced"),
    ("(x)", "empty tool name"),
    ("Bad Name", "not an identifier"),
    ("Bad Name(x)", "not an identifier"),
    ("9Read", "not an identifier"),
    ("Read()", "empty argument"),
    ("Read(   )", "empty argument"),
    ("Read(x)y", "after the closing parenthesis"),
    ("Bash(:*)", "empty prefix"),
    ("Bash( :*)", "empty prefix"),
    ("WebFetch(domain:)", "empty host"),
    ("WebFetch(domain:exa mple.com)", "invalid host"),
    ("WebFetch(domain:-bad.com)", "invalid host"),
    ("WebFetch(domain:a..b)", "invalid host"),
    ("WebFetch(domain:*.example.com)", "invalid host"),
    ("WebFetch(domain:999.1.1.1)", "invalid host"),
    ("*(x)", "takes no argument"),
]


@pytest.mark.parametrize(("pattern", "message"), MALFORMED)
def test_malformed_patterns_are_refused(pattern: str, message: str) -> None:
    """G-109: unbalanced parentheses, empty or non-identifier names, empty arguments,
    Bash(:*), WebFetch(domain:) and invalid hosts are each refused as malformed."""
    with pytest.raises(InvalidSetting) as caught:
        parse_rules([pattern], profiles=PROFILES)
    (issue,) = caught.value.issues
    assert issue["path"] == "$.permissions.allow[0]"
    assert message in issue["message"]


def test_every_malformed_pattern_is_listed_with_its_own_path() -> None:
    """G-108: one refusal lists every malformed pattern at its own index."""
    rules = ["Read(*)", "Read(", "Bash(git:*)", "(x)", "Bad Name", "WebFetch(domain:)"]
    with pytest.raises(InvalidSetting) as caught:
        parse_rules(rules, "$.permissions.deny", PROFILES)
    paths = [issue["path"] for issue in caught.value.issues]
    assert paths == [f"$.permissions.deny[{i}]" for i in (1, 3, 4, 5)]


def test_argument_pattern_for_a_tool_without_argument_key_is_malformed() -> None:
    """G-109: an argument-scoped pattern for a known tool with no argument key is malformed,
    while the bare tool name is fine."""
    with pytest.raises(InvalidSetting, match="no argument"):
        parse_rules(["TodoWrite(x)"], profiles=PROFILES)
    assert parse_rules(["TodoWrite"], profiles=PROFILES)[0].form == "tool"


def test_domain_pattern_on_a_non_url_tool_is_malformed() -> None:
    """G-109: a domain: pattern is an unparseable URL pattern on a tool without a URL argument."""
    with pytest.raises(InvalidSetting, match="URL arguments"):
        parse_rules(["Read(domain:example.com)"], profiles=PROFILES)


def test_patterns_for_unregistered_tools_are_accepted() -> None:
    """G-110: a well-formed pattern naming a tool no profile declares yet is accepted, an MCP
    tool or server named without an argument too."""
    rules = parse_rules(
        ["Lookup(anything *)", "Later", "Later(x:*)", "mcp__pack__lookup", "mcp__pack"],
        profiles={},
    )
    assert [rule.form for rule in rules] == ["glob", "tool", "prefix", "tool", "tool"]


MCP_ARGUMENT_RULES = [
    ("mcp__files__write(/etc/**)", "'mcp__files__write' for every call of that tool"),
    ("mcp__files__write(*)", "'mcp__files' for every tool of its server"),
    ("mcp__files(/etc/**)", "'mcp__files' for every tool of that server"),
    ("mcp__files__write(git push:*)", "'mcp__files__write'"),
    ("mcp__web__fetch(domain:example.com)", "'mcp__web__fetch'"),
    ("Mcp__srv__tool(x)", "'mcp__srv__tool' for every call of that tool"),
    ("MCP__srv(x)", "'mcp__srv' for every tool of that server"),
    ("mcp__(x)", "mcp__SERVER__TOOL for every call of one tool"),
]


def _second_rule_refused(rules: list[str], where: str, profiles: dict[str, ToolProfile]) -> str:
    """The message of the one issue `parse_rules` raises for `rules` at `where`: the second
    rule's own, located at it."""
    with pytest.raises(InvalidSetting) as caught:
        parse_rules(rules, where, profiles)
    (issue,) = caught.value.issues
    assert issue["path"] == f"{where}[1]"
    message: str = issue["message"]
    return message


@pytest.mark.parametrize(("pattern", "instead"), MCP_ARGUMENT_RULES)
def test_an_argument_pattern_on_an_mcp_tool_is_refused_saying_what_to_write(
    pattern: str, instead: str
) -> None:
    """Decision 73: MCP tools have no argument a pattern could match, so a rule giving one
    (or a server, in any case of ``mcp__``) an argument pattern never applied: a deny denied
    nothing. It is refused at its own path, registered or not, saying what to write."""
    registered = {
        "mcp__files__write": ToolProfile("modify", None, None, rule_names=("mcp__files",))
    }
    for profiles in ({}, registered):
        message = _second_rule_refused(["Read(x)", pattern], "$.permissions.deny", profiles)
        assert message.startswith("MCP tools take no argument pattern")
        assert instead in message.split("; write ", 1)[1]
    with pytest.raises(InvalidSetting, match="MCP tools take no argument pattern"):
        parse_rule(pattern)


MCP_CASE_RULES = [
    ("Mcp__files__write", "'mcp__files__write' for every call of that tool"),
    ("MCP__files", "'mcp__files' for every tool of that server"),
    ("mCp__files__", "'mcp__files' for every tool of that server"),
    ("MCP__Files__Write", "'mcp__Files__Write' for every call of that tool"),
    ("Mcp__", "mcp__SERVER__TOOL for every call of one tool, or mcp__SERVER for a server"),
]


@pytest.mark.parametrize(("name", "instead"), MCP_CASE_RULES)
def test_an_mcp_name_in_another_case_is_refused_saying_what_to_write(
    name: str, instead: str
) -> None:
    """Decision 81: every MCP tool is offered under a name starting with ``mcp__`` itself, and
    a rule's name is compared exactly, so ``Mcp__files__write`` matched no call. It is refused
    at its own path, registered or not, saying what to write: the name with ``mcp__`` (the
    server's and the tool's own case kept, as those are names as given)."""
    registered = {"mcp__files__write": ToolProfile("modify", None, None)}
    for profiles in ({}, registered):
        rules = ["mcp__files__write", name]
        message = _second_rule_refused(rules, "$.permissions.allow", profiles)
        assert message.startswith("MCP tools are named with 'mcp__' in lower case")
        assert f"({name!r} would match no call" in message
        assert message.split("; write ", 1)[1] == instead
    with pytest.raises(InvalidSetting, match="MCP tools are named with 'mcp__' in lower case"):
        parse_rule(name)


MCP_INCOMPLETE_RULES = [
    ("mcp__", "mcp__SERVER__TOOL for every call of one tool, or mcp__SERVER for a server"),
    ("mcp__files__", "'mcp__files' for every tool of that server"),
]


@pytest.mark.parametrize(("name", "instead"), MCP_INCOMPLETE_RULES)
def test_an_mcp_name_with_no_server_or_no_tool_is_refused_saying_what_to_write(
    name: str, instead: str
) -> None:
    """Decision 81: no MCP tool is offered as ``mcp__`` or ``mcp__SERVER__`` (every name goes
    on past the server, a tool part is never empty), so such a rule matched no call. It is
    refused at its own path, as an MCP name in another case is, saying what to write."""
    message = _second_rule_refused(["mcp__files", name], "$.permissions.deny", {})
    assert message.startswith("an MCP rule names a server (mcp__SERVER)")
    assert f"{name!r} names neither" in message
    assert message.split("; write ", 1)[1] == instead
    assert mcp_rule_refusal(name) == message


def test_an_mcp_rule_an_earlier_robotad_took_is_told_from_other_rules() -> None:
    """Decisions 73 and 81: `mcp_rule_refusal` finds exactly the rules refused for either
    reason (stored ones are left out on load), and nothing else: not an MCP name as offered,
    not another tool's pattern, not a pattern malformed in another way, not a non-string."""
    for stored, start in (
        ("mcp__files__write(/etc/**)", "MCP tools take no argument pattern"),
        ("Mcp__files__write", "MCP tools are named with 'mcp__' in lower case"),
        ("MCP__files", "MCP tools are named with 'mcp__' in lower case"),
    ):
        refusal = mcp_rule_refusal(stored)
        assert refusal is not None
        assert refusal.startswith(start)
    others = ("mcp__files__write", "mcp__Files", "mcp__files___x", "Read(/etc/**)", "mcp__a__b(x")
    others += ("Mcp__a(", "", 3)
    for other in others:
        assert mcp_rule_refusal(other) is None


WELL_FORMED = [
    ("Read", "tool"),
    ("*", "tool"),
    ("Read(*)", "glob"),
    ("Read(src/**/*.py)", "glob"),
    ("Bash(git status:*)", "prefix"),
    ("Bash(echo (hi))", "glob"),
    ("Bash(echo \\(hi)", "glob"),
    ("WebFetch(domain:example.com)", "domain"),
    ("WebFetch(domain:127.0.0.1)", "domain"),
    ("WebFetch(domain:[::1])", "domain"),
    ("WebFetch(https://example.com/*)", "glob"),
]


@pytest.mark.parametrize(("pattern", "form"), WELL_FORMED)
def test_well_formed_patterns_parse(pattern: str, form: str) -> None:
    """G-109: well-formed patterns of every form are accepted."""
    assert parse_rules([pattern], profiles=PROFILES)[0].form == form


PATH_CASES = [
    ("Read(src/*.py)", "/work/proj/src/a.py", True),
    ("Read(src/*.py)", "/work/proj/src/deep/a.py", False),
    ("Read(src/**)", "/work/proj/src/deep/a.py", True),
    ("Read(src/**)", "/work/proj/src", True),
    ("Read(src/**)", "/work/proj/srcx/a.py", False),
    ("Read(src/**/test_*.py)", "/work/proj/src/test_a.py", True),
    ("Read(src/**/test_*.py)", "/work/proj/src/a/b/test_a.py", True),
    ("Read(src/**/test_*.py)", "/work/proj/src/a/b/atest_a.py", False),
    ("Read(/etc/*)", "/etc/passwd", True),
    ("Read(/etc/*)", "/work/proj/etc/passwd", False),
    ("Read(./docs/../src/*)", "/work/proj/src/a", True),
    ("Read(../other/*)", "/work/other/x", True),
    ("Read(~/.ssh/**)", "/home/me/.ssh/id_rsa", True),
    ("Read(*)", "/anything/at/all", True),
    ("Read(**)", "/anything/at/all", True),
    ("Read(/work:*)", "/workshop/x", True),
    ("Read(a\\*b)", "/work/proj/a*b", True),
    ("Read(a\\*b)", "/work/proj/axb", False),
    ("Read(/)", "/", True),
]


@pytest.mark.parametrize(("pattern", "value", "expected"), PATH_CASES)
def test_path_matching(pattern: str, value: str, expected: bool) -> None:
    """PROTOCOL §4: for paths * stays in a segment, ** crosses segments, relative patterns
    resolve against the session's cwd."""
    assert matches(pattern, value, READ) is expected


TEXT_CASES = [
    ("Bash(git status:*)", "git status", True),
    ("Bash(git status:*)", "git status --short", True),
    ("Bash(git status:*)", "git push", False),
    ("Bash(npm run *)", "npm run test/unit", True),
    ("Bash(npm run *)", "npm ci", False),
    ("Bash(ls)", "ls", True),
    ("Bash(ls)", "ls -la", False),
    ("Bash(echo (hi))", "echo (hi)", True),
    ("WebFetch(https://example.com/*)", "https://example.com/a/b", True),
    ("WebFetch(domain:example.com)", "https://example.com/x", True),
    ("WebFetch(domain:example.com)", "https://api.example.com/x", True),
    ("WebFetch(domain:example.com)", "https://EXAMPLE.COM./x", True),
    ("WebFetch(domain:example.com)", "https://notexample.com/x", False),
    ("WebFetch(domain:example.com)", "https://example.com.evil.net/x", False),
    ("WebFetch(domain:example.com)", "not a url", False),
]


@pytest.mark.parametrize(("pattern", "value", "expected"), TEXT_CASES)
def test_text_and_url_matching(pattern: str, value: str, expected: bool) -> None:
    """PROTOCOL §4: for non-path arguments * matches any text; Bash(prefix:*) is a prefix;
    WebFetch(domain:host) is that host or a subdomain."""
    profile = BASH if pattern.startswith("Bash") else FETCH
    assert matches(pattern, value, profile) is expected


def test_symlinked_directory_spelling_also_matches() -> None:
    """G-116: a pattern's literal directory also matches once its symlinks are resolved."""
    rule = parse_rule("Read(/link/src/**)", READ)
    real = {"/link/src": "/real/src"}

    def resolve(path: str) -> str:
        return real.get(path, path)

    matcher = compile_rule(rule, READ, CWD, home=HOME, resolve=resolve)
    assert matcher.matches("/real/src/a.py")
    assert matcher.matches("/link/src/a.py")
    assert not matcher.matches("/elsewhere/a.py")


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40))
def test_parser_raises_nothing_but_invalid_params(text: str) -> None:
    """G-108: whatever the string holds, parsing yields a rule or InvalidSetting."""
    try:
        rule = parse_rule(text)
    except InvalidSetting as exc:
        issues = exc.issues
    else:
        issues = []
        for profile in (READ, BASH, FETCH, None):
            compile_rule(rule, profile, CWD, home=HOME, resolve=identity)
    assert all(issue["message"] for issue in issues)


@settings(max_examples=200, deadline=None)
@given(st.text(min_size=1, max_size=40).filter(lambda s: s.strip()))
def test_escaped_text_matches_exactly_itself(text: str) -> None:
    """G-113: any value can be written as a pattern matching exactly that value."""
    pattern = f"Bash({escape_pattern_text(text)})"
    assert matches(pattern, text, BASH)
    assert not matches(pattern, text + "x", BASH)


@pytest.mark.parametrize("text", ["domain:example.com", "a:*", "(x", "x)", "a\\:b", "\\", "*"])
def test_escaped_awkward_text_matches_exactly_itself(text: str) -> None:
    """G-113: syntax characters inside a value are escaped, never read as pattern syntax."""
    pattern = f"Bash({escape_pattern_text(text)})"
    assert parse_rule(pattern, BASH).form == "glob"
    assert matches(pattern, text, BASH)
    assert not matches(pattern, text + "x", BASH)
