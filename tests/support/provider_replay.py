"""One replay server for every provider test: a stdlib HTTP server on 127.0.0.1 with scripted replies.

A :class:`Reply` is a status, headers and body parts, each part sent after its own delay (so a
stream's chunks arrive when the test says). Delays run on the server's schedule (part ``i`` is due at
the sum of the delays before it), so one late wake-up on a loaded machine does not push every later
part back; when each part really left is recorded too, for checks that must not depend on the
server's punctuality. Builders cover the shapes providers use: a JSON body,
Server-Sent Events (``data:`` lines, optionally with ``event:`` names), newline-delimited JSON
(Ollama) and raw binary frames (Bedrock's event stream). Every request is recorded, headers included,
so tests can check what the client sent (e.g. ``traceparent``).
"""

from __future__ import annotations

import itertools
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
TOLERANCE_NS = 15 * MS
"""How far a client-measured time may sit from when the server really sent the part in question: the
client's reading lag, which on a loaded 2-core machine (several test runs, server and client threads
sharing one GIL) reaches ~10 ms. Injected delays are 40 ms or more, so a span that missed the stream
(a fraction of a millisecond long) still fails."""


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
    scheduled_s: list[float] = field(default_factory=list)
    """When each body part was due, in seconds after ``received_ns`` (header delay included)."""
    sent_ns: list[int] = field(default_factory=list)
    """``time.time_ns()`` just before each body part was written: no client can have read it earlier
    (same clock as the client's spans)."""

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


def cut_reply(reply: Reply) -> Reply:
    """``reply`` framed as HTTP chunks by hand without the final zero-length chunk: the body stops
    midway, as when a server dies, and the client sees a broken stream."""
    framed = [Part(b"%x\r\n%s\r\n" % (len(p.data), p.data), p.delay_s) for p in reply.parts]
    return Reply(framed, headers={**reply.headers, "connection": "close", "transfer-encoding": "chunked"})


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
                recorded = Recorded(self.command, self.path, headers, body, received)
                reply = server._answer(recorded)
                due = reply.header_delay_s
                _sleep_until(received, due)
                self.send_response(reply.status)
                for key, value in reply.headers.items():
                    self.send_header(key, value)
                if reply.streamed:
                    self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                self.wfile.flush()
                for part in reply.parts:
                    due += part.delay_s
                    _sleep_until(received, due)
                    data = part.data
                    if reply.streamed:
                        data = b"%x\r\n%s\r\n" % (len(data), data)
                    recorded.scheduled_s.append(due)
                    recorded.sent_ns.append(time.time_ns())
                    self.wfile.write(data)
                    self.wfile.flush()
                if reply.streamed:
                    self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()

            do_GET = do_POST = _serve

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler


def _sleep_until(origin_ns: int, due_s: float) -> None:
    """Sleep until ``due_s`` seconds after ``origin_ns`` (no sleep when that time has passed)."""
    remaining = origin_ns / 1e9 + due_s - time.time_ns() / 1e9
    if remaining > 0:
        time.sleep(remaining)


def request_offset_ns(span: Any, server: ReplayServer) -> int:
    """ns from the span's start until the server had the (last) request: the client SDK's own
    request-building and send time, which is part of TTFT but not one of the injected delays."""
    offset = server.requests[-1].received_ns - span.start_time
    assert offset >= 0
    return int(offset)


def part_due_at(request: Recorded, offset_s: float) -> int:
    """Index of the first body part of ``request``'s reply that was due ``offset_s`` after arrival."""
    for index, due in enumerate(request.scheduled_s):
        if abs(due - offset_s) < 1e-6:
            return index
    raise AssertionError(f"no part was due at {offset_s} s: {request.scheduled_s}")


def sent_offset_ns(span: Any, request: Recorded, index: int) -> int:
    """ns from the span's start until body part ``index`` actually left the server."""
    return int(request.sent_ns[index] - span.start_time)


def assert_stream_timing(
    span: Any,
    server: ReplayServer,
    *,
    ttft_s: float,
    decode_s: float,
    gap_s: float | None = None,
    output_tokens: int,
) -> None:
    """Client-measured TTFT, last − first, ITL and gaps against the parts the server sent.

    The first content part is the first one due ``ttft_s`` after the request arrived, the last the
    first one due ``ttft_s + decode_s`` after it. Each measure must match when the server actually
    sent those parts, within the tolerance (only the client's reading lag separates the two, so a
    late wake-up of the server on a loaded machine cannot fail the check), and TTFT must be at least
    the request's own offset plus the injected delays (no part leaves early), so a span that missed
    the stream cannot pass. ITL must also be exactly (last − first) // (tokens − 1). With ``gap_s``,
    the parts in between are content parts and the gap statistics must match the server's gaps.
    """
    attributes = dict(span.attributes or {})
    request = server.requests[-1]
    first_part = part_due_at(request, ttft_s)
    last_part = part_due_at(request, ttft_s + decode_s)
    first = attributes["latencylens.stream.first_content_ns"]
    last = attributes["latencylens.stream.last_chunk_ns"]
    floor = request_offset_ns(span, server) + ttft_s * 1e9
    assert first >= floor, f"TTFT {first / MS:.2f} ms, less than the {floor / MS:.2f} ms the server waited"
    sent_first = sent_offset_ns(span, request, first_part)
    assert abs(first - sent_first) <= TOLERANCE_NS, (
        f"TTFT {first / MS:.2f} ms, first content sent at {sent_first / MS:.2f} ms "
        f"(injected {ttft_s * 1e3} ms)"
    )
    sent_decode = request.sent_ns[last_part] - request.sent_ns[first_part]
    assert abs((last - first) - sent_decode) <= TOLERANCE_NS, (
        f"last − first {(last - first) / MS:.2f} ms, sent {sent_decode / MS:.2f} ms apart "
        f"(injected {decode_s * 1e3} ms)"
    )
    itl = attributes["latencylens.stream.itl_ns"]
    assert itl == (last - first) // (output_tokens - 1)
    assert abs(itl - sent_decode / (output_tokens - 1)) <= TOLERANCE_NS
    if gap_s is not None:
        sent = request.sent_ns[first_part : last_part + 1]
        gaps = sorted(b - a for a, b in itertools.pairwise(sent))
        mean = sum(gaps) / len(gaps)
        expected = {"p50_ns": gaps[(len(gaps) - 1) // 2], "max_ns": gaps[-1], "mean_ns": mean}
        for key, value_sent in expected.items():
            value = attributes[f"latencylens.stream.gap.{key}"]
            assert abs(value - value_sent) <= TOLERANCE_NS, (
                f"gap {key} {value / MS:.2f} ms, server gaps {value_sent / MS:.2f} ms (injected {gap_s} s)"
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
