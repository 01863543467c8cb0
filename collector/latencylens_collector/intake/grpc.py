"""OTLP/gRPC trace receiver (port 4317 by default), the official ``TraceService``.

It shares everything after decoding with OTLP/HTTP: the caller's project comes from the same
:func:`resolve_project`, spans go through the same pipeline, and ``Export`` returns only once they
are stored or spooled. A full queue is ``RESOURCE_EXHAUSTED`` and unavailable storage and spool
``UNAVAILABLE``, both with a ``RetryInfo`` trailer so exporters wait before retrying.

The method is registered like ``add_TraceServiceServicer_to_server`` does, with one change: the
raw body is decoded inside ``Export`` (not by a request deserializer) by the same decoder as
OTLP/HTTP, within :meth:`Pipeline.decoding` so the writer waits for its spans rather than flushing
without them: strings that are not UTF-8 are repaired (the stock deserializer fails the whole call
with INTERNAL), a malformed span is rejected alone (``partial_success``), and an undecodable body is
INVALID_ARGUMENT with the reason. The key is checked and the queue asked for room before decoding.
An export that decodes to more than one insert may hold is RESOURCE_EXHAUSTED without
``RetryInfo`` (retrying cannot help); the message size limit is gRPC's own
(``max_body_bytes``, after decompression).

Connections are bounded like HTTP's: as many as ``max_connections`` open at once, counted and
refused by :class:`~.grpc_connections.ConnectionCap`, which owns the public port and relays admitted
connections to the server on a private Unix socket (gRPC core's own connection limit is not exact);
and by :func:`server_options`, the HTTP/2 handshake within ``header_timeout_s``, idle ones closed
after a minute and silent ones pinged and closed, at most :data:`MAX_PENDING_CALLS` calls in the
server at once.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Final, NoReturn

import grpc
from google.protobuf.duration_pb2 import Duration
from google.rpc.error_details_pb2 import RetryInfo
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2_grpc import TraceServiceServicer

from latencylens_collector.auth import KeyStore, Unauthorized, resolve_project
from latencylens_collector.intake import engine, otlp
from latencylens_collector.intake.errors import traces_only
from latencylens_collector.intake.grpc_connections import ConnectionCap
from latencylens_collector.intake.received import count_received
from latencylens_collector.pipeline import (
    QUEUE_FULL_RETRY_S,
    ExportTooLarge,
    Outcome,
    Pipeline,
    PipelineClosed,
    QueueFull,
    WriteFailed,
)
from latencylens_collector.pipeline.turns import FairSlots
from latencylens_collector.runtime import metrics
from latencylens_collector.runtime.clock import Clock
from latencylens_collector.settings import Settings
from latencylens_collector.storage.store import RETRY_AFTER_SECONDS

_log = logging.getLogger(__name__)

PROTOCOL: Final = "grpc"
SERVICE_NAME: Final = trace_service_pb2.DESCRIPTOR.services_by_name["TraceService"].full_name
OTHER_SIGNALS: Final = {
    "metrics": metrics_service_pb2.DESCRIPTOR.services_by_name["MetricsService"].full_name,
    "logs": logs_service_pb2.DESCRIPTOR.services_by_name["LogsService"].full_name,
}
"""The services of the signals this collector does not receive: answered, not left unknown."""
MAX_WORKERS: Final = 16
"""Concurrent Export calls being decoded or waiting for their batch to be written."""
DECODE_SLOTS: Final = 2
"""Exports decoded at once, as for OTLP/HTTP (decoding holds the GIL: more only slow the writer);
waiting calls get them project by project in turn (:class:`FairSlots`)."""
MAX_PENDING_CALLS: Final = 2 * MAX_WORKERS
"""Export calls running or waiting for a worker; one more is RESOURCE_EXHAUSTED at once (each may
hold a received message of up to ``max_body_bytes``, so this bounds their memory too)."""
IDLE_S: Final = 60
"""An idle connection is closed (GOAWAY) after this long: an exporter's channel is kept between
batches (the SDK sends every 5 s) and reconnects on its own when it was closed."""
MAX_AGE_S: Final = 600
"""Any connection is closed after this long, once its calls have had ``body_timeout_s`` to finish:
no connection, however busy, is held for ever."""
KEEPALIVE_S: Final = 30
KEEPALIVE_TIMEOUT_S: Final = 10
"""The server pings a connection silent for ``KEEPALIVE_S`` and closes it when no answer comes
within ``KEEPALIVE_TIMEOUT_S``: a half-open peer (gone without a FIN) is let go within 40 s."""
MAX_METADATA_BYTES: Final = 16 * 1024
"""Headers of one call (metadata), keys included."""


def server_options(settings: Settings) -> list[tuple[str, int]]:
    """gRPC core's limits, the counterparts of the HTTP server's (docs/collector.md, Limits): the
    message size (``max_body_bytes``, after decompression), the time to finish the HTTP/2 handshake
    (``header_timeout_s``), idle and dead connections, calls per connection and header size. Open
    connections are counted by :class:`ConnectionCap` instead."""
    return [
        ("grpc.max_receive_message_length", settings.max_body_bytes),
        ("grpc.server_handshake_timeout_ms", max(1, settings.header_timeout_s) * 1000),
        ("grpc.max_connection_idle_ms", IDLE_S * 1000),
        ("grpc.max_connection_age_ms", MAX_AGE_S * 1000),
        ("grpc.max_connection_age_grace_ms", max(1, settings.body_timeout_s) * 1000),
        ("grpc.keepalive_time_ms", KEEPALIVE_S * 1000),
        ("grpc.keepalive_timeout_ms", KEEPALIVE_TIMEOUT_S * 1000),
        ("grpc.max_concurrent_streams", MAX_WORKERS),
        # Else a call sent as another ends, while its stream is still being freed, is refused with
        # RST_STREAM (UNAVAILABLE, no RetryInfo): MAX_PENDING_CALLS answers overload instead.
        ("grpc.http.overload_protection", 0),
        ("grpc.max_metadata_size", MAX_METADATA_BYTES),
        ("grpc.so_reuseport", 0),
    ]


class TraceReceiver(TraceServiceServicer):
    """``TraceService/Export`` over the ingest pipeline."""

    def __init__(
        self,
        pipeline: Pipeline,
        settings: Settings,
        clock: Clock,
        keys: Callable[[], KeyStore | None] = lambda: None,
    ) -> None:
        self.pipeline, self.settings, self.clock, self.keys = pipeline, settings, clock, keys
        self.turns = FairSlots(DECODE_SLOTS)

    def Export(self, request: bytes, context: grpc.ServicerContext) -> ExportTraceServiceResponse:
        """``request`` is the raw body; it is decoded and queued here, then the call waits for the
        writer outside :meth:`Pipeline.decoding` (inside it, the writer would wait for the call)."""
        project = self._project(context)
        try:
            self.pipeline.check_room(project)
        except QueueFull as exc:
            _refuse(context, "queue_full", grpc.StatusCode.RESOURCE_EXHAUSTED, str(exc), QUEUE_FULL_RETRY_S)
        except PipelineClosed as exc:
            _refuse(context, "unavailable", grpc.StatusCode.UNAVAILABLE, str(exc), RETRY_AFTER_SECONDS)
        try:
            return self._admitted(request, project, context)
        finally:
            self.pipeline.done(project)

    def _admitted(
        self, request: bytes, project: str, context: grpc.ServicerContext
    ) -> ExportTraceServiceResponse:
        """Decode, queue and wait for an export :meth:`Pipeline.check_room` let in."""
        if self.pipeline.engine_takes(len(request), project):
            stored = self._by_engine(request, project, context)
            if stored is not None:
                return otlp.export_response(stored)
        with self.pipeline.decoding(project), self.turns.slot(project):  # projects in turn, not first come
            started = time.thread_time()
            try:
                batch = self._decode(request, project, context)
                written = self._submit(batch, context) if batch.spans else None
            finally:
                self.pipeline.charge(project, time.thread_time() - started)
        if written is not None:
            try:
                written.result()
            except WriteFailed as exc:
                _refuse(context, "unavailable", grpc.StatusCode.UNAVAILABLE, str(exc), RETRY_AFTER_SECONDS)
        return otlp.export_response(batch)

    def _by_engine(
        self, body: bytes, project: str, context: grpc.ServicerContext
    ) -> otlp.DecodedBatch | None:
        """The answer when ClickHouse stored the whole body (:mod:`.engine`), else None."""
        limits = otlp.Limits.of(self.settings, now_ns=self.clock())
        try:
            ticket = engine.submit(self.pipeline, body, project, limits)
        except QueueFull as exc:
            _refuse(context, "queue_full", grpc.StatusCode.RESOURCE_EXHAUSTED, str(exc), QUEUE_FULL_RETRY_S)
        except PipelineClosed as exc:
            _refuse(context, "unavailable", grpc.StatusCode.UNAVAILABLE, str(exc), RETRY_AFTER_SECONDS)
        if ticket is None:
            return None
        ticket.future.result()
        return engine.answer(self.pipeline, ticket, PROTOCOL)

    def _project(self, context: grpc.ServicerContext) -> str:
        metadata = {key.lower(): value for key, value in context.invocation_metadata()}
        try:
            return resolve_project(
                _text(metadata.get("authorization")), self.keys(), _text(metadata.get("x-api-key"))
            )
        except Unauthorized as exc:
            metrics.EXPORTS_REFUSED.labels(protocol=PROTOCOL, reason="unauthenticated").inc()
            _abort(context, grpc.StatusCode.UNAUTHENTICATED, str(exc))

    def _decode(self, body: bytes, project: str, context: grpc.ServicerContext) -> otlp.DecodedBatch:
        limits = otlp.Limits.of(self.settings, now_ns=self.clock())
        try:
            batch = otlp.decode(body, as_json=False, project=project, limits=limits)
        except otlp.OtlpDecodeError as exc:
            metrics.EXPORTS_REFUSED.labels(protocol=PROTOCOL, reason="bad_request").inc()
            _abort(context, grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        count_received(batch, PROTOCOL)
        return batch

    def _submit(self, batch: otlp.DecodedBatch, context: grpc.ServicerContext) -> Future[Outcome]:
        try:
            return self.pipeline.submit(batch.spans)
        except QueueFull as exc:
            _refuse(context, "queue_full", grpc.StatusCode.RESOURCE_EXHAUSTED, str(exc), QUEUE_FULL_RETRY_S)
        except ExportTooLarge as exc:
            metrics.EXPORTS_REFUSED.labels(protocol=PROTOCOL, reason="too_large").inc()
            _abort(context, grpc.StatusCode.RESOURCE_EXHAUSTED, str(exc))
        except PipelineClosed as exc:
            _refuse(context, "unavailable", grpc.StatusCode.UNAVAILABLE, str(exc), RETRY_AFTER_SECONDS)


def _refuse(
    context: grpc.ServicerContext, reason: str, code: grpc.StatusCode, message: str, retry_s: int
) -> NoReturn:
    metrics.EXPORTS_REFUSED.labels(protocol=PROTOCOL, reason=reason).inc()
    retry = RetryInfo(retry_delay=Duration(seconds=retry_s))
    context.set_trailing_metadata((("google.rpc.retryinfo-bin", retry.SerializeToString()),))
    _abort(context, code, message)


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _abort(context: grpc.ServicerContext, code: grpc.StatusCode, message: str) -> NoReturn:
    context.abort(code, message)
    raise AssertionError("ServicerContext.abort returned")  # it always raises


def add_receiver_to_server(receiver: TraceReceiver, server: grpc.Server) -> None:
    """Register ``Export`` under the official service name, taking the raw body, and an answer to
    the metrics and logs services (:data:`OTHER_SIGNALS`)."""
    handler = grpc.unary_unary_rpc_method_handler(
        receiver.Export,
        request_deserializer=None,  # the raw body: Export decodes it
        response_serializer=ExportTraceServiceResponse.SerializeToString,
    )
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(SERVICE_NAME, {"Export": handler}),)
    )
    for signal, service in OTHER_SIGNALS.items():
        other = grpc.unary_unary_rpc_method_handler(_other_signal(signal), request_deserializer=None)
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service, {"Export": other}),))


def _other_signal(signal: str) -> Callable[[bytes, grpc.ServicerContext], NoReturn]:
    """``Export`` of a signal this collector does not receive: UNIMPLEMENTED (which OTLP exporters
    do not retry) saying what to change, rather than gRPC's bare "Method not found!"."""
    message = traces_only(signal, SERVICE_NAME)

    def export(request: bytes, context: grpc.ServicerContext) -> NoReturn:
        metrics.EXPORTS_REFUSED.labels(protocol=PROTOCOL, reason="not_traces").inc()
        _abort(context, grpc.StatusCode.UNIMPLEMENTED, message)

    return export


class GrpcServer:
    """The gRPC server's lifecycle: ``start`` binds (port 0 picks one), ``stop`` drains calls.

    The server itself listens on a Unix socket in a private directory; the public ``host:port`` is
    :class:`ConnectionCap`'s, which relays at most ``max_connections`` connections to it."""

    def __init__(
        self,
        pipeline: Pipeline,
        settings: Settings,
        clock: Clock,
        keys: Callable[[], KeyStore | None] = lambda: None,
    ) -> None:
        self.settings = settings
        self.receiver = TraceReceiver(pipeline, settings, clock, keys)
        self._server: grpc.Server | None = None
        self._cap: ConnectionCap | None = None
        self._socket_dir: str | None = None
        self.port: int | None = None

    @property
    def open_connections(self) -> int:
        """Connections admitted and open now (at most ``max_connections``)."""
        return self._cap.open_connections if self._cap is not None else 0

    def start(self) -> int:
        """Listen and serve; returns the port. Raises OSError when the address cannot be bound."""
        socket_dir = tempfile.mkdtemp(prefix="latencylens-grpc-")  # mode 0700: this user's only
        upstream = f"{socket_dir}/grpc.sock"
        server = grpc.server(
            ThreadPoolExecutor(max_workers=MAX_WORKERS, thread_name_prefix="latencylens-grpc"),
            options=server_options(self.settings),
            maximum_concurrent_rpcs=MAX_PENDING_CALLS,
        )
        add_receiver_to_server(self.receiver, server)
        address = f"{self.settings.host}:{self.settings.grpc_port}"
        cap = ConnectionCap(
            self.settings.host, self.settings.grpc_port, upstream, self.settings.max_connections
        )
        try:
            if not server.add_insecure_port(f"unix:{upstream}"):
                raise OSError(f"cannot listen for OTLP/gRPC on {upstream}")
            server.start()
            port = cap.start()
        except (OSError, RuntimeError) as exc:
            server.stop(None)
            shutil.rmtree(socket_dir, ignore_errors=True)
            raise OSError(f"cannot listen for OTLP/gRPC on {address}: {exc}") from exc
        self._server, self._cap, self._socket_dir, self.port = server, cap, socket_dir, port
        return port

    def stop(self, grace_s: float = 10.0) -> None:
        """Refuse new connections and calls and let running ones finish (they wait for the writer)."""
        if self._cap is not None:
            self._cap.stop_accepting()
        if self._server is not None:
            self._server.stop(grace_s).wait()
            self._server = None
        if self._cap is not None:
            self._cap.close()
            self._cap = None
        if self._socket_dir is not None:
            shutil.rmtree(self._socket_dir, ignore_errors=True)
            self._socket_dir = None
