"""Added wall time of a sandboxed Bash call (PROTOCOL.md §10.4), against the unsandboxed floor.

Run: ``.venv/bin/python bench/sandbox.py [--runs N]``. Prints figures; asserts nothing.

Each row is one command run through the Bash tool exactly as a session runs it (spawn, capture,
process-tree cleanup), unsandboxed and under ``workspace-write`` (with and without the
network), in a workspace holding a 1,000-file tree. The variants are run alternately, round
after round, so a machine that slows down mid-run slows all of them alike; each figure is the
median of its runs, and each sandboxed one is printed as the time it adds to, and its ratio
with, the unsandboxed floor of the same run. Needs bubblewrap (Debian package
``bubblewrap``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import trio

from robotad.sandbox import Confinement, SandboxPolicy, SandboxProbe, probe_sandbox
from robotad.tools import BashTool, ToolContext

COMMANDS = {"true": "true", "ls -R (1,000 files)": "ls -R tree > /dev/null"}


def make_tree(root: Path, files: int = 1000, per_folder: int = 50) -> None:
    for n in range(files):
        folder = root / "tree" / f"d{n // per_folder:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"f{n:04d}.txt").write_text("x\n")


async def timed(tool: BashTool, command: str, cwd: Path) -> float:
    arguments = tool.decode_arguments({"command": command})
    start = time.perf_counter()
    result = await tool.run(arguments, ToolContext(cwd=cwd, session_id="bench"))
    elapsed = time.perf_counter() - start
    if not result.ok:
        raise SystemExit(f"{command!r} failed: {result.content}")
    return elapsed


async def main(runs: int) -> None:
    support = await probe_sandbox()
    if not support.available:
        raise SystemExit(f"cannot sandbox here: {support.reason}")
    probe = SandboxProbe(known=support)
    tools = {
        "unsandboxed": BashTool(),
        "workspace-write": BashTool(
            Confinement(SandboxPolicy(mode="workspace-write"), probe=probe)
        ),
        "workspace-write, network": BashTool(
            Confinement(SandboxPolicy(mode="workspace-write", network=True), probe=probe)
        ),
    }
    with tempfile.TemporaryDirectory(dir="/var/tmp") as folder:
        cwd = Path(folder)
        make_tree(cwd)
        (cwd / ".git").mkdir()
        print(f"{support.describe()}; {runs} alternating runs per figure, medians")
        print(f"{'command':<22} {'variant':<26} {'median ms':>10} {'added ms':>9} {'ratio':>6}")
        for label, command in COMMANDS.items():
            times: dict[str, list[float]] = {name: [] for name in tools}
            for _ in range(3):  # warm caches
                for tool in tools.values():
                    await timed(tool, command, cwd)
            for _ in range(runs):
                for name, tool in tools.items():
                    times[name].append(await timed(tool, command, cwd))
            floor = statistics.median(times["unsandboxed"])
            for name, samples in times.items():
                median = statistics.median(samples)
                added = "" if name == "unsandboxed" else f"{(median - floor) * 1000:+9.1f}"
                ratio = "" if name == "unsandboxed" else f"{median / floor:6.2f}"
                print(f"{label:<22} {name:<26} {median * 1000:10.1f} {added:>9} {ratio:>6}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    options = parser.parse_args()
    trio.run(main, options.runs)
    sys.exit(0)
