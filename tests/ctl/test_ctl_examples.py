"""The examples a new user starts from: every configuration decodes with robotad's own loader,
the demo script is a valid scripted conversation, and ``make run``'s demo works end to end."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from protocol.methods import Step
from robotad.config import load_config
from robotad.providers import DEFAULT_MODELS, resolve_provider_config
from robotad.providers.scripted import decode_script
from robotad.session.permissions.patterns import parse_rules
from robotad.tools import builtin_tools

from .conftest import PROCESS_TIMEOUT, REPO, child_environment

EXAMPLES = REPO / "examples"
CONFIGS = sorted(EXAMPLES.glob("*.toml"))


def test_the_examples_include_each_kind_of_provider() -> None:
    names = {path.name for path in CONFIGS}
    assert {"config.demo.toml", "config.openai.toml", "config.anthropic.toml"} <= names
    kinds = {spec.kind for path in CONFIGS for spec in load_config(path).providers.values()}
    assert kinds == set(DEFAULT_MODELS)


@pytest.mark.parametrize("path", CONFIGS, ids=lambda path: path.name)
def test_every_example_config_loads_with_the_real_loader(path: Path) -> None:
    config = load_config(path)
    # The default provider resolves, and every permission pattern parses for the real tools.
    resolve_provider_config(config.default_provider, config)
    profiles = {tool.name: tool.profile for tool in builtin_tools()}
    for kind in ("allow", "ask", "deny"):
        parse_rules(getattr(config.permissions, kind), f"$.permissions.{kind}", profiles)


def test_openai_example_has_a_local_server_without_a_key() -> None:
    config = load_config(EXAMPLES / "config.openai.toml")
    local = [spec for spec in config.providers.values() if spec.base_url is not None]
    assert local, "expected an Ollama / llama.cpp base_url example"
    assert all(spec.base_url.startswith("http://127.0.0.1") for spec in local if spec.base_url)
    assert all(spec.api_key_env is None for spec in local)


def test_no_example_holds_a_key() -> None:
    for path in CONFIGS:
        text = path.read_text()
        assert "sk-" not in text.replace("sk-...", "").replace("sk-ant-...", "")


def test_the_demo_script_is_a_valid_scripted_conversation() -> None:
    raw = (EXAMPLES / "demo-script.json").read_bytes()
    steps = msgspec.json.decode(raw, type=list[Step])
    decode_script(msgspec.json.decode(raw))  # the daemon's own decoder agrees
    assert len(steps) == 2
    first, last = steps
    assert isinstance(first.text, str)
    assert first.chunks > 1
    assert first.tool_calls != msgspec.UNSET
    assert [call.name for call in first.tool_calls or []] == ["Write"]
    assert isinstance(last.text, str)
    assert last.chunks > 1


def test_make_run_demo_runs_end_to_end(tmp_path: Path) -> None:
    """`make run`: a private daemon, a streamed turn, the Write approved with a visible line,
    the file really written, the daemon shut down; exit 0."""
    bin_dir = Path(sys.executable).parent
    assert (bin_dir / "robotactl").exists(), f"robotactl is not installed in {bin_dir}"
    demo_dir = tmp_path / "demo"
    env = child_environment(
        PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        ROBOTA_DEMO_DIR=str(demo_dir),
    )
    completed = subprocess.run(
        ["bash", str(EXAMPLES / "demo.sh")],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=4 * PROCESS_TIMEOUT,
        check=False,
    )
    transcript = completed.stdout + completed.stderr
    assert completed.returncode == 0, transcript
    assert "approving Write(file_path=" in completed.stderr
    written = demo_dir / "work" / "hello.txt"
    assert written.read_text().startswith("Hello from robota!")
    assert "Hello from robota!" in completed.stdout  # the demo showed the file
    assert "robotad has shut down" in completed.stdout
    assert not (demo_dir / "run" / "robotad.sock").exists()
    assert "\x1b[" not in transcript  # not a terminal: no colour
