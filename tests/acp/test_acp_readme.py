"""The README's editor configurations for ``robotactl acp`` are well-formed and say the same
thing: an absolute path to robotactl, run with ``acp``."""

from __future__ import annotations

import json
import re

from tests.robotad_process import REPO

FENCE = re.compile(r"```(\w+)\n(.*?)```", re.DOTALL)


def acp_section() -> str:
    text = (REPO / "README.md").read_text()
    start = text.index("## Editors over ACP")
    return text[start : text.index("\n## ", start + 1)]


def test_every_editor_has_a_config_with_an_absolute_robotactl_and_acp() -> None:
    section = acp_section()
    for editor in ("Zed", "CodeCompanion", "avante.nvim", "agent-shell", "JetBrains"):
        assert editor in section
    blocks = FENCE.findall(section)
    configs = [body for language, body in blocks if language in ("json", "lua", "elisp")]
    assert len(configs) == 5
    for body in configs:
        assert '"/home/me/.local/bin/robotactl"' in body
        assert '"acp"' in body


def test_the_json_configs_parse_as_agent_servers() -> None:
    for language, body in FENCE.findall(acp_section()):
        if language != "json":
            continue
        server = json.loads(body)["agent_servers"]["robota"]
        assert server["command"].startswith("/")
        assert server["args"] == ["acp"]
