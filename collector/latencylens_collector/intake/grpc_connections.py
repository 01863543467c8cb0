"""The OTLP/gRPC receiver's connection cap, enforced by accepting connections ourselves.

gRPC core's ``grpc.max_allowed_incoming_connections`` let one connection over the limit through in
about one run of three (it counts connections asynchronously), and grpcio has no way to hand the
server a socket we accepted. So :class:`ConnectionCap` owns the public listening socket: each
accepted connection is either admitted, while fewer than ``max_connections`` are open, and relayed
byte for byte to the gRPC server on a private Unix socket; or refused: answered in HTTP/2 with
``UNAVAILABLE`` and a message saying what to do (exporters retry UNAVAILABLE), then closed. A
connection counts from its accept to its close, whichever side closes, so connection N+1 is refused
while N are open and admitted as soon as one closes.

Everything else stays gRPC core's: it sees each admitted connection as its own connection (the
handshake deadline, idle, age and keepalive limits close it, and the relay closes the client's in
turn). The relay runs on an asyncio loop in a thread of its own; backpressure is the transports'
own (a side that cannot keep up pauses reading from the other). Either side's end (HTTP/2 has no
use for a half-closed connection) closes both, and the count drops at once.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import socket
import threading
from typing import Final

import h2.config
import h2.connection
import h2.events
import h2.exceptions
from google.protobuf.duration_pb2 import Duration
from google.rpc.error_details_pb2 import RetryInfo

from latencylens_collector.runtime import metrics

_log = logging.getLogger(__name__)

BACKLOG: Final = 1024
MAX_REFUSING: Final = 64
"""Refused connections being answered at once; beyond them a refused connection is closed without
an answer (the exporter still sees UNAVAILABLE), so a flood of them costs a bounded amount."""
REFUSE_TIMEOUT_S: Final = 5.0
"""How long a refused connection may take to send its call before it is closed unanswered."""
REFUSED_LINGER_S: Final = 1.0
"""After the answer, how long the client has to read it and close first (closing with its next
frames unread would reset the connection and could discard the answer)."""
RETRY_S: Final = 1


def refusal_message(max_connections: int) -> str:
    return (
        f"too many connections: this collector serves at most {max_connections} OTLP/gRPC "
        "connections at once (max_connections); retry later, close idle channels, or raise "
        "LATENCYLENS_MAX_CONNECTIONS"
    )


class ConnectionCap:
    """Listens on ``host:port`` and relays at most ``max_connections`` connections at once to the
    gRPC server listening on the Unix socket ``upstream``."""

    def __init__(self, host: str, port: int, upstream: str, max_connections: int) -> None:
        self.host, self.requested_port, self.upstream = host, port, upstream
        self.max_connections = max(1, max_connections)
        self.message = refusal_message(self.max_connections)
        self.admitted: set[_Connection] = set()
        self.refusing = 0
        self.port: int | None = None
        self._loop = asyncio.new_event_loop()
        self._servers: list[asyncio.Server] = []
        self._thread: threading.Thread | None = None

    @property
    def open_connections(self) -> int:
        return len(self.admitted)

    def start(self) -> int:
        """Bind (OSError when the address cannot be bound), start accepting; returns the port."""
        sockets = _listen(self.host, self.requested_port)
        self.port = sockets[0].getsockname()[1]
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="latencylens-grpc-connections", daemon=True
        )
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._serve(sockets), self._loop).result()
        return self.port

    async def _serve(self, sockets: list[socket.socket]) -> None:
        for listening in sockets:
            self._servers.append(await self._loop.create_server(lambda: _Connection(self), sock=listening))

    def stop_accepting(self) -> None:
        """New connections are refused by the system from now on; open ones carry on."""
        if self._thread is not None:
            asyncio.run_coroutine_threadsafe(self._close_servers(), self._loop).result()

    async def _close_servers(self) -> None:
        for server in self._servers:
            server.close()
        self._servers.clear()

    def close(self) -> None:
        """Close every connection and stop the relay's thread."""
        if self._thread is None:
            return
        self.stop_accepting()
        asyncio.run_coroutine_threadsafe(self._close_all(), self._loop).result()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._thread = None
        self._loop.close()

    async def _close_all(self) -> None:
        for connection in list(self.admitted):
            connection.abort()
        await asyncio.sleep(0)  # let the transports run their connection_lost


class _Connection(asyncio.Protocol):
    """One client's connection: relayed to the gRPC server when admitted, else refused."""

    def __init__(self, cap: ConnectionCap) -> None:
        self.cap = cap
        self.transport: asyncio.Transport | None = None
        self.upstream: _Upstream | None = None
        self.refusal: _Refusal | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        cap = self.cap
        if len(cap.admitted) >= cap.max_connections:
            _log.warning(
                "refusing an OTLP/gRPC connection: %d open (limit %d)", len(cap.admitted), cap.max_connections
            )
            metrics.CONNECTIONS_REFUSED.labels(protocol="grpc").inc()
            if cap.refusing >= MAX_REFUSING:
                transport.abort()
                return
            self.refusal = _Refusal(cap, transport)
            return
        cap.admitted.add(self)
        transport.pause_reading()  # until the gRPC server's side is connected
        asyncio.get_running_loop().create_task(self._connect())

    async def _connect(self) -> None:
        assert self.transport is not None
        try:
            upstream_transport, upstream = await asyncio.get_running_loop().create_unix_connection(
                lambda: _Upstream(self), self.cap.upstream
            )
        except OSError as exc:
            _log.warning("cannot reach the gRPC server for a connection: %s", exc)
            self.transport.abort()
            return
        if self.transport.is_closing():  # the client left meanwhile
            upstream_transport.close()
            return
        self.upstream = upstream
        self.transport.resume_reading()

    def data_received(self, data: bytes) -> None:
        if self.refusal is not None:
            self.refusal.feed(data)
        elif self.upstream is not None and self.upstream.transport is not None:
            self.upstream.transport.write(data)

    def pause_writing(self) -> None:
        if self.upstream is not None and self.upstream.transport is not None:
            self.upstream.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.upstream is not None and self.upstream.transport is not None:
            self.upstream.transport.resume_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self.cap.admitted.discard(self)
        if self.refusal is not None:
            self.refusal.done()
        if self.upstream is not None and self.upstream.transport is not None:
            self.upstream.transport.close()

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()


class _Upstream(asyncio.Protocol):
    """The gRPC server's side of an admitted connection."""

    def __init__(self, client: _Connection) -> None:
        self.client = client
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if self.client.transport is not None:
            self.client.transport.write(data)

    def pause_writing(self) -> None:
        if self.client.transport is not None:
            self.client.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.client.transport is not None:
            self.client.transport.resume_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.client.transport is not None:
            self.client.transport.close()  # after what the server sent last (its GOAWAY) is out


class _Refusal:
    """Answers the first call on a refused connection with UNAVAILABLE, then closes it."""

    def __init__(self, cap: ConnectionCap, transport: asyncio.Transport) -> None:
        self.cap, self.transport = cap, transport
        cap.refusing += 1
        self.counted = True
        self.answered = False
        self.h2 = h2.connection.H2Connection(
            h2.config.H2Configuration(client_side=False, header_encoding=None)
        )
        self.h2.initiate_connection()
        transport.write(self.h2.data_to_send())
        loop = asyncio.get_running_loop()
        self.timer = loop.call_later(REFUSE_TIMEOUT_S, transport.abort)

    def feed(self, data: bytes) -> None:
        if self.answered:
            return  # the client's remaining frames: read and dropped until it closes
        try:
            events = self.h2.receive_data(data)
            for event in events:
                if isinstance(event, h2.events.RequestReceived) and event.stream_id is not None:
                    self._answer(event.stream_id)
                    break
            self.transport.write(self.h2.data_to_send())
        except h2.exceptions.H2Error:
            self.transport.abort()  # not HTTP/2: nothing to answer
            return
        if self.answered:
            self.timer.cancel()
            self.timer = asyncio.get_running_loop().call_later(REFUSED_LINGER_S, self.transport.close)

    def _answer(self, stream_id: int) -> None:
        retry = RetryInfo(retry_delay=Duration(seconds=RETRY_S)).SerializeToString()
        self.h2.send_headers(
            stream_id,
            [
                (b":status", b"200"),
                (b"content-type", b"application/grpc"),
                (b"grpc-status", b"14"),  # UNAVAILABLE: exporters retry it
                (b"grpc-message", self.cap.message.encode("ascii")),
                (b"google.rpc.retryinfo-bin", base64.b64encode(retry)),
            ],
            end_stream=True,
        )
        self.h2.close_connection(last_stream_id=stream_id)
        self.answered = True

    def done(self) -> None:
        self.timer.cancel()
        if self.counted:
            self.counted = False
            self.cap.refusing -= 1


def _listen(host: str, port: int) -> list[socket.socket]:
    """Listening sockets for every address of ``host`` (``localhost``: IPv4 and IPv6), all on one
    port (port 0: the one the system gives the first). The first must bind; others may not exist."""
    infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    addresses = list(dict.fromkeys((family, address) for family, _, _, _, address in infos))
    families = {family for family, _ in addresses}
    sockets: list[socket.socket] = []
    for family, address in addresses:
        listening = socket.socket(family, socket.SOCK_STREAM)
        try:
            listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6 and socket.AF_INET in families:
                listening.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            if sockets:
                address = (address[0], sockets[0].getsockname()[1], *address[2:])
            listening.bind(address)
            listening.listen(BACKLOG)
            listening.setblocking(False)
        except OSError:
            listening.close()
            if not sockets:
                raise
            continue
        sockets.append(listening)
    if not sockets:
        raise OSError(f"no address to listen on for {host!r}")
    return sockets
