"""Issue 15, item 5: slow clients cannot exhaust the service, and repeated log lines are limited.

The reproduction was ~20,000 half-open connections (file descriptors exhausted, /healthz timing
out) and 230 MB of identical tracebacks in 30 s. Here a bounded number of half-open connections
on 127.0.0.1 against a real collector (uvicorn in a thread), with short deadlines so the test is
quick; a slow-loris body; and the log filter over real log records.
"""

from __future__ import annotations

import logging
import selectors
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit

import httpx
import pytest
from pipeline_helpers import metric

from latencylens_collector.runtime.logs import RepeatFilter

HALF_OPEN = 200
SERVER_CLOSE_WAIT_S = 20.0
"""Upper bound for waiting on the server to close a connection (the deadlines are 1–2 s)."""


def _address(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    assert parts.hostname and parts.port
    return parts.hostname, parts.port


@contextmanager
def _connections(url: str, count: int, first_bytes: bytes = b"") -> Iterator[list[socket.socket]]:
    sockets = []
    try:
        for _ in range(count):
            sock = socket.create_connection(_address(url), timeout=5)
            if first_bytes:
                sock.sendall(first_bytes)
            sockets.append(sock)
        yield sockets
    finally:
        for sock in sockets:
            sock.close()


def _readable(sockets: list[socket.socket], timeout_s: float) -> list[socket.socket]:
    """The sockets with data (or EOF) within ``timeout_s``. epoll, not select(): a long test run
    may hand out descriptors above 1024, which select() refuses."""
    with selectors.DefaultSelector() as selector:
        for sock in sockets:
            selector.register(sock, selectors.EVENT_READ)
        return [key.fileobj for key, _ in selector.select(timeout_s)]  # type: ignore[misc]


def _read_until_closed(sock: socket.socket, timeout_s: float = SERVER_CLOSE_WAIT_S) -> bytes | None:
    """Everything the server sends until it closes the connection; None if it is still open."""
    received = b""
    deadline = time.monotonic() + timeout_s
    while (remaining := deadline - time.monotonic()) > 0:
        readable = _readable([sock], remaining)
        if not readable:
            continue
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            return received
        if not chunk:
            return received
        received += chunk
    return None


def _answers(sockets: list[socket.socket], wait_s: float) -> list[bytes | None]:
    """What each connection got before the server closed it, watching all of them for ``wait_s``;
    None for those still open then."""
    received: dict[socket.socket, bytes] = {sock: b"" for sock in sockets}
    open_ = set(sockets)
    deadline = time.monotonic() + wait_s
    while open_ and (remaining := deadline - time.monotonic()) > 0:
        readable = _readable(list(open_), remaining)
        for sock in readable:
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                chunk = b""
            if chunk:
                received[sock] += chunk
            else:
                open_.discard(sock)
    return [None if sock in open_ else received[sock] for sock in sockets]


def _healthz(url: str) -> int:
    return httpx.get(f"{url}/healthz", timeout=10).status_code


def test_half_open_connections_do_not_stop_healthz_and_are_closed(start_collector: Callable) -> None:
    lens = start_collector(header_timeout_s=2)
    partial = b"POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-protob"
    with (
        _connections(lens.url, HALF_OPEN // 2) as silent,
        _connections(lens.url, HALF_OPEN // 2, partial) as slow,
    ):
        assert _healthz(lens.url) == 200  # 200 connections hang, the service still answers
        closed = [_read_until_closed(sock) for sock in [*silent, *slow]]
    # Each one was closed by the server once its headers were late; nothing was answered.
    assert closed == [b""] * HALF_OPEN
    assert _healthz(lens.url) == 200


def test_headers_trickled_byte_by_byte_are_cut_at_the_deadline(start_collector: Callable) -> None:
    """A slow loris sends a byte now and then; the deadline runs from the first byte, not the last."""
    lens = start_collector(header_timeout_s=2)
    request = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 200
    with _connections(lens.url, 1) as (sock,):
        cut = False
        for byte in request:  # up to 200 × 0.1 s = 20 s, ten times the deadline
            try:
                sock.sendall(bytes([byte]))
            except (BrokenPipeError, ConnectionResetError):
                cut = True
                break
            readable = _readable([sock], 0.1)
            if readable:
                cut = sock.recv(1024) == b""
                break
        assert cut


def test_connections_beyond_the_limit_are_refused_at_once(start_collector: Callable) -> None:
    lens = start_collector(max_connections=50, header_timeout_s=120)
    refused_before = metric("latencylens_connections_refused_total", protocol="http")
    with _connections(lens.url, 80) as sockets:
        answers = _answers(sockets, wait_s=3.0)
    refused = [answer for answer in answers if answer is not None]
    # 50 stay open (waiting for headers); the other 30 get a 503 and are closed: bounded descriptors.
    assert len(refused) == 30
    assert metric("latencylens_connections_refused_total", protocol="http") - refused_before == 30
    assert all(answer.startswith(b"HTTP/1.1 503 ") and b"Retry-After: 1" in answer for answer in refused)
    assert _healthz(lens.url) == 200  # once those clients are gone


def test_a_slow_loris_body_is_answered_408_and_closed(start_collector: Callable) -> None:
    lens = start_collector(body_timeout_s=2)
    head = (
        b"POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-protobuf\r\n"
        b"Content-Length: 100000\r\n\r\n"
    )
    with _connections(lens.url, 1, head) as (sock,):
        answer = b""
        for _ in range(100):  # a byte every 0.1 s: 10 s at most, five times the deadline
            try:
                sock.sendall(b"\x0a")
            except (BrokenPipeError, ConnectionResetError):
                break
            readable = _readable([sock], 0.1)
            if readable:
                answer = _read_until_closed(sock) or b""
                break
        assert _healthz(lens.url) == 200
    assert answer.startswith(b"HTTP/1.1 408 ")
    assert b"connection: close" in answer.lower()


def test_an_idle_keep_alive_connection_is_closed(start_collector: Callable) -> None:
    lens = start_collector(keep_alive_timeout_s=1)
    with _connections(lens.url, 1, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n") as (sock,):
        answer = _read_until_closed(sock)
    assert answer is not None and answer.startswith(b"HTTP/1.1 200 ")


# --- repeated log lines ----------------------------------------------------------------------------
class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture
def limited_logger() -> Iterator[tuple[logging.Logger, _Records, list[float]]]:
    now = [0.0]
    records = _Records()
    records.addFilter(RepeatFilter(burst=10, interval_s=60, clock=lambda: now[0]))
    logger = logging.getLogger("tests.hardening.repeat")
    logger.addHandler(records)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    yield logger, records, now
    logger.removeHandler(records)
    logger.setLevel(logging.NOTSET)
    logger.propagate = True


def test_the_same_warning_passes_ten_times_a_minute_then_says_how_many_were_held(limited_logger) -> None:
    logger, records, now = limited_logger
    for attempt in range(1000):
        logger.warning("ClickHouse unavailable, spooling for %.1f s: %s", 0.5, f"attempt {attempt}")
    logger.warning("another message")
    logger.info("info is never limited %d", 1)
    logger.info("info is never limited %d", 2)
    assert len(records.lines) == 10 + 1 + 2
    assert records.lines[9] == "ClickHouse unavailable, spooling for 0.5 s: attempt 9"

    now[0] = 61.0
    logger.warning("ClickHouse unavailable, spooling for %.1f s: %s", 1.0, "100% down")
    assert records.lines[-1] == (
        "ClickHouse unavailable, spooling for 1.0 s: 100% down "
        "[990 more like this suppressed in the last 60 s]"
    )


def test_a_flood_of_slow_clients_logs_a_bounded_number_of_lines(
    start_collector: Callable, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="latencylens_collector")
    lens = start_collector(header_timeout_s=1, max_connections=20)
    with _connections(lens.url, 60) as sockets:
        answers = _answers(sockets, SERVER_CLOSE_WAIT_S)  # 20 time out on their headers, 40 are refused
    assert None not in answers
    closing = [r for r in caplog.records if r.getMessage().startswith("closing a connection")]
    refusing = [r for r in caplog.records if r.getMessage().startswith("refusing a connection")]
    assert (len(closing), len(refusing)) == (10, 10)  # 20 and 40 happened; 10 of each were written
