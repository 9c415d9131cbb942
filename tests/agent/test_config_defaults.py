"""config.toml's ``[defaults]`` and ``[instructions]`` tables: values, defaults, located errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from robotad.config import ConfigError, load_config


def test_absent_tables_mean_no_round_limit_and_agents_md(tmp_path: Path) -> None:
    config = load_config(tmp_path / "missing.toml")
    assert config.defaults.max_rounds is None
    assert config.instructions.files == ["AGENTS.md"]


def test_the_values_given_are_kept(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(
        '[defaults]\nmax_rounds = 8\n[instructions]\nfiles = ["CLAUDE.md", "AGENTS.md"]\n'
    )
    config = load_config(path)
    assert config.defaults.max_rounds == 8
    assert config.instructions.files == ["CLAUDE.md", "AGENTS.md"]


def test_bad_values_are_refused_each_at_its_path(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[defaults]\nmax_rounds = 0\nother = 1\n[instructions]\nfiles = [""]\n')
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    paths = sorted(issue["path"] for issue in caught.value.issues)
    assert paths == ["defaults.max_rounds", "defaults.other", "instructions.files[0]"]


@pytest.mark.parametrize("blank", [" ", "\t  "])
def test_an_instruction_file_name_of_spaces_only_is_refused_at_its_index(
    tmp_path: Path, blank: str
) -> None:
    """A name of spaces only was taken, and looked for as a file of that name in every folder
    of every session; like a provider table of spaces only, it is a located error at start."""
    path = tmp_path / "config.toml"
    path.write_text(f'[instructions]\nfiles = ["AGENTS.md", "{blank}"]\n')
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    (issue,) = caught.value.issues
    assert issue["path"] == "instructions.files[1]"
    assert issue["message"].startswith("an instruction file name cannot be empty or only spaces")
    assert "instructions.files[1]: an instruction file name" in str(caught.value)
