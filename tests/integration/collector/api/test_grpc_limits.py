"""OTLP/gRPC connections are bounded like HTTP's: a connection that never finishes its HTTP/2
handshake is closed at ``header_timeout_s``, and beyond ``max_connections`` a new one is refused
while the others are served."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import Any

import grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2_grpc import TraceServiceStub
from otlp_builders import chat_trace, export_request, recent_base_ns
from pipeline_helpers import grpc_target, metric

from latencylens_collector.intake.grpc import MAX_WORKERS, server_options
from latencylens_collector.settings import Settings

WAIT_S = 20.0
"""How long a test waits for the server to act (a bound on a liveness check, not a speed claim)."""


def export(target: str) -> grpc.StatusCode:
    return export_with_details(target)[0]


def export_with_details(target: str) -> tuple[grpc.StatusCode, str]:
    # A channel of its own connection: from the shared subchannel pool, a new channel may reuse the
    # connection of an earlier export still open, which the server's connection limit never sees.
    with grpc.insecure_channel(target, options=[("grpc.use_local_subchannel_pool", 1)]) as channel:
        try:
            TraceServiceStub(channel).Export(export_request(chat_trace(recent_base_ns())), timeout=10)
        except grpc.RpcError as exc:
            return exc.code(), exc.details() or ""
    return grpc.StatusCode.OK, ""


def half_open(target: str) -> socket.socket:
    """A TCP connection that sends nothing (no HTTP/2 preface): a slow or hostile client."""
    host, port = target.rsplit(":", 1)
    connection = socket.create_connection((host, int(port)))
    connection.settimeout(WAIT_S)
    return connection


def wait_for(condition: Callable[[], bool], failure: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, failure
        time.sleep(0.05)


def closed_by_server(connection: socket.socket) -> bool:
    """Read until the server closes (True) or the wait ends (False)."""
    deadline = time.monotonic() + WAIT_S
    try:
        while time.monotonic() < deadline:
            if not connection.recv(4096):
                return True
    except TimeoutError:
        return False
    return False


def test_a_connection_that_never_handshakes_is_closed_at_the_header_deadline(
    start_collector: Callable[..., Any],
) -> None:
    collector = start_collector(header_timeout_s=1)
    target = grpc_target(collector.url)
    silent = half_open(target)
    assert closed_by_server(silent)  # gRPC's own default waits 120 s
    silent.close()
    assert export(target) == grpc.StatusCode.OK


def test_connections_beyond_the_limit_are_refused_and_served_again_once_closed(
    start_collector: Callable[..., Any],
) -> None:
    collector = start_collector(max_connections=3, header_timeout_s=30)
    target = grpc_target(collector.url)
    server = collector.service.app.state.grpc_server
    assert export(target) == grpc.StatusCode.OK
    # The channel's connection closes in the background: wait until the server has seen it close,
    # or it would still count when the half-open ones arrive, and a later export could take its place.
    wait_for(lambda: server.open_connections == 0, "the export's connection was never released")
    held = [half_open(target) for _ in range(3)]
    wait_for(lambda: server.open_connections == 3, "the half-open connections were not all admitted")
    refused_before = metric("latencylens_connections_refused_total", protocol="grpc")
    code, details = export_with_details(target)
    assert code == grpc.StatusCode.UNAVAILABLE, details  # a fourth connection is refused
    assert "at most 3 OTLP/gRPC connections" in details and "retry later" in details
    assert export(target) == grpc.StatusCode.UNAVAILABLE  # and again: the count holds
    assert server.open_connections == 3
    # Each refused export is at least one refused connection (a channel may try again before failing).
    assert metric("latencylens_connections_refused_total", protocol="grpc") - refused_before >= 2
    for connection in held:
        connection.close()
    deadline = time.monotonic() + WAIT_S
    while export(target) != grpc.StatusCode.OK:  # the server notices the closes
        assert time.monotonic() < deadline, "the closed connections were never released"
        time.sleep(0.2)


def test_the_options_follow_the_settings() -> None:
    settings = Settings(
        environ={}, max_body_bytes=1234567, max_connections=77, header_timeout_s=7, body_timeout_s=9
    )
    options = dict(server_options(settings))
    assert options["grpc.max_receive_message_length"] == 1234567
    assert options["grpc.server_handshake_timeout_ms"] == 7000
    assert options["grpc.max_connection_age_grace_ms"] == 9000
    assert options["grpc.max_concurrent_streams"] == MAX_WORKERS
    assert options["grpc.keepalive_time_ms"] > 0 and options["grpc.max_connection_idle_ms"] > 0
