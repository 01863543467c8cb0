"""Issue 15, items 1 and 7: a compressed body is inflated as it arrives and refused at the limit
(the 18 KiB gzip bomb of 14 MiB from the issue), and one cut short or without its CRC is
malformed, never decoded from the part that arrived."""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Iterator

import pytest
from otlp_builders import protobuf_body, span

from latencylens_collector.intake.body import BodyReader, BodyTooLarge, MalformedBody, UnsupportedEncoding

LIMIT = 8 * 1024 * 1024  # the max_body_bytes default
BASE = 1_700_000_000_000_000_000


def bomb() -> bytes:
    """The issue's export: one span with 250 attributes of 60 KB (14 MiB), gzipped to ~18 KiB."""
    attributes = {f"attribute.{i}": "x" * 60_000 for i in range(250)}
    body = protobuf_body([span("bomb", 1, 1, None, BASE, BASE + 1000, attributes)])
    assert len(body) > 14 * 1024 * 1024
    return gzip.compress(body)


def chunks(data: bytes, size: int = 1024) -> Iterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]


def read(encoding: str, data: bytes, limit: int = LIMIT) -> bytes:
    reader = BodyReader(encoding, limit)
    for chunk in chunks(data):
        reader.feed(chunk)
    return reader.finish()


def test_gzip_bomb_is_refused_before_it_is_inflated_whole() -> None:
    compressed = bomb()
    assert len(compressed) < 20 * 1024
    reader = BodyReader("gzip", LIMIT)
    fed = 0
    too_large = r"larger than 8388608 bytes \(max_body_bytes\) after decompression"
    with pytest.raises(BodyTooLarge, match=too_large):
        for chunk in chunks(compressed):
            reader.feed(chunk)
            fed += len(chunk)
    # It stopped part-way: the rest of the bomb was never inflated.
    assert fed < len(compressed) * 0.75


def test_a_body_as_large_as_the_limit_is_read_whole() -> None:
    data = bytes(range(256)) * 4096  # 1 MiB
    assert read("gzip", gzip.compress(data), limit=len(data)) == data
    with pytest.raises(BodyTooLarge):
        read("gzip", gzip.compress(data), limit=len(data) - 1)
    with pytest.raises(BodyTooLarge, match="as sent"):
        read("identity", data, limit=len(data) - 1)
    with pytest.raises(BodyTooLarge, match="Content-Length"):
        BodyReader("gzip", 10).check_declared("11")


def test_gzip_cut_short_or_without_its_crc_is_malformed() -> None:
    data = protobuf_body([span("s", 1, 1, None, BASE, BASE + 1)])
    compressed = gzip.compress(data)
    assert read("gzip", compressed) == data
    with pytest.raises(MalformedBody, match="cut short"):
        read("gzip", compressed[: len(compressed) // 2])
    with pytest.raises(MalformedBody, match="checksum and length missing"):
        read("gzip", compressed[:-8])  # the CRC32 and ISIZE trailer
    wrong_crc = compressed[:-8] + bytes(4) + compressed[-4:]
    with pytest.raises(MalformedBody, match="not valid gzip"):
        read("gzip", wrong_crc)
    with pytest.raises(MalformedBody):
        read("gzip", b"")
    with pytest.raises(MalformedBody, match="not valid gzip"):
        read("gzip", data)  # not gzip at all


def test_gzip_members_and_deflate_in_both_wrappings() -> None:
    data = b"spans " * 1000
    assert read("gzip", gzip.compress(data[:3000]) + gzip.compress(data[3000:])) == data
    assert read("deflate", zlib.compress(data)) == data  # RFC 1950, as HTTP's deflate is
    raw = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    assert read("deflate", raw.compress(data) + raw.flush()) == data  # raw RFC 1951, as some send
    with pytest.raises(MalformedBody, match="cut short"):
        read("deflate", zlib.compress(data)[:-4])
    with pytest.raises(MalformedBody, match="after the end"):
        read("deflate", zlib.compress(data) + b"trailing")


def test_unknown_encodings_are_refused() -> None:
    with pytest.raises(UnsupportedEncoding, match="br"):
        BodyReader("br", LIMIT)
    assert read(" GZIP ", gzip.compress(b"x")) == b"x"
    assert read("", b"x") == b"x"
