"""The collector service: one FastAPI app, migrations at start-up."""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from opentelemetry import context as otel_context
from starlette.types import ASGIApp, Receive, Scope, Send

from latencylens_collector import __version__, ui
from latencylens_collector.analysis.costs import use_prices, warm_prices
from latencylens_collector.api import docs
from latencylens_collector.api.deps import app_key_store
from latencylens_collector.api.errors import add_error_handlers
from latencylens_collector.api.hosts import HostAllowList
from latencylens_collector.api.lifespan import start_intake, stop_intake
from latencylens_collector.api.routes import advice as advice_routes
from latencylens_collector.api.routes import cache as cache_routes
from latencylens_collector.api.routes import compare as compare_routes
from latencylens_collector.api.routes import components as components_routes
from latencylens_collector.api.routes import health, otlp, requests
from latencylens_collector.api.routes import metrics as metrics_routes
from latencylens_collector.api.routes import replay as replay_routes
from latencylens_collector.api.routes import slos as slo_routes
from latencylens_collector.api.routes import stats as stats_routes
from latencylens_collector.pipeline import Pipeline
from latencylens_collector.pipeline.ingest import Ingestor
from latencylens_collector.runtime import heap
from latencylens_collector.runtime.clock import Clock
from latencylens_collector.settings import Settings
from latencylens_collector.slo.service import start_slo_service
from latencylens_collector.storage.store import RETRY_AFTER_SECONDS, StorageError, StorageUnavailable, Store

_log = logging.getLogger(__name__)


def create_app(
    settings: Settings | None = None, store: Store | None = None, clock: Clock | None = None
) -> FastAPI:
    """Build the service. Without a store one is created from the settings (connected lazily).

    ``clock`` (tests): the service's time. By default the process clock answers API windows and
    the store's clock (ClickHouse's) ends SLO windows, as it stamps the rows they count."""
    settings = settings or (store.settings if store is not None else Settings())
    owns_store = store is None
    the_store = store if store is not None else Store(settings)
    use_prices(settings.prices)  # request rows are priced at ingest, by the writer and the reconciler

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # A chdb directory another process runs: refuse to start (it could never store a span).
        await run_in_threadpool(the_store.claim)
        try:
            applied = await run_in_threadpool(the_store.migrate)
            if applied:
                _log.info("applied migrations: %s", ", ".join(f"{m.version:04d}_{m.name}" for m in applied))
        except StorageError as exc:
            # Keep serving (exports go to the spool); the writer retries the migrations.
            _log.warning("migrations not applied at start-up: %s", exc)
        await run_in_threadpool(start_intake, app)
        app.state.slo = await run_in_threadpool(start_slo_service, settings, the_store, clock)
        await run_in_threadpool(warm_prices)  # now, not in the first export's write
        await run_in_threadpool(heap.settle)
        yield
        heap.release()
        await run_in_threadpool(stop_intake, app)
        await run_in_threadpool(app.state.slo.stop)
        if owns_store:
            the_store.close()

    app = FastAPI(
        title="LatencyLens collector",
        description="Receives OTLP traces and answers: where did the time go in this LLM request?",
        version=__version__,
        lifespan=lifespan,
        docs_url=None,  # served by api.docs from the installed bundle, not a CDN
        redoc_url=None,
        **_no_self_telemetry(),
    )
    app.add_middleware(SuppressInstrumentation)
    app.add_middleware(HostAllowList, settings=settings, keys_enabled=lambda: app_key_store(app).enabled())
    app.state.settings = settings
    app.state.store = the_store
    app.state.clock = clock or time.time_ns
    app.state.ingestor = Ingestor(the_store)
    app.state.pipeline = Pipeline(settings, app.state.ingestor)
    app.include_router(otlp.router)
    app.include_router(requests.router)
    app.include_router(stats_routes.router)
    app.include_router(compare_routes.router)
    app.include_router(replay_routes.router)
    app.include_router(advice_routes.router)
    app.include_router(cache_routes.router)
    app.include_router(components_routes.router)
    app.include_router(slo_routes.router)
    app.include_router(health.router)
    app.include_router(metrics_routes.router)
    app.include_router(ui.router)
    app.include_router(docs.router)
    app.add_exception_handler(StorageError, _storage_error)
    add_error_handlers(app)
    return app


def _no_self_telemetry() -> dict[str, Any]:
    """Turn off FastAPI's native OpenTelemetry (newer FastAPI versions) for the collector itself.

    In a process that also exports to this collector (the demo, tests), every export would create
    spans to export again: a loop that never drains.
    """
    if "telemetry" in inspect.signature(FastAPI.__init__).parameters:
        return {"telemetry": {"tracing": False, "metrics": False, "logs": False, "auto_configure": False}}
    return {}


class SuppressInstrumentation:
    """ASGI middleware marking the collector's own work as not-to-be-traced, so instrumentations
    that honour OpenTelemetry's suppression key (HTTP clients, ASGI) skip it, threads included."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        token = otel_context.attach(otel_context.set_value(otel_context._SUPPRESS_INSTRUMENTATION_KEY, True))
        try:
            await self.app(scope, receive, send)
        finally:
            otel_context.detach(token)


async def _storage_error(request: Request, exc: Exception) -> JSONResponse:
    unavailable = isinstance(exc, StorageUnavailable)
    _log.warning("storage error on %s: %s", request.url.path, exc)
    # The answer names no address nor ClickHouse text (they may hold credentials or data): the log does.
    return JSONResponse(
        status_code=503,
        content={"detail": f"storage {'unavailable' if unavailable else 'error'}; retry later"},
        headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
    )
