"""One replay server for every provider test: a stdlib HTTP server on 127.0.0.1 with scripted replies.

A :class:`Reply` is a status, headers and body parts, each part sent after its own delay (so a
stream's chunks arrive when the test says). Builders cover the shapes providers use: a JSON body,
Server-Sent Events (``data:`` lines, optionally with ``event:`` names), newline-delimited JSON
(Ollama) and raw binary frames (Bedrock's event stream). Every request is recorded, headers included,
so tests can check what the client sent (e.g. ``traceparent``).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MS = 1_000_000
"""Nanoseconds per millisecond."""
TOLERANCE_NS = 5 * MS
"""How far a client-measured time may sit from the delay the server injected."""


@dataclass
class Part:
    """Bytes written and flushed on their own, ``delay_s`` after the previous part (or the headers)."""

    data: bytes
    delay_s: float = 0.0


@dataclass
class Reply:
    """A scripted response. ``header_delay_s`` passes before the status line is sent."""

    parts: list[Part]
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    header_delay_s: float = 0.0
    streamed: bool = False
    """Streamed replies use chunked transfer encoding, one HTTP chunk per part, as real servers do
    (clients such as urllib3 would otherwise buffer reads of an unframed body)."""


@dataclass
class Recorded:
    """One request the server received."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    received_ns: int = 0
    """``time.time_ns()`` when the request had fully arrived (the replay clock starts here)."""

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


def _delays(delays: float | Sequence[float], count: int) -> list[float]:
    if isinstance(delays, (int, float)):
        return [float(delays)] * count
    assert len(delays) == count, f"{len(delays)} delays for {count} parts"
    return [float(d) for d in delays]


def json_reply(
    body: Any, headers: dict[str, str] | None = None, status: int = 200, delay_s: float = 0.0
) -> Reply:
    """A whole JSON body, sent ``delay_s`` after the request arrived."""
    data = json.dumps(body).encode()
    all_headers = {"content-type": "application/json", "content-length": str(len(data)), **(headers or {})}
    return Reply([Part(data)], status=status, headers=all_headers, header_delay_s=delay_s)


def sse_reply(
    events: Sequence[Any],
    delays: float | Sequence[float] = 0.0,
    *,
    done: bool = True,
    headers: dict[str, str] | None = None,
    header_delay_s: float = 0.0,
) -> Reply:
    """Server-Sent Events: each item is a JSON object, or ``(event_name, object)`` for named events.

    ``delays[i]`` passes before event ``i``; ``data: [DONE]`` (OpenAI style) follows when ``done``.
    """
    parts = []
    for item, delay in zip(events, _delays(delays, len(events)), strict=True):
        if isinstance(item, tuple):
            name, payload = item
            text = f"event: {name}\ndata: {json.dumps(payload)}\n\n"
        else:
            text = f"data: {json.dumps(item)}\n\n"
        parts.append(Part(text.encode(), delay))
    if done:
        parts.append(Part(b"data: [DONE]\n\n"))
    all_headers = {"content-type": "text/event-stream", **(headers or {})}
    return Reply(parts, headers=all_headers, header_delay_s=header_delay_s, streamed=True)


def ndjson_reply(objects: Sequence[Any], delays: float | Sequence[float] = 0.0) -> Reply:
    """Newline-delimited JSON objects (Ollama's streaming format)."""
    parts = [
        Part(json.dumps(obj).encode() + b"\n", delay)
        for obj, delay in zip(objects, _delays(delays, len(objects)), strict=True)
    ]
    return Reply(parts, headers={"content-type": "application/x-ndjson"}, streamed=True)


def binary_reply(frames: Sequence[bytes], delays: float | Sequence[float], content_type: str) -> Reply:
    """Pre-encoded binary frames (e.g. AWS event-stream messages), one part each."""
    parts = [Part(frame, delay) for frame, delay in zip(frames, _delays(delays, len(frames)), strict=True)]
    return Reply(parts, headers={"content-type": content_type}, streamed=True)


Route = Callable[[Recorded], Reply]


class ReplayServer:
    """Answers requests by (method, path without query) with scripted replies; records every request."""

    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self._routes: dict[tuple[str, str], Reply | Route] = {}
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()

    def route(self, method: str, path: str, reply: Reply | Route) -> ReplayServer:
        """Answer ``method path`` with ``reply`` (or with ``reply(request)`` when callable)."""
        self._routes[(method.upper(), path)] = reply
        return self

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _answer(self, recorded: Recorded) -> Reply:
        self.requests.append(recorded)
        found = self._routes.get((recorded.method, recorded.path.split("?", 1)[0]))
        if found is None:
            return json_reply({"error": f"no route for {recorded.method} {recorded.path}"}, status=404)
        return found(recorded) if callable(found) else found

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                # Small writes must leave at once, or Nagle's algorithm would delay chunks.
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def _serve(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                headers = {key.lower(): value for key, value in self.headers.items()}
                received = time.time_ns()
                reply = server._answer(Recorded(self.command, self.path, headers, body, received))
                if reply.header_delay_s:
                    time.sleep(reply.header_delay_s)
                self.send_response(reply.status)
                for key, value in reply.headers.items():
                    self.send_header(key, value)
                if reply.streamed:
                    self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                self.wfile.flush()
                for part in reply.parts:
                    if part.delay_s:
                        time.sleep(part.delay_s)
                    data = part.data
                    if reply.streamed:
                        data = b"%x\r\n%s\r\n" % (len(data), data)
                    self.wfile.write(data)
                    self.wfile.flush()
                if reply.streamed:
                    self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()

            do_GET = do_POST = _serve

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler


def request_offset_ns(span: Any, server: ReplayServer) -> int:
    """ns from the span's start until the server had the (last) request: the client SDK's own
    request-building and send time, which is part of TTFT but not one of the injected delays."""
    offset = server.requests[-1].received_ns - span.start_time
    assert offset >= 0
    return int(offset)


def assert_stream_timing(
    span: Any,
    server: ReplayServer,
    *,
    ttft_s: float,
    decode_s: float,
    gap_s: float | None = None,
    output_tokens: int,
) -> None:
    """Client-measured TTFT, last − first and ITL against the delays the server injected.

    TTFT must equal (request arrival − span start) + injected delays, within the tolerance.
    ITL is checked twice: exactly against the recorded offsets ((last − first) // (tokens − 1)),
    and against the injected decode time spread over tokens − 1, within the tolerance.
    """
    attributes = dict(span.attributes or {})
    first = attributes["latencylens.stream.first_content_ns"]
    last = attributes["latencylens.stream.last_chunk_ns"]
    expected_first = request_offset_ns(span, server) + ttft_s * 1e9
    assert first >= ttft_s * 1e9
    assert abs(first - expected_first) <= TOLERANCE_NS, (
        f"TTFT {first / MS:.2f} ms, expected {expected_first / MS:.2f} ms (injected {ttft_s * 1e3} ms)"
    )
    assert abs((last - first) - decode_s * 1e9) <= TOLERANCE_NS, (
        f"last − first {(last - first) / MS:.2f} ms, injected {decode_s * 1e3} ms"
    )
    itl = attributes["latencylens.stream.itl_ns"]
    assert itl == (last - first) // (output_tokens - 1)
    assert abs(itl - decode_s * 1e9 / (output_tokens - 1)) <= TOLERANCE_NS
    if gap_s is not None:
        for key in ("p50_ns", "max_ns", "mean_ns"):
            value = attributes[f"latencylens.stream.gap.{key}"]
            assert abs(value - gap_s * 1e9) <= TOLERANCE_NS, (
                f"gap {key} {value / MS:.2f} ms, injected {gap_s}"
            )


def aws_event_frame(event_type: str, payload: Any) -> bytes:
    """One AWS event-stream message (the binary framing of Bedrock's ConverseStream).

    Layout: total length, headers length, prelude CRC32, headers, JSON payload, message CRC32; each
    header is name length (1 byte), name, type 7 (string), value length (2 bytes), value.
    """
    import binascii
    import struct

    headers = b""
    for name, value in (
        (":event-type", event_type),
        (":content-type", "application/json"),
        (":message-type", "event"),
    ):
        raw = value.encode()
        headers += bytes([len(name)]) + name.encode() + b"\x07" + struct.pack(">H", len(raw)) + raw
    body = json.dumps(payload).encode()
    total = 12 + len(headers) + len(body) + 4
    prelude = struct.pack(">II", total, len(headers))
    prelude += struct.pack(">I", binascii.crc32(prelude) & 0xFFFFFFFF)
    message = prelude + headers + body
    return message + struct.pack(">I", binascii.crc32(message) & 0xFFFFFFFF)
