"""Approval requests as a person meets them: asked on a terminal, or listed for later.

A turn that stops waiting (PROTOCOL.md §5, ``TurnResult`` with status "waiting") names the
exact actions it wants to take. With a terminal to ask on (`can_prompt`: stdin and stderr are
TTYs) `ask_person` shows each request — the tool, its arguments in full (long values cut at a
readable size) and the reason — and asks ``y/N`` on stderr; anything but yes is a denial. A
WebFetch request also offers "always" (PROTOCOL.md §10.7): ``a`` approves it and every later
fetch from that domain in this session, ``p`` in every session of this project — the answer
then carries the ``WebFetch(domain:HOST)`` allow rule to add with ``session/addRule``.
Without one, `report_waiting` prints each request id with its tool and arguments on stdout
(one per line, the id first and a tab after it, so ``cut -f1`` gets the ids) and says how to
answer; the command then exits 3.

`responses` builds the ``session/resume`` answers, each with a fresh ``responseId`` (a
redelivery of the same answer must reuse its id; a new answer must not).

Everything a request carries (tool, arguments, reason, ids) is made visible before it is shown
(`robotactl.terminal_text`): a bidi override in a command cannot make it read as another.

Imports only click and the standard library at import time.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import click

from robotactl.cli import CommandFailed
from robotactl.exact_rules import exact_call_rule
from robotactl.exit_codes import ExitCode
from robotactl.formatting import format_arguments, format_call
from robotactl.terminal_text import visible_exactly

if TYPE_CHECKING:
    from protocol.shapes import ApprovalRequest, TurnWaiting
    from robotactl.render import Output

__all__ = [
    "Answers",
    "LeftWaiting",
    "answer_hint",
    "ask_person",
    "can_prompt",
    "domain_rule",
    "report_waiting",
    "responses",
    "waiting_lines",
]


class LeftWaiting(CommandFailed):
    """The person stopped answering (Ctrl-C or end of input): the turn stays waiting, exit 3."""

    exit_code = ExitCode.WAITING

    def __init__(self, session_id: str) -> None:
        super().__init__(f"left waiting for approval; answer later with {answer_hint(session_id)}")


def can_prompt() -> bool:
    """Whether a person can answer here: stdin and stderr (where prompts go) are terminals."""
    try:
        return sys.stdin.isatty() and sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def answer_hint(session_id: str) -> str:
    """The commands that answer the session's pending requests."""
    return (
        f"`robotactl approve -s {session_id} [REQUEST_ID…]` or "
        f"`robotactl deny -s {session_id} [REQUEST_ID…]`"
    )


def responses(requests: Iterable[ApprovalRequest], approved: bool) -> list[dict[str, Any]]:
    """One ``session/resume`` response per request, all `approved` or all denied."""
    return [_response(request, approved) for request in requests]


def _response(request: ApprovalRequest, approved: bool) -> dict[str, Any]:
    return {
        "requestId": request.request_id,
        "responseId": uuid.uuid4().hex,
        "approved": approved,
    }


@dataclass
class Answers:
    """A person's answers: the ``session/resume`` responses, and the allow rules an "always"
    asked for, each with its scope (``session`` or ``project``), to add before resuming."""

    responses: list[dict[str, Any]] = field(default_factory=list)
    rules: list[tuple[str, str]] = field(default_factory=list)


def domain_rule(request: ApprovalRequest) -> str | None:
    """The ``WebFetch(domain:HOST)`` rule an "always" for this request adds (the consent
    projection of G-113), or None when it is no WebFetch of a URL with a host."""
    url = request.arguments.get("url")
    if request.tool != "WebFetch" or not isinstance(url, str):
        return None
    return exact_call_rule("WebFetch", {"url": url}, "")


def ask_person(requests: Sequence[ApprovalRequest], output: Output, session_id: str) -> Answers:
    """Ask about each request on the terminal; return the answers for ``session/resume``.

    Raises `LeftWaiting` when the person interrupts (Ctrl-C) or input ends.
    """
    answers = Answers()
    for number, request in enumerate(requests, start=1):
        counter = f" ({number}/{len(requests)})" if len(requests) > 1 else ""
        title = output.style(f"approval needed{counter}:", "yellow", "bold", err=True)
        tool = visible_exactly(request.tool)
        output.prompt_line(f"{title} {tool} — {visible_exactly(request.reason)}")
        for line in format_arguments(request.arguments):
            output.prompt_line(f"    {line}")
        rule = domain_rule(request)
        try:
            if rule is None:
                approved = click.confirm(f"Allow {tool}?", default=False, err=True)
            else:
                approved = _ask_with_always(tool, rule, answers)
        except click.Abort:
            output.prompt_line("")
            raise LeftWaiting(session_id) from None
        answers.responses.append(_response(request, approved))
    return answers


def _ask_with_always(tool: str, rule: str, answers: Answers) -> bool:
    """``y``/``N``/``a``/``p`` about `tool` (made visible); an "always" records `rule` in
    `answers` with its scope."""
    click.echo(
        f"    a: always — allow {visible_exactly(rule)} for this session; p: the same for every "
        "session here",
        err=True,
    )
    choice = click.prompt(
        f"Allow {tool}? [y/N/a/p]",
        default="n",
        type=click.Choice(["y", "n", "a", "p"], case_sensitive=False),
        show_choices=False,
        show_default=False,
        err=True,
    ).lower()
    if choice in ("a", "p"):
        answers.rules.append((rule, "session" if choice == "a" else "project"))
    return choice != "n"


def waiting_lines(requests: Iterable[ApprovalRequest]) -> list[str]:
    """``REQUEST_ID<TAB>Tool(args…)`` per request, made visible."""
    return [
        f"{visible_exactly(request.request_id)}\t{format_call(request.tool, request.arguments)}"
        for request in requests
    ]


def report_waiting(result: TurnWaiting, session_id: str, output: Output) -> None:
    """Print a waiting turn for a script or a later answer: the result as JSON in JSON mode,
    else one line per request; then, on stderr, how to answer."""
    if output.json_mode:
        import msgspec

        output.json(msgspec.to_builtins(result))
    else:
        for line in waiting_lines(result.requests):
            output.line(line)
    count = len(result.requests)
    what = "1 request" if count == 1 else f"{count} requests"
    output.notice(
        output.style(f"waiting for approval ({what});", "yellow", err=True)
        + f" answer with {answer_hint(session_id)}"
    )
