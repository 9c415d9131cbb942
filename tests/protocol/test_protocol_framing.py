"""Framing (PROTOCOL.md §1), sans-I/O: sniffing, incremental feeds, the frame cap, line ends."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.framing import (
    DEFAULT_MAX_FRAME_BYTES,
    MAX_HEADER_BYTES,
    FrameDecoder,
    FrameTooLarge,
    FramingError,
    encode_frame,
    sniff_framing,
)

BODIES = [b'{"jsonrpc":"2.0","id":1,"method":"a"}', b"[1,2]", b'{"x":"\\n\\u00e9"}']


def ndjson_stream() -> bytes:
    return b"".join(encode_frame(body, "ndjson") for body in BODIES)


def content_length_stream() -> bytes:
    return b"".join(encode_frame(body, "content-length") for body in BODIES)


def feed_all(decoder: FrameDecoder, chunks: list[bytes]) -> list[bytes]:
    frames: list[bytes] = []
    for chunk in chunks:
        frames.extend(decoder.feed(chunk))
    return frames


@pytest.mark.parametrize(
    ("first", "framing"),
    [(b"{", "ndjson"), (b"[", "ndjson"), (b"C", "content-length"), (b"c", "content-length")],
)
def test_sniff_known_first_bytes(first: bytes, framing: str) -> None:
    assert sniff_framing(first[0]) == framing


@pytest.mark.parametrize("first", [b"x", b"G", b"1", b'"', b"\x00", b"\xff"])
def test_sniff_refuses_anything_else(first: bytes) -> None:
    decoder = FrameDecoder()
    with pytest.raises(FramingError) as info:
        decoder.feed(b"  \r\n\t" + first + b"rest\n")
    assert not isinstance(info.value, FrameTooLarge)
    with pytest.raises(FramingError):  # final: the decoder stays failed
        decoder.feed(b'{"a":1}\n')


def test_leading_whitespace_is_skipped_before_sniffing() -> None:
    decoder = FrameDecoder()
    assert decoder.feed(b"\r\n  \n") == []
    assert decoder.framing is None
    assert decoder.feed(b'\n {"a":1}\n') == [b'{"a":1}']
    assert decoder.framing == "ndjson"


def test_a_byte_order_mark_before_the_first_frame_is_skipped() -> None:
    """A writer that puts a UTF-8 BOM first (some editors' JSON libraries) was refused as an
    unknown framing, and the connection ended; also when the mark arrives in pieces."""
    whole = FrameDecoder()
    assert whole.feed(b'\xef\xbb\xbf{"a":1}\n') == [b'{"a":1}']
    pieces = FrameDecoder()
    assert pieces.feed(b"\xef") == []
    assert pieces.feed(b"\xbb\xbf") == []
    assert pieces.feed(b'\n{"b":2}\n') == [b'{"b":2}']
    assert pieces.framing == "ndjson"
    with pytest.raises(FramingError):  # a BOM inside the stream is no frame of anything
        FrameDecoder().feed(b"\xef\xbbX")


@pytest.mark.parametrize("stream_of", [ndjson_stream, content_length_stream])
def test_split_at_every_byte_boundary(stream_of: object) -> None:
    assert callable(stream_of)
    data: bytes = stream_of()
    for cut in range(len(data) + 1):
        assert feed_all(FrameDecoder(), [data[:cut], data[cut:]]) == BODIES, cut
    assert feed_all(FrameDecoder(), [data[i : i + 1] for i in range(len(data))]) == BODIES


def test_ndjson_crlf_and_blank_lines() -> None:
    data = b'{"a":1}\r\n\r\n   \n[2]\r\n  {"b" : 3}  \n'
    assert FrameDecoder().feed(data) == [b'{"a":1}', b"[2]", b'{"b" : 3}']


def test_ndjson_last_line_without_newline_is_a_frame_at_eof() -> None:
    decoder = FrameDecoder()
    assert decoder.feed(b'{"a":1}\n{"b":2}') == [b'{"a":1}']
    assert decoder.feed_eof() == [b'{"b":2}']
    assert decoder.feed_eof() == []


def test_content_length_headers_case_insensitive_and_content_type_tolerated() -> None:
    data = (
        b"content-LENGTH: 7\r\n"
        b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n"
        b'{"a":1}'
        b"Content-Type: application/json\r\nCONTENT-LENGTH:3\r\n\r\n[1]"
    )
    assert FrameDecoder().feed(data) == [b'{"a":1}', b"[1]"]


def test_content_length_bare_lf_headers_and_stray_line_breaks() -> None:
    data = b'Content-Length: 7\n\n{"a":1}\r\nContent-Length: 3\r\n\r\n[1]'
    assert FrameDecoder().feed(data) == [b'{"a":1}', b"[1]"]


def test_content_length_body_may_hold_newlines() -> None:
    body = b'{\n"a":\r\n1}'
    assert FrameDecoder().feed(encode_frame(body, "content-length")) == [body]


def test_content_length_truncated_body_is_dropped_at_eof() -> None:
    decoder = FrameDecoder()
    assert decoder.feed(b'Content-Length: 10\r\n\r\n{"a"') == []
    assert decoder.feed_eof() == []
    assert decoder.cut_short == "a body of 10 bytes, 4 of them received"


@pytest.mark.parametrize(
    "headers",
    [
        b"Content-Length: x\r\n\r\n",
        b"Content-Length: -1\r\n\r\n",
        b"Content-Length: 1.5\r\n\r\n",
        b"Content-Type: a/b\r\n\r\n",
        b"Content-Length 5\r\n\r\n",
        b"Content-Length: 2\r\nContent-Length: 2\r\n\r\n",
        b" Content-Length: 2\r\n\r\n",
    ],
)
def test_malformed_headers_are_framing_errors(headers: bytes) -> None:
    decoder = FrameDecoder()
    with pytest.raises(FramingError) as info:
        decoder.feed(b"Content-Length: 2\r\n\r\n{}" + headers + b"{}")
    assert not isinstance(info.value, FrameTooLarge)
    assert info.value.frames == [b"{}"]  # the intact frame before the violation


def test_endless_header_section_refused_without_waiting_for_its_end() -> None:
    decoder = FrameDecoder()
    decoder.feed(b"Content-Length: 1\r\n")
    with pytest.raises(FramingError):
        decoder.feed(b"X-Pad: " + b"a" * MAX_HEADER_BYTES)


def test_ndjson_cap_enforced_before_the_line_is_complete() -> None:
    decoder = FrameDecoder(max_frame_bytes=100)
    assert decoder.feed(b"[" + b"1," * 49) == []  # 99 bytes, still possible
    with pytest.raises(FrameTooLarge) as info:
        decoder.feed(b"1,1")  # 102 bytes and no newline yet
    assert info.value.limit == 100
    assert decoder.buffered == 0  # nothing of it is kept
    with pytest.raises(FrameTooLarge):
        decoder.feed(b"]\n")


def test_ndjson_cap_is_exact() -> None:
    body = b'["' + b"a" * 96 + b'"]'
    assert FrameDecoder(max_frame_bytes=100).feed(body + b"\r\n") == [body]
    with pytest.raises(FrameTooLarge):
        FrameDecoder(max_frame_bytes=99).feed(body + b"\r\n")


def test_ndjson_cap_holds_for_a_complete_line_within_one_feed() -> None:
    decoder = FrameDecoder(max_frame_bytes=10)
    with pytest.raises(FrameTooLarge) as info:
        decoder.feed(b'[1]\n"0123456789"\n[2]\n')
    assert info.value.frames == [b"[1]"]


def test_content_length_cap_decided_from_the_header_alone() -> None:
    decoder = FrameDecoder(max_frame_bytes=1000)
    with pytest.raises(FrameTooLarge) as info:
        decoder.feed(b"Content-Length: 1001\r\n\r\n")
    assert info.value.limit == 1000
    exact = FrameDecoder(max_frame_bytes=4)
    assert exact.feed(b"Content-Length: 4\r\n\r\n[12]") == [b"[12]"]


@pytest.mark.parametrize("digits", [20, 21, 5_000])
def test_content_length_huge_number_is_too_large_not_a_crash(digits: int) -> None:
    """However many digits (21 and more were once "not a non-negative integer"): the frame
    is too large, said with the limit, and no integer of them all is made."""
    with pytest.raises(FrameTooLarge) as info:
        FrameDecoder().feed(b"Content-Length: " + b"9" * digits + b"\r\n\r\n")
    assert info.value.limit == DEFAULT_MAX_FRAME_BYTES


def test_content_length_leading_zeros_are_the_number() -> None:
    assert FrameDecoder(max_frame_bytes=4).feed(
        b"Content-Length: 0000000000000000000000004\r\n\r\n[12]"
    ) == [b"[12]"]


def test_encode_frame() -> None:
    assert encode_frame(b"{}", "ndjson") == b"{}\n"
    assert encode_frame(b'{"a":"\xc3\xa9"}', "content-length") == (
        b'Content-Length: 10\r\n\r\n{"a":"\xc3\xa9"}'
    )


def test_decoder_rejects_a_non_positive_cap() -> None:
    with pytest.raises(ValueError, match="positive"):
        FrameDecoder(max_frame_bytes=0)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=64), max_size=8), st.integers(min_value=1, max_value=64))
def test_arbitrary_bytes_raise_only_framing_errors(chunks: list[bytes], cap: int) -> None:
    decoder = FrameDecoder(max_frame_bytes=cap)
    frames: list[bytes] = []
    try:
        for chunk in chunks:
            frames.extend(decoder.feed(chunk))
        frames.extend(decoder.feed_eof())
    except FramingError as exc:
        frames.extend(exc.frames)
    assert all(len(frame) <= cap for frame in frames)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.binary(min_size=1, max_size=40).filter(lambda b: b"\n" not in b), max_size=5),
    st.lists(st.integers(min_value=0, max_value=400), max_size=6),
)
def test_content_length_round_trips_any_bodies_split_anywhere(
    bodies: list[bytes], cuts: list[int]
) -> None:
    data = b"".join(encode_frame(body, "content-length") for body in bodies)
    points = sorted({min(cut, len(data)) for cut in cuts})
    chunks = [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]
    assert feed_all(FrameDecoder(), chunks) == bodies
