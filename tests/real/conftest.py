"""Fixtures of the real-model-server suite: the cached llama-server builds and model (built
when missing, or the tests skip saying why on a machine without a C toolchain), one
llama-server per version for the whole session, and a robotad configured for them.

The cache root is read once, at import, before the suite-wide fixture points
``XDG_CACHE_HOME`` at a fresh temp folder for each test: the builds are shared across runs.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.daemon_helpers import DaemonHome, RunningDaemon, running_daemon
from tests.real import build_deps
from tests.real.llama_server import LlamaServer, start_llama_server

CACHE_ROOT = build_deps.cache_root()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run this suite last (OpenAI-server modules before the Anthropic one), so a first build
    started in the background by ``make test`` has the rest of the suite's time to finish."""
    here = Path(__file__).parent

    def rank(item: pytest.Item) -> int:
        path = Path(str(item.fspath))
        if here not in path.parents:
            return 0
        return 2 if "anthropic" in path.name else 1

    items.sort(key=rank)  # stable: the order within each rank is kept


def _cached(build: Callable[[], Path]) -> Path:
    """The artefact `build` returns (building it when missing, in the cache read at import),
    or a skip saying why it cannot be built here."""
    saved = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(CACHE_ROOT.parent)
    try:
        return build()
    except build_deps.ToolchainMissing as exc:
        pytest.skip(str(exc))
    finally:
        if saved is None:
            os.environ.pop("XDG_CACHE_HOME", None)
        else:
            os.environ["XDG_CACHE_HOME"] = saved


@pytest.fixture(scope="session")
def smollm2() -> Path:
    """The SmolLM2-135M-Instruct model file."""
    return _cached(build_deps.ensure_model)


@pytest.fixture(scope="session")
def openai_binary() -> Path:
    """llama-server of llama-cpp-python 0.3.16: OpenAI Chat Completions with tool calls."""
    return _cached(lambda: build_deps.ensure_server(build_deps.LLAMA_CPP_PYTHON_OPENAI))


@pytest.fixture(scope="session")
def anthropic_binary() -> Path:
    """llama-server of llama-cpp-python 0.3.36: also Anthropic's ``/v1/messages``."""
    return _cached(lambda: build_deps.ensure_server(build_deps.LLAMA_CPP_PYTHON_ANTHROPIC))


@pytest.fixture(scope="session")
def openai_server(
    openai_binary: Path, smollm2: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LlamaServer]:
    """One 0.3.16 llama-server for the whole session."""
    log = tmp_path_factory.mktemp("llama-openai") / "server.log"
    server = start_llama_server(openai_binary, smollm2, log)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def anthropic_server(
    anthropic_binary: Path, smollm2: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LlamaServer]:
    """One 0.3.36 llama-server for the whole session."""
    log = tmp_path_factory.mktemp("llama-anthropic") / "server.log"
    server = start_llama_server(anthropic_binary, smollm2, log)
    try:
        yield server
    finally:
        server.stop()


def openai_provider(name: str, server: LlamaServer) -> str:
    """A ``[providers.NAME]`` table for an OpenAI-compatible llama-server."""
    return (
        f'[providers.{name}]\nkind = "openai"\nbase_url = "{server.openai_base_url}"\n'
        'model = "smollm2"\ncontext_window = 4096\n'
    )


def anthropic_provider(name: str, server: LlamaServer) -> str:
    """A ``[providers.NAME]`` table for llama-server's Anthropic Messages endpoint."""
    return (
        f'[providers.{name}]\nkind = "anthropic"\nbase_url = "{server.origin}"\n'
        'model = "smollm2"\ncontext_window = 4096\nmax_tokens = 64\n'
    )


def logged_stop_reasons(daemon: RunningDaemon, session_id: str) -> list[str | None]:
    """The stop reason of every provider response in the session's log, in order (as the
    provider normalised it from the server's own: ``tool_calls``, ``length``, ``max_tokens``…)."""
    path = daemon.home.state_dir / "logs" / f"{session_id}.jsonl"
    reasons: list[str | None] = []
    for line in path.read_text().splitlines():
        entry = json.loads(line)
        if entry["event"] == "provider_response" and "normalized" in entry["data"]:
            reasons.append(entry["data"]["normalized"].get("stopReason"))
    return reasons


def daemon_with(tmp_path_factory: pytest.TempPathFactory, config: str) -> Iterator[RunningDaemon]:
    """A robotad configured with `config` (for a module fixture to yield from)."""
    home = DaemonHome(tmp_path_factory.mktemp("daemon"))
    home.write_config(config)
    with running_daemon(home) as daemon:
        yield daemon
