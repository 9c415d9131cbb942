"""Failure classification, scrubbing and Retry-After parsing (sans-I/O)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from robotad.providers.failures import (
    check_api_key,
    connection_failure,
    error_message,
    parse_retry_after,
    scrub,
    status_failure,
    stream_failure,
)

KEY = "sk-live-0123456789abcdef"

#: What real keys look like: visible ASCII, no spaces, at least 8 characters.
keys = st.text(alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=8)


@pytest.mark.parametrize(
    ("status", "reason", "retryable"),
    [
        (400, "HTTP 400: request rejected: why", False),
        (401, "HTTP 401: authentication failed", False),
        (403, "HTTP 403: access denied", False),
        (404, "HTTP 404: request rejected: why", False),
        (408, "HTTP 408: request timed out: why", True),
        (409, "HTTP 409: request rejected: why", True),
        (429, "HTTP 429: rate limited: why", True),
        (500, "HTTP 500: server error: why", True),
        (503, "HTTP 503: server error: why", True),
        (529, "HTTP 529: server overloaded: why", True),
    ],
)
def test_status_failures(status: int, reason: str, retryable: bool) -> None:
    failure = status_failure(
        status, body={"error": {"message": "why"}}, retry_after=2.0, secrets=[KEY]
    )
    assert failure.reason == reason
    assert failure.retryable is retryable
    assert failure.status == status
    assert failure.retry_after == 2.0


def test_status_failure_without_a_readable_body() -> None:
    failure = status_failure(502, body="<html>bad gateway</html>", retry_after=None, secrets=[])
    assert failure.reason == "HTTP 502: server error"


def test_error_message_shapes() -> None:
    assert error_message({"error": {"message": "a"}}) == "a"
    assert error_message({"type": "error", "error": {"type": "x", "message": "b"}}) == "b"
    assert error_message({"error": "c"}) == "c"
    assert error_message({"message": "d"}) == "d"
    assert error_message({"error": {"code": 1}}) is None
    assert error_message(["error"]) is None
    assert error_message(None) is None


def test_connection_failure_names_the_class_only() -> None:
    failure = connection_failure(OSError(f"header value {KEY} refused"))
    assert failure.reason == "connection failed (OSError)"
    assert failure.retryable is True


def test_stream_failure_is_retryable_and_scrubbed() -> None:
    failure = stream_failure({"error": {"message": f"bad {KEY}"}}, [KEY])
    assert failure.reason == "stream error reported by the server: bad [redacted]"
    assert failure.retryable is True


def test_scrub_collapses_and_bounds() -> None:
    assert scrub(f"line one\n\tline  two {KEY}", [KEY, ""]) == "line one line two [redacted]"
    long = scrub("x" * 1000, [])
    assert len(long) == 300
    assert long.endswith("…")


@settings(max_examples=200, deadline=None)
@given(key=keys, before=st.text(), after=st.text(), status=st.integers(400, 599))
def test_no_key_survives_in_a_status_reason(key: str, before: str, after: str, status: int) -> None:
    """G-206: whatever the server's message holds, the reason never contains the key."""
    body = {"error": {"message": before + key + after + key[: len(key) // 2]}}
    failure = status_failure(status, body=body, retry_after=None, secrets=[key])
    assert key not in failure.reason
    assert key not in stream_failure(body, [key]).reason


@pytest.mark.parametrize("key", ["", " sk-abc", "sk-abc ", "sk-a\nb", "sk-\x00", "sk-é", "sk a"])
def test_keys_that_cannot_be_headers_are_refused(key: str) -> None:
    with pytest.raises(ValueError, match="api_key") as caught:
        check_api_key(key)
    assert key.strip() == "" or key.strip() not in str(caught.value)


def test_ordinary_keys_pass() -> None:
    check_api_key(None)
    check_api_key(KEY)
    check_api_key("sk-ant-api03-AbC_dEf-123")


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({}, None),
        ({"retry-after": "7"}, 7.0),
        ({"retry-after": "1.5"}, 1.5),
        ({"retry-after": "-3"}, 0.0),
        ({"retry-after": "inf"}, None),
        ({"retry-after": "nan"}, None),
        ({"retry-after": "soon"}, None),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"retry-after-ms": "junk", "retry-after": "9"}, 9.0),
        ({"retry-after": "Wed, 21 Oct 2015 07:28:30 GMT"}, 30.0),
        ({"retry-after": "Wed, 21 Oct 2015 07:28:30 -0000"}, 30.0),
        ({"retry-after": "Wed, 21 Oct 2015 07:27:00 GMT"}, 0.0),
    ],
)
def test_parse_retry_after(headers: dict[str, str], seconds: float | None) -> None:
    now = 1445412480.0  # Wed, 21 Oct 2015 07:28:00 GMT
    assert parse_retry_after(headers, now=now) == seconds


@settings(max_examples=200, deadline=None)
@given(value=st.text(), millis=st.none() | st.text())
def test_parse_retry_after_never_raises(value: str, millis: str | None) -> None:
    headers = {"retry-after": value} | ({} if millis is None else {"retry-after-ms": millis})
    result = parse_retry_after(headers, now=0.0)
    assert result is None or (result >= 0.0 and result != float("inf"))


def test_error_bodies_as_servers_send_them() -> None:
    openai_body = json.loads('{"error": {"message": "m", "type": "t", "code": null}}')
    assert error_message(openai_body) == "m"
