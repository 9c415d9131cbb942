"""robotactl's command line without a daemon: parsing, usage errors, exit codes, rendering,
and the promise that ``--help`` stays lean (CONTRIBUTING.md: heavy imports are lazy)."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

import robotactl
from robotactl.cli import COMMANDS, cli
from robotactl.commands.call import JSON_PARAMS
from robotactl.commands.daemon import format_uptime, status_rows
from robotactl.exit_codes import EXIT_CODES_HELP, ExitCode
from robotactl.render import Output, color_enabled, format_rpc_error

from .conftest import REPO, child_environment


def invoke(*args: str, input: str | None = None) -> Any:
    return CliRunner().invoke(cli, list(args), input=input, prog_name="robotactl")


# -- the command group ----------------------------------------------------------------------


def test_help_lists_every_command_and_the_exit_codes() -> None:
    result = invoke("--help")
    assert result.exit_code == 0
    for name in COMMANDS:
        assert f"\n  {name} " in result.output
    for line in ("0  completed", "1  error", "2  usage", "3  waiting for approval", "4  aborted"):
        assert line in result.output
    assert "ROBOTA_NO_AUTOSTART" in result.output


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_each_commands_help_is_plain_text_and_says_what_json_prints(name: str) -> None:
    """`shutdown --help` showed its docstring's reStructuredText (``--json``) to the user,
    and `mcp --help` never said that the global --json (which the README shows it with)
    prints the mcp/list result."""
    result = invoke(name, "--help")
    assert result.exit_code == 0, result.output
    assert "``" not in result.output
    if name not in ("acp", "call", "chat"):  # JSON-RPC for editors; JSON always; a REPL
        assert "With --json" in result.output


def test_exit_code_table_matches_the_enum() -> None:
    assert [int(code) for code in ExitCode] == [0, 1, 2, 3, 4]
    for code in ExitCode:
        assert f"  {int(code)}  " in EXIT_CODES_HELP


def test_version_matches_pyproject() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert robotactl.__version__ == project["version"]
    result = invoke("--version")
    assert result.exit_code == 0
    assert result.output == f"robotactl {project['version']}\n"


@pytest.mark.parametrize(
    "args",
    [
        ["frobnicate"],  # unknown command
        ["--bogus", "status"],  # unknown global option
        ["status", "--json"],  # global options go before the command
        ["call"],  # METHOD missing
        ["shutdown", "--grace", "-1"],
        ["shutdown", "--grace", "soon"],
        ["call", "daemon/status", "{}", "extra"],
    ],
)
def test_usage_errors_exit_2_without_contacting_a_daemon(args: list[str], socket_dir: Path) -> None:
    result = invoke("--socket", str(socket_dir / "robotad.sock"), *args)
    assert result.exit_code == ExitCode.USAGE, result.output
    assert "Usage:" in result.output
    assert not (socket_dir / "robotad.sock").exists()  # nothing was started


def test_a_usage_error_shows_the_controls_of_what_was_typed(socket_dir: Path) -> None:
    """click quotes an extra argument as it was typed: an escape sequence or a bidi override
    in it reached the terminal (here it would clear the screen)."""
    result = invoke("--socket", str(socket_dir / "s"), "ls", "a\x1b[2Jb\rc\u202ed")
    assert result.exit_code == ExitCode.USAGE, result.output
    assert "Got unexpected extra argument (a^[[2Jb^Mc<U+202E>d)" in result.output
    assert "\x1b" not in result.output
    assert "\u202e" not in result.output


@pytest.mark.parametrize(
    ("typed", "said"), [(["--json"], "--json"), (["--socket", "/s.sock"], "--socket PATH")]
)
def test_a_global_option_after_the_command_suggests_nothing_else(
    typed: list[str], said: str
) -> None:
    """`show --json` ended "… robotactl --json show … Did you mean '--session'?": click's
    guess, after the sentence that says which option it is and where it goes."""
    for json_before in (False, True):
        result = invoke(*(["--json"] if json_before else []), "show", *typed)
        assert result.exit_code == ExitCode.USAGE, result.output
        where = f"It is a global option, given before the command: robotactl {said} show …"
        assert where in result.output
        assert "Did you mean" not in result.output


def test_a_duration_that_is_no_number_is_said_in_words() -> None:
    result = invoke("shutdown", "--grace", "soon")
    assert result.exit_code == ExitCode.USAGE, result.output
    assert "'soon' is not a number of seconds" in result.output


def test_global_options_reach_the_command() -> None:
    seen: dict[str, Any] = {}

    @cli.command("probe-options", hidden=True)
    @click.pass_obj
    def probe(options: Any) -> None:
        seen.update(
            socket=options.socket_path,
            autostart=options.autostart,
            json_mode=options.output.json_mode,
        )

    try:
        result = invoke("--socket", "/x/y.sock", "--json", "--no-autostart", "probe-options")
        assert result.exit_code == 0, result.output
        assert seen == {"socket": Path("/x/y.sock"), "autostart": False, "json_mode": True}
        seen.clear()
        result = CliRunner(env={"ROBOTA_NO_AUTOSTART": "1", "ROBOTA_SOCKET": "/e.sock"}).invoke(
            cli, ["probe-options"]
        )
        assert result.exit_code == 0, result.output
        assert seen == {"socket": Path("/e.sock"), "autostart": False, "json_mode": False}
    finally:
        cli.commands.pop("probe-options")


# -- call: params -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": [1, 2, {"b": null}]}', {"a": [1, 2, {"b": None}]}),
        ("[1, 2]", [1, 2]),
        ("null", {}),
        ('  {"ünï": "cödé"}  ', {"ünï": "cödé"}),
    ],
)
def test_json_params_accepts_objects_arrays_and_null(text: str, expected: Any) -> None:
    assert JSON_PARAMS.convert(text, None, None) == expected


def test_invalid_json_is_a_located_usage_error(socket_dir: Path) -> None:
    result = invoke("--socket", str(socket_dir / "s"), "call", "daemon/status", '{"a": 1 "b": 2}')
    assert result.exit_code == ExitCode.USAGE
    assert "line 1, column 9" in result.output
    # The offending line is quoted with a caret under column 9.
    lines = result.output.splitlines()
    quoted = next(i for i, line in enumerate(lines) if line.strip() == '{"a": 1 "b": 2}')
    assert lines[quoted + 1] == "  " + " " * 8 + "^"


def test_invalid_json_on_stdin_names_its_line() -> None:
    result = invoke("call", "daemon/status", "-", input='{\n  "a": 1,\n  "b": \n}\n')
    assert result.exit_code == ExitCode.USAGE
    assert "(stdin)" in result.output
    assert "line 4, column 1" in result.output


@pytest.mark.parametrize(
    ("text", "kind"), [("3", "number"), ('"x"', "string"), ("true", "boolean"), ("2.5", "number")]
)
def test_scalar_params_are_refused(text: str, kind: str) -> None:
    result = invoke("call", "daemon/status", text)
    assert result.exit_code == ExitCode.USAGE
    assert f"must be a JSON object or array, not a {kind}" in result.output


@pytest.mark.parametrize("text", ['{"query":\n', '[{"text": "a"},\n', "{\n\n"])
def test_json_cut_off_after_a_newline_is_a_located_usage_error(text: str) -> None:
    """The error sits on the empty line after the last newline: located there, no traceback."""
    result = invoke("call", "history/search", "-", input=text)
    assert result.exit_code == ExitCode.USAGE, result.output
    assert "not valid JSON (stdin)" in result.output
    assert f"line {text.count(chr(10)) + 1}, column 1" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("text", ["", " \n"])
def test_empty_stdin_is_refused_saying_so(text: str) -> None:
    """Said as empty, not as Python's "Expecting value at line 1, column 1" (a closed stdin
    reads as empty)."""
    result = invoke("call", "daemon/status", "-", input=text)
    assert result.exit_code == ExitCode.USAGE
    assert "not valid JSON (stdin): it is empty" in result.output


def test_a_control_character_in_a_json_string_is_located_in_plain_words() -> None:
    """Python's message ends in "at" already: it read "Invalid control character at at line"."""
    result = invoke("call", "daemon/status", '{"a\tb": 1}')
    assert result.exit_code == ExitCode.USAGE, result.output
    assert "Invalid control character at line 1, column 4" in result.output
    assert "at at" not in result.output


# -- rendering --------------------------------------------------------------------------------


class _Stream:
    def __init__(self, tty: bool) -> None:
        self._tty = tty

    def isatty(self) -> bool:
        return self._tty


def test_color_only_on_a_terminal_without_no_color() -> None:
    tty, pipe = _Stream(True), _Stream(False)
    assert color_enabled(tty, {}) is True  # type: ignore[arg-type]
    assert color_enabled(pipe, {}) is False  # type: ignore[arg-type]
    assert color_enabled(tty, {"NO_COLOR": "1"}) is False  # type: ignore[arg-type]
    assert color_enabled(tty, {"NO_COLOR": "0"}) is False  # type: ignore[arg-type]
    # no-color.org: an empty NO_COLOR does not count.
    assert color_enabled(tty, {"NO_COLOR": ""}) is True  # type: ignore[arg-type]
    assert color_enabled(tty, {"TERM": "dumb"}) is False  # type: ignore[arg-type]
    assert color_enabled(object(), {}) is False  # type: ignore[arg-type]


def test_styles_apply_only_when_colour_is_on() -> None:
    assert Output(color=False).style("x", "red") == "x"
    assert Output(color=True).style("x", "red", "bold") == "\x1b[31;1mx\x1b[0m"


def test_output_through_a_pipe_has_no_escape_codes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    result = CliRunner().invoke(cli, ["call"])  # a usage error goes through the same streams
    assert "\x1b[" not in result.output


def test_rpc_error_layout() -> None:
    assert format_rpc_error(-32601, "method not found: x") == "error -32601: method not found: x"
    text = format_rpc_error(-32602, "invalid params", {"issues": [{"path": "$.a", "message": "m"}]})
    assert text.splitlines() == [
        "error -32602: invalid params",
        "  $.a: m",
    ]
    # One issue the message already states (robotad's usual form) is said once.
    one = {"issues": [{"path": "$.provider", "message": "needs a key"}]}
    assert format_rpc_error(-32602, "invalid params: $.provider: needs a key", one) == (
        "error -32602: invalid params: $.provider: needs a key"
    )
    two = {"issues": [{"path": "$.a", "message": "m"}, {"path": "$.b", "message": "n"}]}
    assert format_rpc_error(-32602, "invalid params: $.a: m (and 1 more)", two).splitlines() == [
        "error -32602: invalid params: $.a: m (and 1 more)",
        "  $.a: m",
        "  $.b: n",
    ]


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0s"), (59.9, "59s"), (60, "1m 00s"), (3_725, "1h 02m"), (90_061, "1d 01h"), (-5, "0s")],
)
def test_format_uptime(seconds: float, text: str) -> None:
    assert format_uptime(seconds) == text


def test_status_rows_from_a_status_result() -> None:
    result = {
        "version": "0.1.0",
        "protocolVersion": 1,
        "pid": 4242,
        "startedAt": "2025-01-02T03:04:05Z",
        "socketPath": "/run/user/1000/robota/robotad.sock",
        "stateDir": "/home/u/.local/state/robota",
        "sessions": {"loaded": 3, "running": 1, "waiting": 0},
    }
    now = datetime(2025, 1, 2, 5, 10, 5, tzinfo=UTC)
    assert status_rows(result, now=now) == [
        ("version", "0.1.0 (protocol 1)"),
        ("pid", "4242"),
        ("uptime", "2h 06m (since 2025-01-02T03:04:05Z)"),
        ("socket", "/run/user/1000/robota/robotad.sock"),
        ("state dir", "/home/u/.local/state/robota"),
        ("sessions", "3 loaded, 1 running, 0 waiting"),
    ]


def test_status_rows_tolerate_missing_and_odd_members() -> None:
    rows = dict(status_rows({"startedAt": "yesterday", "sessions": []}, now=datetime.now(UTC)))
    assert rows["version"] == "?"
    assert rows["pid"] == "?"
    assert rows["uptime"] == "? (started yesterday)"
    assert rows["sessions"] == "?"


# -- startup cost (heavy imports are lazy) ---------------------------------------------------

_HEAVY = ("trio", "msgspec", "robotad", "protocol.peer", "protocol.client", "anthropic", "openai")

_PROBE = """
import json, sys
from click.testing import CliRunner
from robotactl.cli import COMMANDS, cli
result = CliRunner().invoke(cli, ["--help"])
assert result.exit_code == 0, result.output
for name in COMMANDS:  # every command module, as `--help` and dispatch import them
    assert cli.get_command(None, name) is not None
print(json.dumps(sorted(sys.modules)))
"""


def test_help_and_command_modules_import_nothing_heavy() -> None:
    """Listing commands (and importing each command's module) loads no trio, msgspec, peer
    or daemon code; those load only when a command actually talks to robotad."""
    completed = subprocess.run(
        [sys.executable, "-c", _PROBE],
        capture_output=True,
        text=True,
        env=child_environment(),
        timeout=60,
        check=True,
    )
    loaded = json.loads(completed.stdout)
    heavy = [m for m in loaded if any(m == h or m.startswith(h + ".") for h in _HEAVY)]
    assert heavy == []


# -- untrusted input: the JSON argument ---------------------------------------------------------

_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None)
@given(  # "-" alone means "read stdin": the stdin tests cover it
    st.text(max_size=40).filter(lambda t: t != "-")
    | st.sampled_from(["NaN", "[Infinity]", '{"a": -Infinity}'])
)
def test_any_argument_is_params_or_a_usage_error(text: str) -> None:
    """Whatever is typed, the result is structured params or a BadParameter — never a crash,
    and never a value strict JSON does not have (NaN, Infinity)."""
    try:
        decoded = json.loads(text, parse_constant=_not_json)
    except ValueError:
        decoded = _INVALID
    if decoded is None:
        assert JSON_PARAMS.convert(text, None, None) == {}
    elif isinstance(decoded, dict | list):
        assert JSON_PARAMS.convert(text, None, None) == decoded
    else:
        with pytest.raises(click.BadParameter, match="JSON"):
            JSON_PARAMS.convert(text, None, None)


_INVALID = object()


def _not_json(constant: str) -> Any:
    raise ValueError(constant)


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.text(max_size=8), _json_values, max_size=4) | st.lists(_json_values))
def test_structured_params_round_trip(value: Any) -> None:
    assert JSON_PARAMS.convert(json.dumps(value), None, None) == value


def test_the_license_is_an_spdx_string_setuptools_reads_without_warnings() -> None:
    """Issue 14: a ``license = {text = …}`` table made ``pip install`` print pages of
    setuptools deprecation warnings; an SPDX expression needs setuptools >= 77."""
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert pyproject["project"]["license"] == "MIT"
    assert "setuptools>=77" in pyproject["build-system"]["requires"]
    classifiers = pyproject["project"].get("classifiers", [])
    assert not [c for c in classifiers if c.startswith("License ::")]


def test_a_number_too_large_for_a_double_is_refused_not_sent_as_null() -> None:
    """Python reads 1e400 as infinity, which goes out as null: a value the user never typed."""
    for text in ('{"limit": 1e400}', "[-1e999]"):
        with pytest.raises(click.BadParameter, match="too large"):
            JSON_PARAMS.convert(text, None, None)
    assert JSON_PARAMS.convert('{"limit": 1e300}', None, None) == {"limit": 1e300}
