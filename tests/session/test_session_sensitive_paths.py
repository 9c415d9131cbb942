"""Secrets, persistence paths and the workspace in the permission enforcer (PROTOCOL.md §10.7).

Pure evaluation: nothing here reads a file, and the paths under a made-up home need not exist.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from robotad.agent.tool import ToolProfile
from robotad.config import decode_config
from robotad.session.errors import InvalidSetting
from robotad.session.permissions.enforcer import PermissionEnforcer, PermissionMode
from robotad.session.permissions.sensitive_paths import SensitivePaths, check_path_patterns
from robotad.tools import builtin_tools

HOME = "/home/me"
PROFILES: dict[str, ToolProfile] = {tool.name: tool.profile for tool in builtin_tools()}
PERSON_MODES: list[PermissionMode] = ["plan", "default", "acceptEdits", "auto"]


def enforcer(cwd: Path, mode: str = "default", **kwargs: Any) -> PermissionEnforcer:
    sensitive = SensitivePaths(
        str(cwd),
        home=HOME,
        protected_reads=kwargs.pop("protected_reads", None),
        additional_dirs=kwargs.pop("additional_dirs", ()),
        config_paths=[f"{HOME}/.config/robota/**"],
    )
    return PermissionEnforcer(
        cwd,
        profiles=PROFILES,
        home=HOME,
        mode=mode,
        classifier_configured=True,
        sensitive=sensitive,
        **kwargs,
    )


SECRETS = [
    ("Read", {"file_path": f"{HOME}/.ssh/id_ed25519"}),
    ("Read", {"file_path": f"{HOME}/.aws/credentials"}),
    ("Read", {"file_path": f"{HOME}/.gnupg/private-keys-v1.d/x.key"}),
    ("Read", {"file_path": f"{HOME}/.config/gcloud/credentials.db"}),
    ("Read", {"file_path": f"{HOME}/.kube/config"}),
    ("Read", {"file_path": f"{HOME}/.docker/config.json"}),
    ("Read", {"file_path": f"{HOME}/.netrc"}),
    ("Read", {"file_path": ".env"}),
    ("Read", {"file_path": "deploy/.env.production"}),
    ("Read", {"file_path": "/srv/other/.env"}),
    ("Read", {"file_path": f"{HOME}/.config/robota/config.toml"}),
    ("Grep", {"pattern": "KEY", "path": f"{HOME}/.aws"}),
    ("Glob", {"pattern": "*", "path": f"{HOME}/.ssh"}),
]


@pytest.mark.parametrize("mode", PERSON_MODES)
@pytest.mark.parametrize(("tool", "args"), SECRETS)
def test_reading_a_secret_asks_a_person_in_every_mode_but_bypass(
    tmp_path: Path, mode: str, tool: str, args: dict[str, Any]
) -> None:
    decision = enforcer(tmp_path, mode).evaluate(tool, args)
    assert decision.outcome == "ask"
    assert "bypassPermissions" in decision.reason
    assert not decision.classifier_eligible
    assert enforcer(tmp_path, "bypassPermissions").evaluate(tool, args).outcome == "allow"


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("Read", {"file_path": "src/main.py"}),
        ("Read", {"file_path": ".envrc"}),
        ("Read", {"file_path": f"{HOME}/.ssh_notes.txt"}),
        ("Grep", {"pattern": "x"}),  # a folder: the secrets in it are withheld from the search
        ("Grep", {"pattern": "BEGIN", "path": HOME}),
        ("Glob", {"pattern": "**/*.py", "path": f"{HOME}/projects"}),
    ],
)
def test_ordinary_reads_stay_allowed(tmp_path: Path, tool: str, args: dict[str, Any]) -> None:
    assert enforcer(tmp_path).evaluate(tool, args).outcome == "allow"


def test_an_allow_rule_naming_the_path_wins_but_a_bare_one_does_not(tmp_path: Path) -> None:
    key = {"file_path": f"{HOME}/.ssh/id_ed25519.pub"}
    for broad in ("Read", "Read(**)", "*"):
        assert enforcer(tmp_path, rules={"allow": [broad]}).evaluate("Read", key).outcome == "ask"
    named = enforcer(tmp_path, rules={"allow": ["Read(~/.ssh/*.pub)"]})
    assert named.evaluate("Read", key).outcome == "allow"
    assert named.evaluate("Read", {"file_path": f"{HOME}/.ssh/id_ed25519"}).outcome == "ask"
    env = enforcer(tmp_path, rules={"allow": ["Read(.env)"]})
    assert env.evaluate("Read", {"file_path": ".env"}).outcome == "allow"


def test_protected_reads_replaces_the_list(tmp_path: Path) -> None:
    gate = enforcer(tmp_path, protected_reads=["secrets/**", "~/vault.kdbx"])
    assert gate.evaluate("Read", {"file_path": "secrets/db.txt"}).outcome == "ask"
    assert gate.evaluate("Read", {"file_path": f"{HOME}/vault.kdbx"}).outcome == "ask"
    assert gate.evaluate("Read", {"file_path": ".env"}).outcome == "allow"
    # robota's own configuration stays protected whatever the list says.
    assert (
        gate.evaluate("Read", {"file_path": f"{HOME}/.config/robota/config.toml"}).outcome == "ask"
    )


def test_a_symlink_to_a_secret_is_judged_by_its_target(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    project = tmp_path / "project"
    project.mkdir()
    (project / "innocent.txt").symlink_to(home / ".ssh" / "id_ed25519")
    gate = PermissionEnforcer(
        project,
        profiles=PROFILES,
        home=str(home),
        sensitive=SensitivePaths(str(project), home=str(home), config_paths=[]),
    )
    assert gate.evaluate("Read", {"file_path": "innocent.txt"}).outcome == "ask"


def test_a_symlink_made_after_a_session_counts_for_the_next_one(tmp_path: Path) -> None:
    """Parsed patterns are remembered across sessions, the symlinks of their folders never
    are: a secret folder that became a link since the last session is judged by its target."""
    home = tmp_path / "home"
    home.mkdir()
    vault = tmp_path / "vault"
    vault.mkdir()
    before = SensitivePaths(str(tmp_path), home=str(home), config_paths=[])
    assert before.protected_read(str(vault / "id_ed25519")) is None
    (home / ".ssh").symlink_to(vault)
    after = SensitivePaths(str(tmp_path), home=str(home), config_paths=[])
    assert after.protected_read(str(vault / "id_ed25519")) == "~/.ssh/**"
    assert after.protected_read(str(home / ".ssh" / "id_ed25519")) == "~/.ssh/**"


def test_a_malformed_pattern_is_refused_every_time(tmp_path: Path) -> None:
    for _ in range(2):
        with pytest.raises(InvalidSetting):
            SensitivePaths(str(tmp_path), protected_reads=["x)"])


PERSISTENCE = [
    f"{HOME}/.bashrc",
    f"{HOME}/.profile",
    f"{HOME}/.zshrc",
    f"{HOME}/.ssh/authorized_keys",
    f"{HOME}/.config/autostart/x.desktop",
    f"{HOME}/.config/systemd/user/x.service",
    f"{HOME}/.config/robota/config.toml",
    ".git/hooks/pre-commit",
    ".git/config",
    "vendor/lib/.git/hooks/post-checkout",
    ".git/modules/lib/config",
    ".git/modules/lib/hooks/post-checkout",
    ".git/config.worktree",
    ".git/worktrees/other/config.worktree",
    "sub/.git",
]


@pytest.mark.parametrize("path", PERSISTENCE)
@pytest.mark.parametrize("tool", ["Write", "Edit"])
def test_writing_a_persistence_path_asks_in_every_mode_but_bypass(
    tmp_path: Path, path: str, tool: str
) -> None:
    args = {"file_path": path, "content": "x", "old_string": "a", "new_string": "b"}
    if tool == "Write":
        args = {"file_path": path, "content": "x"}
    for mode in ("default", "acceptEdits", "auto"):
        decision = enforcer(tmp_path, mode).evaluate(tool, args)
        assert (decision.outcome, decision.classifier_eligible) == ("ask", False)
        assert "persistence" in decision.reason
    assert enforcer(tmp_path, "plan").evaluate(tool, args).outcome == "deny"
    assert enforcer(tmp_path, "bypassPermissions").evaluate(tool, args).outcome == "allow"
    everything = enforcer(tmp_path, "acceptEdits", rules={"allow": ["Write", "Edit(**)"]})
    assert everything.evaluate(tool, args).outcome == "ask"


def test_accept_edits_writes_freely_only_inside_the_workspace(tmp_path: Path) -> None:
    cwd = tmp_path / "project"
    shared = tmp_path / "shared"
    (cwd / "src").mkdir(parents=True)
    shared.mkdir()
    (cwd / "escape").symlink_to(tmp_path)
    gate = enforcer(cwd, "acceptEdits", additional_dirs=[str(shared)])

    def outcome(path: str) -> str:
        return gate.evaluate("Write", {"file_path": path, "content": ""}).outcome

    assert outcome("src/new.py") == "allow"
    assert outcome(str(cwd)) == "allow"
    assert outcome(f"{shared}/notes.md") == "allow"
    assert outcome(f"{tmp_path}/elsewhere.txt") == "ask"
    assert outcome("../sibling/x") == "ask"
    assert outcome("escape/elsewhere.txt") == "ask"  # a link out of the tree
    assert outcome("/etc/hosts") == "ask"
    named = enforcer(cwd, "acceptEdits", rules={"allow": [f"Write({tmp_path}/elsewhere.txt)"]})
    assert named.evaluate("Write", {"file_path": f"{tmp_path}/elsewhere.txt"}).outcome == "allow"
    # The workspace widens acceptEdits only: default mode still asks inside it.
    assert enforcer(cwd).evaluate("Write", {"file_path": "src/new.py"}).outcome == "ask"


def test_a_relative_additional_dir_is_taken_from_each_sessions_cwd(tmp_path: Path) -> None:
    """``additional_dirs = ["../shared"]`` is the folder beside each session's project (as
    the README says), never the daemon's own working folder."""
    for project in ("one", "two"):
        cwd = tmp_path / project / "app"
        cwd.mkdir(parents=True)
        gate = enforcer(cwd, "acceptEdits", additional_dirs=["../shared"])

        def outcome(path: str, gate: PermissionEnforcer = gate) -> str:
            return gate.evaluate("Write", {"file_path": path, "content": ""}).outcome

        assert outcome(f"{tmp_path / project}/shared/x.md") == "allow"
        assert outcome("../shared/x.md") == "allow"
        assert outcome(f"{tmp_path}/shared/x.md") == "ask"
        assert outcome(f"{os.getcwd()}/shared/x.md") == "ask"


def test_always_for_webfetch_remembers_the_domain_and_exempts_only_the_exact_host(
    tmp_path: Path,
) -> None:
    import trio

    gate = enforcer(tmp_path)
    call = {"url": "https://Docs.Example.com:8443/page?q=1"}
    assert gate.evaluate("WebFetch", call).outcome == "ask"
    pattern = trio.run(gate.remember, "WebFetch", call, "session")
    assert pattern == "WebFetch(domain:docs.example.com)"
    assert gate.evaluate("WebFetch", {"url": "http://docs.example.com/other"}).outcome == "allow"
    assert gate.evaluate("WebFetch", {"url": "https://example.com/"}).outcome == "ask"
    assert gate.exempts("WebFetch", "docs.example.com")
    assert not gate.exempts("WebFetch", "api.docs.example.com")
    assert not gate.exempts("Read", "docs.example.com")


def test_malformed_protected_reads_are_located(tmp_path: Path) -> None:
    assert [i["path"] for i in check_path_patterns(["ok/**", "bad(", ""], "$.x")] == [
        "$.x[1]",
        "$.x[2]",
    ]
    from protocol.validate import ValidationFailed

    with pytest.raises(ValidationFailed) as caught:
        decode_config('[permissions]\nprotected_reads = ["~/.ssh/**", "a(b"]\n')
    assert [i["path"] for i in caught.value.issues] == ["permissions.protected_reads[1]"]
    config = decode_config('[permissions]\nprotected_reads = []\nadditional_dirs = ["~/x"]\n')
    assert config.permissions.protected_reads == []
    assert config.permissions.additional_dirs == ["~/x"]
    with pytest.raises(InvalidSetting):
        SensitivePaths(str(tmp_path), protected_reads=["x)"])


async def test_grep_over_a_folder_skips_protected_secrets_unless_allowed(tmp_path: Path) -> None:
    """A search of the cwd does not read `.env` files: they are withheld (and counted) in
    every mode but bypassPermissions, unless an allow rule names them."""
    import trio

    from robotad.tools import GrepTool, ToolContext

    (tmp_path / ".env").write_text("TOKEN=s3cr3t\n")
    (tmp_path / "app.py").write_text("TOKEN = os.environ['TOKEN']\n")
    tool = GrepTool()

    async def grep(gate: PermissionEnforcer) -> str:
        arguments = tool.decode_arguments({"pattern": "TOKEN"})
        with trio.fail_after(10):
            result = await tool.run(arguments, ToolContext(tmp_path, "s", gate))
        assert result.ok
        return result.content

    guarded = await grep(enforcer(tmp_path, "acceptEdits"))
    assert "s3cr3t" not in guarded
    assert "app.py:1:" in guarded
    assert "1 file(s) the permission rules withhold" in guarded
    assert "s3cr3t" in await grep(enforcer(tmp_path, "bypassPermissions"))
    assert "s3cr3t" in await grep(enforcer(tmp_path, rules={"allow": ["Grep(.env)"]}))
    # A search of the home folder skips the keys under it.
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("TOKEN private key\n")
    (home / "notes.txt").write_text("TOKEN in notes\n")
    in_home = PermissionEnforcer(
        tmp_path,
        profiles=PROFILES,
        home=str(home),
        sensitive=SensitivePaths(str(tmp_path), home=str(home), config_paths=[]),
    )
    arguments = tool.decode_arguments({"pattern": "TOKEN", "path": str(home)})
    with trio.fail_after(10):
        searched = await tool.run(arguments, ToolContext(tmp_path, "s", in_home))
    assert "in notes" in searched.content
    assert "private key" not in searched.content


def test_the_readme_security_example_is_a_valid_configuration() -> None:
    from robotad.session.permissions.patterns import parse_rules
    from tests.robotad_process import REPO

    readme = (REPO / "README.md").read_text()
    section = readme[readme.index("### Security") :]
    block = section[
        section.index("```toml\n") + 8 : section.index("```\n", section.index("```toml"))
    ]
    config = decode_config(block)
    rules = parse_rules(config.permissions.allow, profiles=PROFILES)
    assert "WebFetch(domain:localhost)" in [rule.text for rule in rules]
    assert config.permissions.protected_reads is not None
    assert config.permissions.additional_dirs == ["~/notes"]


@pytest.mark.parametrize(
    ("command", "eligible"),
    [
        ("cat .env", False),
        ("grep TOKEN config/.env.local", False),
        (f"cp x {HOME}/.kube/config", False),
        ("echo 'x' >> ~/.zshrc", False),
        ("cp hook.sh .git/hooks/pre-push", False),
        ("make test", True),
        ("cat src/envelope.py", True),
    ],
)
def test_auto_mode_hands_commands_naming_secrets_to_a_person(
    tmp_path: Path, command: str, eligible: bool
) -> None:
    decision = enforcer(tmp_path, "auto").evaluate("Bash", {"command": command})
    assert (decision.outcome, decision.classifier_eligible) == ("ask", eligible)


@pytest.mark.parametrize("rule", ["Read(secret/**)", "Grep(secret/**)", "Read(**/key)"])
@pytest.mark.parametrize("mode", ["default", "bypassPermissions"])
@pytest.mark.parametrize("kind", ["deny", "ask"])
def test_a_deny_or_ask_rule_withholds_a_file_from_a_folder_search(
    tmp_path: Path, rule: str, mode: str, kind: str
) -> None:
    """A deny or ask rule of Read or of the searching tool holds for a search of a parent
    folder, in every mode (the search cannot stop to ask); one of another tool does not."""
    gate = enforcer(tmp_path, mode, rules={kind: [rule, "Glob(other/**)"]})
    root = str(tmp_path)
    assert gate.withholds("Grep", str(tmp_path / "secret" / "key"), root)
    assert not gate.withholds("Grep", str(tmp_path / "other" / "notes"), root)
    assert not gate.withholds("Grep", str(tmp_path / "src" / "app.py"), root)


@pytest.mark.parametrize("rule", ["Grep", "Read", "Grep(/**)"])
def test_an_ask_rule_that_asked_for_the_search_withholds_nothing_it_found(
    tmp_path: Path, rule: str
) -> None:
    """An ask rule covering the searched folder asked before the search began: once a person
    approved it, the search shows what it found (``Grep`` asking for every search withheld
    every file of an approved one)."""
    gate = enforcer(tmp_path, rules={"ask": [rule]})
    assert gate.evaluate("Grep", {"pattern": "x", "path": str(tmp_path)}).outcome == "ask"
    assert not gate.withholds("Grep", str(tmp_path / "secret" / "key"), str(tmp_path))
    deny = enforcer(tmp_path, rules={"deny": ["Read(secret/**)"], "ask": [rule]})
    assert deny.withholds("Grep", str(tmp_path / "secret" / "key"), str(tmp_path))


@pytest.mark.parametrize(
    "rules",
    [
        ["Grep", "Read(secret/**)"],
        ["Grep(/**)", "Grep(secret/**)"],
        ["Grep(secret/**)", "Grep(/**)"],
    ],
)
def test_an_ask_rule_that_did_not_ask_for_the_search_still_withholds(
    tmp_path: Path, rules: list[str]
) -> None:
    """Only the first ask rule catching a file was compared: a bare ``Grep`` let a file
    ``Read(secret/**)`` asks about through unasked, and two rules' order decided."""
    gate = enforcer(tmp_path, rules={"ask": rules})
    assert gate.withholds("Grep", str(tmp_path / "secret" / "key"), str(tmp_path))
    assert not gate.withholds("Grep", str(tmp_path / "src" / "app.py"), str(tmp_path))


@pytest.mark.parametrize("mode", ["default", "bypassPermissions"])
@pytest.mark.parametrize("kind", ["deny", "ask"])
def test_a_grep_naming_a_file_read_may_not_show_is_denied(
    tmp_path: Path, mode: str, kind: str
) -> None:
    """What a folder search withholds, a Grep naming the file does not show either: a deny
    (ask) rule of Read denies (asks for) a Grep too (it shows contents), not a Glob (names
    only)."""
    gate = enforcer(tmp_path, mode, rules={kind: ["Read(secret/**)"]})
    decided = gate.evaluate("Grep", {"pattern": "TOKEN", "path": "secret/key"})
    assert decided.outcome == kind
    assert "Read(secret/**)" in decided.reason
    assert "Grep shows what Read" in decided.reason
    assert gate.evaluate("Grep", {"pattern": "TOKEN", "path": "src/app.py"}).outcome != kind
    assert gate.evaluate("Glob", {"pattern": "*", "path": "secret"}).outcome != kind
    assert gate.evaluate("Read", {"file_path": "secret/key"}).outcome == kind


async def test_grep_over_a_parent_skips_what_a_deny_rule_covers(tmp_path: Path) -> None:
    """The reviewer's case: deny Read/Grep/Glob(secret/**), then Grep the cwd: the denied
    file's lines do not come back, and the answer counts it."""
    import trio

    from robotad.tools import GrepTool, ToolContext

    (tmp_path / "secret").mkdir()
    (tmp_path / "secret" / "key").write_text("TOKEN=abc123\n")
    (tmp_path / "app.py").write_text("TOKEN = 1\n")
    rules = {"deny": ["Read(secret/**)", "Grep(secret/**)", "Glob(secret/**)"]}
    gate = enforcer(tmp_path, rules=rules)
    tool = GrepTool()
    with trio.fail_after(10):
        result = await tool.run(
            tool.decode_arguments({"pattern": "TOKEN"}), ToolContext(tmp_path, "s", gate)
        )
    assert result.ok
    assert "abc123" not in result.content
    assert "app.py:1:" in result.content
    assert "1 file(s) the permission rules withhold" in result.content
