"""protocol/REFERENCE.md is generated from the code and stays in step with it."""

from __future__ import annotations

import re

import msgspec

from protocol import gen_reference
from protocol.errors import CODES
from protocol.events import EVENT_TYPES
from protocol.jsonrpc import Notification, Request, parse_frame
from protocol.methods import METHODS


def test_reference_is_up_to_date() -> None:
    current = gen_reference.REFERENCE_PATH.read_text(encoding="utf-8")
    assert current == gen_reference.render_reference(), "run: python -m protocol.gen_reference"
    assert gen_reference.main(["--check"]) == 0


def test_reference_covers_every_method_event_and_error() -> None:
    text = gen_reference.render_reference()
    assert set(gen_reference.SUMMARIES) == set(METHODS)
    for name in METHODS:
        assert f"### `{name}`" in text
    for tag in EVENT_TYPES:
        assert f"### `{tag}`" in text
    for code, cls in CODES.items():
        assert f"| {code} | {cls.__name__} |" in text
    for link in set(re.findall(r"\]\(#([a-z]+)\)", text)):
        assert re.search(rf"^### {link}$", text, re.IGNORECASE | re.MULTILINE), link


def test_example_requests_are_valid() -> None:
    text = gen_reference.render_reference()
    lines = [line for line in text.splitlines() if line.startswith('{"jsonrpc":"2.0","id":')]
    lines += [line for line in text.splitlines() if '"$/cancelRequest"' in line]
    requests = [line for line in lines if '"method"' in line]
    assert len(requests) >= 4
    for line in requests:
        (message,) = parse_frame(line.encode()).messages
        assert isinstance(message, Request | Notification), line
        if message.method in METHODS:
            params_type = METHODS[message.method][0]
            msgspec.json.decode(message.params or b"{}", type=params_type)
