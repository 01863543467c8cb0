"""An export's body, read with a size limit and inflated (gzip, deflate) as it arrives.

The limit applies to what the decoder would get: a body is refused (:class:`BodyTooLarge`) as soon
as it is seen to be over it — from its declared length, while it is read, or while it is inflated,
which never produces more than ``limit + 1`` bytes (an 18 KiB gzip bomb of 14 MiB costs at most
the limit, then stops). A compressed body that ends before its end (cut short, its CRC and length
missing) or whose checksum is wrong is refused as malformed (:class:`MalformedBody`), never decoded
from whatever part of it arrived.
"""

from __future__ import annotations

import zlib
from typing import Final

ENCODINGS: Final = ("identity", "gzip", "deflate")
LIMIT_SETTING: Final = "max_body_bytes"


class BodyTooLarge(Exception):
    """The body is over the limit; the message names it."""


class MalformedBody(Exception):
    """The body is not valid for its Content-Encoding; the message says why."""


class UnsupportedEncoding(Exception):
    """A Content-Encoding the collector does not take."""


class BodyReader:
    """Feed the body's chunks in order, then :meth:`finish` for the (inflated) bytes."""

    def __init__(self, encoding: str, limit: int) -> None:
        encoding = (encoding or "identity").strip().lower()
        if encoding not in ENCODINGS:
            raise UnsupportedEncoding(f"unsupported Content-Encoding {encoding}; use gzip, deflate or none")
        self.encoding, self.limit = encoding, limit
        self._chunks: list[bytes] = []
        self._size = 0
        self._received = 0
        self._head = b""
        """The first bytes of a deflate body, until its format (zlib or raw) is known."""
        self._inflater: zlib._Decompress | None = None
        if encoding == "gzip":
            self._inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)

    def check_declared(self, content_length: str | None) -> None:
        """Refuse at once a body whose declared length is over the limit."""
        if content_length and content_length.isdigit() and int(content_length) > self.limit:
            raise BodyTooLarge(self._too_large("declared by its Content-Length"))

    def feed(self, chunk: bytes) -> None:
        self._received += len(chunk)
        if self._received > self.limit:
            raise BodyTooLarge(self._too_large("as sent"))
        if self.encoding == "identity":
            self._keep(chunk)
            return
        if self._inflater is None:  # deflate: zlib-wrapped (RFC 1950) as HTTP says, or raw as some send
            self._head += chunk
            if len(self._head) < 2:
                return
            chunk, self._head = self._head, b""
            zlib_wrapped = chunk[0] & 0x0F == 8 and int.from_bytes(chunk[:2], "big") % 31 == 0
            self._inflater = zlib.decompressobj(zlib.MAX_WBITS if zlib_wrapped else -zlib.MAX_WBITS)
        self._inflate(chunk)

    def _inflate(self, data: bytes) -> None:
        assert self._inflater is not None
        while data:
            if self._inflater.eof:
                if self.encoding != "gzip":
                    raise MalformedBody("data after the end of the deflate stream")
                self._inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)  # another gzip member
            try:
                out = self._inflater.decompress(data, self.limit + 1 - self._size)
            except zlib.error as exc:
                raise MalformedBody(f"body is not valid {self.encoding}: {exc}") from None
            self._keep(out)
            if self._size > self.limit:
                raise BodyTooLarge(self._too_large("after decompression"))
            data = self._inflater.unused_data if self._inflater.eof else b""

    def _keep(self, data: bytes) -> None:
        if data:
            self._chunks.append(data)
            self._size += len(data)

    def finish(self) -> bytes:
        """The whole body; raises :class:`MalformedBody` when a compressed one did not end."""
        if self.encoding != "identity" and (self._inflater is None or not self._inflater.eof):
            raise MalformedBody(
                f"{self.encoding} body ends before its end (cut short, or its checksum and length missing)"
            )
        return b"".join(self._chunks)

    def _too_large(self, when: str) -> str:
        return f"export larger than {self.limit} bytes ({LIMIT_SETTING}) {when}"
