"""Finding and reading project instruction files (AGENTS.md), and the default system prompt."""

from __future__ import annotations

from datetime import date
from pathlib import Path

from robotad.prompting import (
    SessionFacts,
    compose_system_prompt,
    find_instruction_files,
    load_instructions,
    render_default,
)


def test_outside_a_repository_only_the_cwd_is_looked_at(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("parent")
    cwd = tmp_path / "work"
    cwd.mkdir()
    (cwd / "AGENTS.md").write_text("here")
    user = tmp_path / "user"
    user.mkdir()
    assert find_instruction_files(cwd, ["AGENTS.md"], user) == [cwd / "AGENTS.md"]


def test_a_git_file_marks_a_worktree_root(tmp_path: Path) -> None:
    root = tmp_path / "wt"
    (root / "a").mkdir(parents=True)
    (root / ".git").write_text("gitdir: elsewhere\n")
    (root / "AGENTS.md").write_text("root")
    assert find_instruction_files(root / "a", ["AGENTS.md"], tmp_path / "none") == [
        root / "AGENTS.md"
    ]


def test_the_configured_names_are_read_in_their_order_within_a_folder(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    for name in ("AGENTS.md", "CLAUDE.md", "OTHER.md"):
        (tmp_path / name).write_text(name)
    found = find_instruction_files(tmp_path, ["CLAUDE.md", "AGENTS.md"], tmp_path / "none")
    assert found == [tmp_path / "CLAUDE.md", tmp_path / "AGENTS.md"]


def test_a_file_over_the_cap_is_cut_with_a_note_and_small_ones_are_whole(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("é" * 10)  # 20 bytes
    (tmp_path / "SMALL.md").write_text("ok")
    big, small = load_instructions(tmp_path, ["AGENTS.md", "SMALL.md"], tmp_path / "u", cap=5)
    assert big.cut
    assert big.text.startswith("éé")
    assert "é" * 3 not in big.text
    assert "it has 20 bytes and only the first 5 are included" in big.text
    assert (small.cut, small.text) == (False, "ok")


def test_a_folder_named_like_an_instruction_file_is_not_read(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").mkdir()  # a folder by that name is not a file
    assert load_instructions(tmp_path, ["AGENTS.md"], tmp_path / "u") == []


def test_the_default_prompt_names_the_facts_and_the_sandbox_when_there_is_one() -> None:
    facts = SessionFacts(
        cwd="/p",
        tools=["Read", "Bash"],
        permission_mode="plan",
        sandbox="workspace-write",
        today=date(2026, 12, 1),
        os_name="Linux 6.1",
    )
    text = render_default(facts)
    for fact in ("/p", "Read, Bash", "plan", "workspace-write", "2026-12-01", "Linux 6.1"):
        assert fact in text
    assert "Sandbox" not in render_default(SessionFacts("/p", [], "default"))


def test_instructions_follow_the_base_prompt_under_their_paths(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("rule one")
    text = compose_system_prompt("BASE", load_instructions(tmp_path, ["AGENTS.md"], tmp_path))
    assert text.startswith("BASE")
    assert text.index(str(tmp_path / "AGENTS.md")) < text.index("rule one")
    assert compose_system_prompt("BASE", []) == "BASE"
