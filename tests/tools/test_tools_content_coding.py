"""`content_coding.Unpacker` without a socket: a body is unpacked whole, within its room, or
refused as cut short or broken, however its bytes were split when they arrived."""

from __future__ import annotations

import gzip
import zlib

import pytest

from robotad.tools.content_coding import BodyUnreadable, Unpacker

TEXT = b"".join(b"line %d\n" % number for number in range(500))


def unpacked(encoding: str, body: bytes, *, step: int = 1, room: int = 1 << 20) -> bytes:
    """`body` fed `step` bytes at a time, then ended."""
    unpacker = Unpacker(encoding)
    out = b"".join(unpacker.unpack(body[at : at + step], room) for at in range(0, len(body), step))
    unpacker.end()
    return out


def raw_deflate(data: bytes) -> bytes:
    packer = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    return packer.compress(data) + packer.flush()


@pytest.mark.parametrize("step", [1, 2, 7, 1 << 20])
@pytest.mark.parametrize(
    ("encoding", "body"),
    [
        ("gzip", gzip.compress(TEXT)),
        ("x-gzip", gzip.compress(TEXT)),
        ("gzip", zlib.compress(TEXT)),  # zlib labelled gzip: read, as it always was
        ("deflate", zlib.compress(TEXT)),
        ("deflate", raw_deflate(TEXT)),
        ("deflate", gzip.compress(TEXT)),
    ],
)
def test_a_whole_body_is_read_however_it_arrives(encoding: str, body: bytes, step: int) -> None:
    assert unpacked(encoding, body, step=step) == TEXT


@pytest.mark.parametrize("step", [1, 3, 1 << 20])
def test_gzip_members_are_read_in_turn_and_what_follows_the_last_is_ignored(step: int) -> None:
    body = gzip.compress(b"one ") + b"\0\0\0" + gzip.compress(b"two") + b"trailing junk"
    assert unpacked("gzip", body, step=step) == b"one two"
    assert unpacked("deflate", zlib.compress(b"one") + b"junk", step=step) == b"one"


@pytest.mark.parametrize(
    ("encoding", "body"),
    [
        ("gzip", gzip.compress(TEXT)),
        ("deflate", zlib.compress(TEXT)),
        ("deflate", raw_deflate(TEXT)),
        ("gzip", gzip.compress(b"one ") + gzip.compress(TEXT)),  # the second member cut
    ],
)
@pytest.mark.parametrize("kept", [1, 2, 10, -8, -1])
def test_a_body_cut_anywhere_is_refused_as_cut_short(encoding: str, body: bytes, kept: int) -> None:
    """Cut after its first byte, in its header, in its data, in its trailer: refused at
    the end, never its prefix's text."""
    cut = body[:kept]
    unpacker = Unpacker(encoding)
    unpacker.unpack(cut, 1 << 20)
    with pytest.raises(BodyUnreadable) as refused:
        unpacker.end()
    assert str(refused.value) == (
        f"the body ended before its {encoding} stream did ({len(cut)} compressed bytes "
        "received): the answer was cut short, by the server or on the way; fetching it again "
        "may work"
    )


def test_a_body_cut_one_byte_into_its_next_member_is_refused() -> None:
    first = gzip.compress(b"one ")
    unpacker = Unpacker("gzip")
    assert unpacker.unpack(first + b"\x1f", 100) == b"one "
    with pytest.raises(BodyUnreadable, match="cut short"):
        unpacker.end()
    assert unpacked("gzip", first + b"\x01") == b"one "  # one byte of junk is no member


def test_an_empty_body_is_empty_text() -> None:
    assert unpacked("gzip", b"") == b""


def test_data_of_another_format_or_corrupt_is_refused_naming_it() -> None:
    with pytest.raises(BodyUnreadable, match=r"^its body, sent as gzip, is not gzip data: "):
        Unpacker("gzip").unpack(b"plain text", 100)
    broken = bytearray(gzip.compress(TEXT))
    broken[12] ^= 0xFF  # inside the first deflate block
    with pytest.raises(BodyUnreadable) as refused:
        unpacked("gzip", bytes(broken), step=1 << 20)
    assert str(refused.value).startswith("its gzip body is corrupt after ")
    assert str(refused.value).endswith(
        "the server's answer is broken (fetching it again is unlikely to help)"
    )


def test_no_more_than_the_room_is_unpacked() -> None:
    """A compressed bomb unpacks to the room given and no further."""
    bomb = gzip.compress(b" " * (8 << 20))
    unpacker = Unpacker("gzip")
    assert len(unpacker.unpack(bomb, 1000)) == 1000
