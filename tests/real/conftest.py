"""Fixtures of the real-model-server suite: the cached llama-server builds and model (built
when missing, or the tests skip saying why on a machine without a C toolchain), one
llama-server per version for the whole session, and a robotad configured for them.

The cache root is read once, at import, before the suite-wide fixture points
``XDG_CACHE_HOME`` at a fresh temp folder for each test: the builds are shared across runs.

Bounds: every reply is capped (`MAX_TOKENS`), so no turn waits for a small model rambling to
the end of its context window; a test's own deadline (`TURN_TIMEOUT`) falls before pytest's
(`TEST_TIMEOUT`), so a stall fails as trio's ``TooSlowError`` inside the test, not as a signal
that breaks the event loop for the tests after it. A failed test's report carries the tails of
the daemon's and the servers' logs.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.daemon_helpers import DaemonHome, RunningDaemon, running_daemon
from tests.real import build_deps
from tests.real.llama_server import LlamaServer, running_servers, start_llama_server

CACHE_ROOT = build_deps.cache_root()

#: The reply budget of every provider here (``max_tokens``): at the ~40 tokens/s a loaded
#: machine gives the 135M model, a few seconds of generation.
MAX_TOKENS = 160
#: Bound on one test's work with the daemon. Reading robota's ~2,000-token prompt the first
#: time takes ~16 s on an idle machine (one server thread, ~120 tokens/s); a loaded one has
#: been several times slower.
TURN_TIMEOUT = 240.0
#: pytest-timeout's bound on a test of this suite, setup included (a fixture may start a
#: server, up to `START_TIMEOUT`): past the test's own deadline, so that one fires first.
TEST_TIMEOUT = 360.0
#: Lines of each log a failed test's report shows.
_LOG_TAIL = 60


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
    for item in items:
        if rank(item):
            item.add_marker(pytest.mark.timeout(TEST_TIMEOUT))


def _tail(path: Path) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError as exc:
        return f"(unreadable: {exc})"
    return "\n".join(lines[-_LOG_TAIL:])


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """A failed test of this suite reports the end of its daemon's log and of every running
    server's: a stall is then told from a slow server by what each last wrote."""
    report = yield
    if report.failed and Path(__file__).parent in Path(str(item.fspath)).parents:
        funcargs = getattr(item, "funcargs", {})
        for name, value in funcargs.items():
            if isinstance(value, RunningDaemon):
                report.sections.append((f"robotad log ({name})", _tail(value.home.log_path)))
        for server in running_servers():
            report.sections.append((f"llama-server log ({server.log})", _tail(server.log)))
    return report


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


def openai_provider(name: str, server: LlamaServer, max_tokens: int = MAX_TOKENS) -> str:
    """A ``[providers.NAME]`` table for an OpenAI-compatible llama-server."""
    return (
        f'[providers.{name}]\nkind = "openai"\nbase_url = "{server.openai_base_url}"\n'
        f'model = "smollm2"\ncontext_window = 4096\nmax_tokens = {max_tokens}\n'
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
