"""The glob language shared by Glob and Grep's `glob` filter."""

from __future__ import annotations

import fnmatch

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from robotad.tools.glob_pattern import (
    MAX_ALTERNATIVES,
    GlobError,
    compile_glob,
    expand_braces,
    max_depth,
)


@pytest.mark.parametrize(
    ("pattern", "matches", "misses"),
    [
        ("*.py", ["a.py", ".hidden.py", ".py"], ["a.pyc", "d/a.py", "a.py/x"]),
        ("**/*.py", ["a.py", "d/a.py", "d/e/f/a.py"], ["a.txt", "d/a.pyc"]),
        ("src/**/*.ts", ["src/a.ts", "src/x/y/a.ts"], ["a.ts", "lib/src/a.ts", "src.ts"]),
        ("src/**", ["src/a", "src/a/b/c"], ["src", "other/a"]),
        ("**", ["a", "a/b/c"], []),
        ("a?c", ["abc", "a.c"], ["ac", "a/c", "abbc"]),
        ("[ab]*.md", ["a.md", "bcd.md"], ["c.md"]),
        ("[!ab]*", ["c", "zz"], ["a", "b1", "/x"]),
        ("[a-c]x", ["bx"], ["dx", "/x"]),
        ("*.{ts,tsx}", ["a.ts", "a.tsx"], ["a.t", "a.js", "a.{ts,tsx}"]),
        ("{src,test}/**/*.py", ["src/a.py", "test/x/b.py"], ["lib/a.py"]),
        ("{a,b{1,2}}.txt", ["a.txt", "b1.txt", "b2.txt"], ["b.txt", "b12.txt"]),
        ("{x}.txt", ["{x}.txt"], ["x.txt"]),
        ("{open.txt", ["{open.txt"], ["open.txt"]),
        ("lit\\*.txt", ["lit*.txt"], ["litx.txt"]),
        ("a+b (1).txt", ["a+b (1).txt"], ["aab (1).txt"]),
    ],
)
def test_pattern_matches_exactly_what_it_names(
    pattern: str, matches: list[str], misses: list[str]
) -> None:
    regex = compile_glob(pattern)
    for path in matches:
        assert regex.fullmatch(path), f"{pattern!r} should match {path!r}"
    for path in misses:
        assert not regex.fullmatch(path), f"{pattern!r} should not match {path!r}"


def test_empty_pattern_is_refused() -> None:
    with pytest.raises(GlobError, match="empty"):
        compile_glob("")


def test_brace_explosion_is_refused() -> None:
    with pytest.raises(GlobError, match=str(MAX_ALTERNATIVES)):
        expand_braces("{a,b}" * 9)


@pytest.mark.parametrize(
    ("repeated", "single"),
    [
        ("*" * 12 + "x", "*x"),
        ("a***b", "a*b"),
        ("**/**/**/*.py", "**/*.py"),
        ("src/**/**", "src/**"),
    ],
)
def test_runs_of_stars_compile_as_one(repeated: str, single: str) -> None:
    # Each repeated star tried every split of a name between them: twelve held the daemon's
    # interpreter a minute refusing one 30-character name.
    assert compile_glob(repeated).pattern == compile_glob(single).pattern
    assert compile_glob(repeated).fullmatch("a" * 40) is None


def test_expansion_keeps_order() -> None:
    assert expand_braces("x{1,2}y{a,b}") == ["x1ya", "x1yb", "x2ya", "x2yb"]


@pytest.mark.parametrize(
    ("pattern", "depth"),
    [("*.py", 1), ("a/*/c", 3), ("{a,b/c}/*", 3), ("**/*.py", None), ("x/{**,y}/z", None)],
)
def test_max_depth_bounds_the_walk(pattern: str, depth: int | None) -> None:
    assert max_depth(pattern) == depth


_name_chars = st.sampled_from(list("ab.-_ x"))
_pattern_chars = st.sampled_from([*"ab.-_ x", "*", "?", "[ab]", "[!a]"])


@settings(max_examples=200, deadline=None)
@given(st.lists(_pattern_chars, min_size=1, max_size=6), st.text(_name_chars, max_size=8))
def test_single_segment_patterns_agree_with_fnmatch(pieces: list[str], name: str) -> None:
    """Within one segment the language is the shell's, as fnmatch implements it."""
    pattern = "".join(pieces)
    assert bool(compile_glob(pattern).fullmatch(name)) == fnmatch.fnmatchcase(name, pattern)


def test_stars_between_letters_do_not_backtrack_without_end() -> None:
    """Ten stars between letters: `re` took 18 s to refuse one 40-character name (and the
    interpreter lock all the while, every session of the daemon with it); the pattern is
    compiled by `regex`, whose answer is immediate. Under `re` this test runs past its
    timeout."""
    pattern = compile_glob("*a" * 12 + "*b")
    assert pattern.fullmatch("a" * 40) is None
    assert pattern.fullmatch("a" * 12 + "b") is not None
