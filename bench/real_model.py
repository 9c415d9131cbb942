"""robotad's cost on a real model: time to first token and tokens/s, direct vs through robotad.

Run: ``.venv/bin/python bench/real_model.py [--runs N]``. Prints figures; asserts nothing.

One llama-server (llama.cpp from the ``llama-cpp-python==0.3.16`` sdist, SmolLM2-135M-Instruct;
built and cached by ``tests/real/build_deps.py`` when missing) serves greedy decoding with a
fixed budget (``--temp 0 -n 64``), so every request produces the same tokens. The same request
— a short system message, one user prompt, robotad's seven tool schemas with
``tool_choice: "none"``, streamed with usage — is sent `--runs` times each way, alternating:

- direct: the ``openai`` SDK straight to llama-server; time to first token is from the call to
  the first content delta;
- robotad: ``session/run`` on a fresh session (so the history is the same each time) of a real
  robotad whose ``openai`` provider points at the same server; time to first token is from
  sending the request to the first ``text_delta`` event reaching the client.

The daemon runs as users run it: without the test suite's strict decode of every published
event (``ROBOTA_CHECK_EVENTS``), which costs robotad, not the direct side, a validation per
event. Tokens/s is ``(completion tokens - 1) / (last delta - first delta)`` on each side. Targets:
robotad's median time to first token at most the direct median + 5 ms; its median tokens/s at
least 0.95 × direct.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import msgspec
import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.daemon_helpers import DaemonHome, running_daemon
from tests.real import build_deps
from tests.real.llama_server import LlamaServer, start_llama_server

SYSTEM = "You are a helpful assistant. Answer in plain prose."
PROMPT = "Describe a lighthouse on a stormy night."
TTFT_MARGIN_MS = 5.0
RATE_FLOOR = 0.95


class Sample(msgspec.Struct):
    ttft: float
    rate: float


def direct_sample(server: LlamaServer) -> Sample:
    """One streamed request with the openai SDK (blocking; run in a thread)."""
    import openai

    from robotad.providers.convert import openai_tools
    from robotad.tools import builtin_tools

    client = openai.OpenAI(base_url=server.openai_base_url, api_key="no-key", max_retries=0)
    tools = openai_tools([tool.schema for tool in builtin_tools()])
    started = time.perf_counter()
    first = last = 0.0
    tokens = 0
    stream = client.chat.completions.create(
        model="smollm2",
        messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": PROMPT}],
        tools=tools,  # type: ignore[arg-type]
        tool_choice="none",
        stream=True,
        stream_options={"include_usage": True},
    )
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            last = time.perf_counter()
            first = first or last
        if chunk.usage is not None:
            tokens = chunk.usage.completion_tokens
    client.close()
    return Sample(first - started, (tokens - 1) / (last - first))


async def robotad_sample(socket: Path, cwd: Path) -> Sample:
    """One ``session/run`` on a fresh session, timed at the client."""
    from protocol.client import open_connection

    marks: list[float] = []

    def on_event(method: str, params: msgspec.Raw) -> None:
        if method == "session/event" and b'"type":"text_delta"' in bytes(params):
            marks.append(time.perf_counter())

    async with open_connection(socket, on_notification=on_event) as peer:
        params = {"cwd": str(cwd), "provider": "llama", "systemMessage": SYSTEM}
        info = await peer.request("session/create", params)
        session_id = info["sessionId"]
        started = time.perf_counter()
        await peer.request(
            "session/run", {"sessionId": session_id, "prompt": PROMPT, "toolChoice": "none"}
        )
        history = await peer.request("session/history", {"sessionId": session_id})
        await peer.request("session/close", {"sessionId": session_id})
    tokens = history["messages"][-1]["metadata"]["usage"]["outputTokens"]
    return Sample(marks[0] - started, (tokens - 1) / (marks[-1] - marks[0]))


async def measure(server: LlamaServer, socket: Path, cwd: Path, runs: int) -> None:
    direct: list[Sample] = []
    through: list[Sample] = []
    # One warm-up each way: the server's prompt cache, robotad's imports and SDK client.
    await trio.to_thread.run_sync(direct_sample, server)
    await robotad_sample(socket, cwd)
    for _ in range(runs):
        direct.append(await trio.to_thread.run_sync(direct_sample, server))
        through.append(await robotad_sample(socket, cwd))
    report(direct, through)


def report(direct: list[Sample], through: list[Sample]) -> None:
    d_ttft = statistics.median(s.ttft for s in direct) * 1e3
    r_ttft = statistics.median(s.ttft for s in through) * 1e3
    d_rate = statistics.median(s.rate for s in direct)
    r_rate = statistics.median(s.rate for s in through)
    ttft_ok = "ok" if r_ttft <= d_ttft + TTFT_MARGIN_MS else "OVER TARGET"
    rate_ok = "ok" if r_rate >= RATE_FLOOR * d_rate else "UNDER TARGET"
    print(f"runs: {len(direct)} each way, alternating")
    print(
        f"time to first token: direct {d_ttft:.1f} ms, robotad {r_ttft:.1f} ms "
        f"(+{r_ttft - d_ttft:.1f} ms; target <= +{TTFT_MARGIN_MS:.0f} ms: {ttft_ok})"
    )
    print(
        f"tokens/s: direct {d_rate:.1f}, robotad {r_rate:.1f} "
        f"({r_rate / d_rate:.3f}x; target >= {RATE_FLOOR}x: {rate_ok})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    try:
        binary = build_deps.ensure_server(build_deps.LLAMA_CPP_PYTHON_OPENAI)
    except build_deps.ToolchainMissing as exc:
        print(f"real_model: skipped, {exc}")
        return
    model = build_deps.ensure_model()
    with tempfile.TemporaryDirectory(prefix="bench-real-") as folder:
        root = Path(folder)
        server = start_llama_server(
            binary, model, root / "server.log", "--temp", "0", "-n", "64", "--seed", "1"
        )
        try:
            home = DaemonHome(root / "daemon", check_events=False)
            home.write_config(
                '[providers.llama]\nkind = "openai"\n'
                f'base_url = "{server.openai_base_url}"\nmodel = "smollm2"\n'
                "idle_timeout_ms = 600000\n"
            )
            (root / "work").mkdir()
            with running_daemon(home, "--log-level", "warning") as daemon:
                trio.run(measure, server, daemon.socket_path, root / "work", args.runs)
        finally:
            server.stop()


if __name__ == "__main__":
    main()
