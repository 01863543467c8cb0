"""Slow or idle clients cannot hold the service: deadlines for headers and bodies, a connection cap.

uvicorn closes an idle keep-alive connection after ``timeout_keep_alive``, but a connection that
never finishes its request headers, or trickles its body, is held for ever: 20,000 half-open
connections used up the file descriptors and ``/healthz`` stopped answering. So:

- :class:`GuardedH11Protocol` (uvicorn's h11 protocol) gives each request ``header_timeout_s`` from
  its first byte (or from the connection's opening) to complete its headers, then closes the
  connection; and it answers ``503`` + close to connections beyond ``max_connections`` at once, so
  the open file descriptors stay bounded whatever clients do.
- :class:`BodyDeadline` (ASGI middleware) gives each request ``timeout_s`` from its start to deliver
  its whole body, then answers ``408`` and closes the connection.

Refusals are logged at WARNING, which the service's :class:`~latencylens_collector.runtime.logs.
RepeatFilter` rate-limits.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, ClassVar, Final

import h11
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

from latencylens_collector.runtime import metrics

_log = logging.getLogger(__name__)

OVER_CAPACITY: Final = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
    b"Content-Length: 29\r\nConnection: close\r\nRetry-After: 1\r\n\r\ntoo many connections; retry.\n"
)


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a header deadline per request and a cap on open connections.
    Configure a subclass with :meth:`configured`; uvicorn makes one instance per connection."""

    header_timeout_s: ClassVar[float] = 10.0
    max_connections: ClassVar[int] = 1000

    @classmethod
    def configured(cls, header_timeout_s: float, max_connections: int) -> type[GuardedH11Protocol]:
        attributes = {"header_timeout_s": header_timeout_s, "max_connections": max(1, max_connections)}
        return type(cls.__name__, (cls,), attributes)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._header_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.max_connections:  # this one counted
            _log.warning(
                "refusing a connection: %d open (limit %d)", len(self.connections) - 1, self.max_connections
            )
            metrics.CONNECTIONS_REFUSED.labels(protocol="http").inc()
            transport.write(OVER_CAPACITY)
            transport.close()
            return
        self._arm_header_deadline()

    def data_received(self, data: bytes) -> None:
        if self._header_deadline is None and self.conn.their_state is h11.IDLE:
            self._arm_header_deadline()  # a new request begins on a kept-alive connection
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:
            self._disarm_header_deadline()  # headers complete (or the connection is done)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_header_deadline()
        super().connection_lost(exc)

    def _arm_header_deadline(self) -> None:
        if self.header_timeout_s > 0:
            self._header_deadline = self.loop.call_later(self.header_timeout_s, self._headers_too_slow)

    def _disarm_header_deadline(self) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None

    def _headers_too_slow(self) -> None:
        self._header_deadline = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            _log.warning(
                "closing a connection: no complete request headers within %.0f s", self.header_timeout_s
            )
            self.transport.close()


class BodyTimeout(BaseException):
    """Raised into the app when a request body is late. A BaseException, as asyncio's CancelledError
    is, so an endpoint's ``except Exception`` cannot turn it into a 500."""


class BodyDeadline:
    """ASGI middleware: an HTTP request's body must have arrived ``timeout_s`` after the request
    started; a slower one is answered ``408`` with ``Connection: close`` (nothing else is sent)."""

    def __init__(self, app: ASGIApp, timeout_s: float) -> None:
        self.app = app
        self.timeout_s = timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.timeout_s <= 0:
            await self.app(scope, receive, send)
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_s
        body_done = False
        response_started = False

        async def timed_receive() -> Message:
            nonlocal body_done
            if body_done:
                return await receive()
            try:
                message = await asyncio.wait_for(receive(), deadline - loop.time())
            except asyncio.TimeoutError:
                raise BodyTimeout from None
            if message["type"] != "http.request" or not message.get("more_body", False):
                body_done = True
            return message

        async def tracked_send(message: Message) -> None:
            nonlocal response_started
            if message["type"] == "http.response.start":
                response_started = True
            await send(message)

        try:
            await self.app(scope, timed_receive, tracked_send)
        except BodyTimeout:
            client = scope.get("client")
            _log.warning(
                "request body not received within %.0f s, answered 408 (client %s)",
                self.timeout_s,
                client[0] if client else "unknown",
            )
            if not response_started:
                await _send_408(send)


async def _send_408(send: Send) -> None:
    body = b"request body not received in time\n"
    headers = [
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
    ]
    await send({"type": "http.response.start", "status": 408, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})
