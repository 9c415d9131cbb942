"""Glob and Grep over real directory trees."""

from __future__ import annotations

import os
import time
import tracemalloc
from pathlib import Path

import pytest
import trio

from robotad.tools import GlobTool, GrepTool, ToolContext
from robotad.tools import glob as glob_module
from robotad.tools import grep as grep_module
from tests.tools.tool_calls import call


def _tree(root: Path, files: dict[str, str | bytes]) -> None:
    """Create `files` under `root`, each modified one second after the one before it."""
    for age, (name, content) in enumerate(files.items()):
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
        os.utime(path, (1_000_000 + age, 1_000_000 + age))


@pytest.fixture
def project(tmp_path: Path) -> Path:
    _tree(
        tmp_path,
        {
            "README.md": "# project\nTODO: docs\n",
            "src/app.py": "import os\n\ndef main():\n    return os.getcwd()  # TODO\n",
            "src/util/helpers.py": "def helper():\n    pass\n",
            "src/web/page.ts": "export const todo = 1;\n",
            "image.png": b"\x89PNG\r\n\x1a\n\x00\x00TODO",
            ".git/config": "[core] TODO\n",
            ".git/hooks/pre-commit.py": "print('TODO')\n",
            ".env": "TODO=1\n",
        },
    )
    return tmp_path


# --- Glob ----------------------------------------------------------------------------------


async def test_glob_recursive_pattern_newest_first(project: Path) -> None:
    result = await call(GlobTool(), project, pattern="**/*.py")
    assert result.ok
    assert result.content.splitlines() == [
        str(project / "src/util/helpers.py"),
        str(project / "src/app.py"),
    ]
    assert result.metadata == {"path": str(project), "matches": 2, "truncated": False}


async def test_glob_star_stays_in_one_directory(project: Path) -> None:
    result = await call(GlobTool(), project, pattern="*")
    assert result.content.splitlines() == [
        str(project / ".env"),
        str(project / "image.png"),
        str(project / "README.md"),
    ]


async def test_glob_skips_version_control_internals(project: Path) -> None:
    result = await call(GlobTool(), project, pattern="**/*")
    assert not any("/.git/" in line for line in result.content.splitlines())
    assert str(project / ".env") in result.content.splitlines()


async def test_glob_inside_a_version_control_directory_when_asked(project: Path) -> None:
    result = await call(GlobTool(), project, pattern="*", path=".git")
    assert result.content.splitlines() == [str(project / ".git/config")]


async def test_glob_path_and_braces(project: Path) -> None:
    result = await call(GlobTool(), project, pattern="**/*.{ts,md}", path="src")
    assert result.content.splitlines() == [str(project / "src/web/page.ts")]


async def test_glob_leading_literal_segments_move_the_search(project: Path) -> None:
    result = await call(GlobTool(), project / "src", pattern="../src/util/*.py")
    assert result.content.splitlines() == [str(project / "src/util/helpers.py")]
    assert result.metadata["path"] == str(project / "src/util")

    absolute = await call(GlobTool(), Path("/"), pattern=f"{project}/src/*.py")
    assert absolute.content.splitlines() == [str(project / "src/app.py")]


async def test_glob_caps_results_with_a_note(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(glob_module, "MAX_RESULTS", 2)
    result = await call(GlobTool(), project, pattern="**/*")
    lines = result.content.splitlines()
    assert lines[:2] == [str(project / ".env"), str(project / "image.png")]
    assert lines[2].startswith("[6 files matched; showing the 2 most recently modified")
    assert result.metadata["truncated"] is True


async def test_glob_holds_only_the_matches_it_shows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A list of every match grew ~300 bytes a file: a search of a home folder's millions of
    # files held hundreds of megabytes to show a thousand.
    monkeypatch.setattr(glob_module, "MAX_RESULTS", 3)
    for folder in range(40):
        (tmp_path / f"d{folder:02d}").mkdir()
        for name in range(100):
            (tmp_path / f"d{folder:02d}" / f"file-{name:03d}.txt").touch()
    newest = tmp_path / "d07" / "file-042.txt"
    os.utime(newest, (2_000_000_000, 2_000_000_000))
    tracemalloc.start()
    try:
        result = await call(GlobTool(), tmp_path, pattern="**/*.txt")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    lines = result.content.splitlines()
    assert lines[0] == str(newest)
    assert lines[3].startswith("[4000 files matched; showing the 3 most recently modified")
    assert result.metadata["matches"] == 4000
    assert peak < 400_000  # every match held: about 1.2 MB


async def test_glob_with_no_match_is_a_successful_empty_answer(project: Path) -> None:
    result = await call(GlobTool(), project, pattern="**/*.rs")
    assert result.ok
    assert result.content == f"No files match '**/*.rs' under {project}"


async def test_glob_refuses_a_missing_directory_and_a_bad_pattern(project: Path) -> None:
    missing = await call(GlobTool(), project, pattern="*", path="nowhere")
    assert not missing.ok
    assert missing.content == f"search directory {project / 'nowhere'} does not exist"
    not_dir = await call(GlobTool(), project, pattern="*", path="README.md")
    assert not not_dir.ok
    assert "is not a directory" in not_dir.content
    directory = await call(GlobTool(), project, pattern="src/")
    assert not directory.ok
    assert directory.content == "'src/' names a directory; add a file pattern, e.g. src/*"
    exploding = await call(GlobTool(), project, pattern="{a,b}" * 10)
    assert not exploding.ok
    assert "alternatives" in exploding.content


async def test_glob_does_not_follow_directory_symlinks(project: Path) -> None:
    (project / "src" / "loop").symlink_to(project)
    (project / "linked.py").symlink_to(project / "src" / "app.py")
    (project / "broken.py").symlink_to(project / "nothing")
    result = await call(GlobTool(), project, pattern="**/*.py")
    lines = result.content.splitlines()
    assert str(project / "linked.py") in lines
    assert str(project / "broken.py") not in lines
    assert not any("/loop/" in line for line in lines)


async def test_glob_ignores_the_process_cwd(
    project: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """G-117: a relative search path is taken from the session's cwd."""
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    (elsewhere / "src").mkdir()
    (elsewhere / "src" / "decoy.py").write_text("")
    monkeypatch.chdir(elsewhere)
    result = await call(GlobTool(), project, pattern="*.py", path="src")
    assert result.content.splitlines() == [str(project / "src/app.py")]


class _SlowJudge:
    """A session policy that takes 10 ms to judge each file a listing shows (as a slow disk
    takes to stat it), and says when it judged the first (`judging`)."""

    def __init__(self) -> None:
        self.judging = trio.Event()
        self._token = trio.lowlevel.current_trio_token()

    def exempts(self, tool_name: str, host: str) -> bool:
        return False

    def withholds(self, tool_name: str, path: str, root: str) -> bool:
        return False

    def hides(self, tool_name: str, path: str) -> bool:
        self._token.run_sync_soon(self.judging.set)
        time.sleep(0.01)
        return False


async def test_a_cancelled_glob_stops_inside_a_folder(tmp_path: Path) -> None:
    """The tool's side of G-095: Glob looked for a cancellation once a folder, so a turn
    aborted while it listed one large folder waited for the whole listing (every file is
    stat'ed and judged: a second for 200,000 cached files, far longer on a slow disk). It now
    looks before each file. Here the folder takes half a minute; the call is cancelled once
    its first file was judged and must stop within seconds."""
    for name in range(3000):
        (tmp_path / f"f{name:04d}.txt").touch()
    judge = _SlowJudge()
    glob = GlobTool()
    scope = trio.CancelScope()

    async def list_until_cancelled() -> None:
        with scope:
            arguments = glob.decode_arguments({"pattern": "*.txt"})
            await glob.run(arguments, ToolContext(tmp_path, "test-session", judge))

    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(list_until_cancelled)
            await judge.judging.wait()
            scope.cancel()
        await trio.lowlevel.checkpoint()  # a listing that outran the bound fails here
    assert scope.cancelled_caught


# --- Grep ----------------------------------------------------------------------------------


async def test_grep_reports_path_line_and_text(project: Path) -> None:
    result = await call(GrepTool(), project, pattern=r"TODO")
    assert result.ok
    assert result.content.splitlines() == [
        f"{project}/.env:1:TODO=1",
        f"{project}/README.md:2:TODO: docs",
        f"{project}/src/app.py:4:    return os.getcwd()  # TODO",
        "[skipped 1 binary file(s)]",
    ]
    assert result.metadata == {
        "path": str(project),
        "matches": 3,
        "files": 3,
        "truncated": False,
    }


async def test_grep_glob_without_slash_matches_names_at_any_depth(project: Path) -> None:
    result = await call(GrepTool(), project, pattern=r"^def ", glob="*.py")
    assert result.content.splitlines() == [
        f"{project}/src/app.py:3:def main():",
        f"{project}/src/util/helpers.py:1:def helper():",
    ]


async def test_grep_glob_with_slash_matches_relative_paths(project: Path) -> None:
    result = await call(GrepTool(), project, pattern=r"(?i)todo", glob="src/**/*.ts")
    assert result.content == f"{project}/src/web/page.ts:1:export const todo = 1;"


async def test_grep_a_single_file(project: Path) -> None:
    result = await call(GrepTool(), project / "src", pattern="os", path="app.py")
    assert result.content.splitlines() == [
        f"{project}/src/app.py:1:import os",
        f"{project}/src/app.py:4:    return os.getcwd()  # TODO",
    ]


async def test_grep_refuses_a_binary_single_file(project: Path) -> None:
    result = await call(GrepTool(), project, pattern="TODO", path="image.png")
    assert not result.ok
    assert "binary" in result.content


async def test_grep_skips_files_over_the_size_limit(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(grep_module, "MAX_FILE_BYTES", 22)
    result = await call(GrepTool(), project, pattern="TODO")
    assert result.content.splitlines() == [
        f"{project}/.env:1:TODO=1",
        f"{project}/README.md:2:TODO: docs",
        "[skipped 1 binary file(s), 3 file(s) over 22 bytes]",
    ]


async def test_grep_caps_matches_with_a_note(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(grep_module, "MAX_MATCHES", 3)
    (tmp_path / "many.txt").write_text("hit\n" * 10)
    result = await call(GrepTool(), tmp_path, pattern="hit")
    lines = result.content.splitlines()
    assert lines[:3] == [f"{tmp_path}/many.txt:{n}:hit" for n in (1, 2, 3)]
    assert lines[3].startswith("[stopped after 3 matches")
    assert result.metadata["truncated"] is True


async def test_grep_cuts_long_matching_lines(tmp_path: Path) -> None:
    (tmp_path / "wide.txt").write_text("needle" + "x" * 1000 + "\n")
    result = await call(GrepTool(), tmp_path, pattern="needle")
    shown = result.content.split(":", 2)[2]
    assert shown == ("needle" + "x" * 1000)[: grep_module.MAX_LINE_CHARS] + " …"


async def test_grep_invalid_regex_is_a_failed_result(project: Path) -> None:
    result = await call(GrepTool(), project, pattern="(unclosed")
    assert not result.ok
    assert result.content.startswith("invalid regular expression '(unclosed'")


async def test_a_pattern_that_backtracks_without_end_is_stopped_and_stops_nothing_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``(a|aa)+$`` on a line of a's that ends otherwise backtracks for longer than anyone
    waits. With `re` it held the interpreter lock all the while, and every session of the
    daemon with it; now the search gives up at its deadline, naming the line, and the event
    loop runs meanwhile (the ticker below keeps ticking)."""
    monkeypatch.setattr(grep_module, "TIME_LIMIT_S", 0.5)
    (tmp_path / "fine.txt").write_text("nothing here\n")
    (tmp_path / "trap.txt").write_text("ok\n" + "a" * 60 + "b\n")
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await trio.sleep(0.01)
            ticks += 1

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ticker)
        result = await call(GrepTool(), tmp_path, pattern="(a|aa)+$")
        nursery.cancel_scope.cancel()
    assert not result.ok
    assert result.content.startswith(
        f"the pattern '(a|aa)+$' took more than 0.5 s to search (stopped at {tmp_path}/trap.txt:2)"
    )
    assert ticks >= 2


async def test_grep_missing_path_is_a_failed_result(project: Path) -> None:
    result = await call(GrepTool(), project, pattern="x", path="nowhere")
    assert not result.ok
    assert result.content == f"cannot search: {project / 'nowhere'} does not exist"


async def test_grep_without_matches_is_a_successful_empty_answer(project: Path) -> None:
    result = await call(GrepTool(), project, pattern="zebra")
    assert result.ok
    assert result.content.splitlines()[0] == f"No matches for 'zebra' under {project}"
