"""Start and stop the ingest side of the service with the app: writer (spool replay), gRPC, the
hourly rollup's refresher and the request-row reconciler."""

from __future__ import annotations

import logging

from fastapi import FastAPI

from latencylens_collector.api.deps import app_key_store
from latencylens_collector.pipeline.reconciler import Reconciler, reconcile_in_service
from latencylens_collector.pipeline.service import Pipeline
from latencylens_collector.runtime.clock import Clock
from latencylens_collector.runtime.scheduler import Scheduler
from latencylens_collector.settings import Settings
from latencylens_collector.storage.rollup import refresh_in_service

_log = logging.getLogger(__name__)


def start_intake(app: FastAPI) -> None:
    """Start ``app.state.pipeline``, then the gRPC receiver when enabled. A gRPC port that cannot
    be bound is logged and shown at /readyz; OTLP/HTTP keeps working."""
    state = app.state
    pipeline: Pipeline = state.pipeline
    settings: Settings = state.settings
    clock: Clock = state.clock
    pipeline.start()
    state.rollup = None
    if settings.rollup_interval_s > 0:
        store, settle_s = state.store, settings.rollup_settle_s
        state.rollup = Scheduler(
            lambda: refresh_in_service(store, settle_s), settings.rollup_interval_s, name="latencylens-rollup"
        )
        state.rollup.start()
    state.reconciler = None
    if settings.reconcile_interval_s > 0:
        reconciler = Reconciler(
            state.store,
            settings.reconcile_settle_s,
            settings.reconcile_lookback_s,
            build=pipeline.row_process,
        )
        state.reconciler = Scheduler(
            lambda: reconcile_in_service(reconciler),
            settings.reconcile_interval_s,
            name="latencylens-reconciler",
        )
        state.reconciler.start()
    state.grpc_server = None
    if not settings.grpc_enabled:
        state.grpc_status = "disabled"
        return
    from latencylens_collector.intake.grpc import GrpcServer

    server = GrpcServer(pipeline, settings, clock, keys=lambda: app_key_store(app))
    try:
        port = server.start()
    except OSError as exc:
        state.grpc_status = f"not listening: {exc}"
        _log.error("OTLP/gRPC receiver not started: %s", exc)
        return
    state.grpc_server, state.grpc_port = server, port
    state.grpc_status = f"listening on {settings.host}:{port}"
    _log.info("OTLP/gRPC receiver %s", state.grpc_status)


def stop_intake(app: FastAPI) -> None:
    """Stop taking gRPC calls (running ones finish), then write out everything accepted."""
    state = app.state
    server = getattr(state, "grpc_server", None)
    if server is not None:
        server.stop()
        state.grpc_server = None
    state.pipeline.stop()
    for background in (getattr(state, "reconciler", None), getattr(state, "rollup", None)):
        if background is not None:
            background.stop()
