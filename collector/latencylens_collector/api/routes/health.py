"""Liveness (``/healthz``) and readiness (``/readyz``).

Ready means an export would be acknowledged now: ClickHouse is reachable with migrations applied,
or, failing that, the spool can take the batch. The body says which.
"""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from latencylens_collector.api.deps import StoreDep
from latencylens_collector.pipeline import Pipeline
from latencylens_collector.queries.responses import Health
from latencylens_collector.storage.store import StorageError, Store

router = APIRouter(tags=["health"])


class Readiness(BaseModel):
    status: Literal["ready", "not ready"]
    writes_to: Literal["storage", "spool", "nowhere"] = Field(
        description="Where an export accepted now goes: ClickHouse, the disk spool, or nowhere (503)."
    )
    storage: str = Field(description="`ok`, or why ClickHouse cannot be written.")
    migrations: Literal["applied", "pending"]
    spool: str = Field(description="`writable`, `disabled`, or why batches cannot be spooled.")
    spool_pending_spans: int = Field(description="Spans in the spool waiting for ClickHouse.")
    queue_depth: int = Field(description="Spans accepted and waiting for the writer.")
    grpc: str = Field(description="OTLP/gRPC receiver: `listening on host:port`, `disabled` or why not.")


@router.get("/healthz", summary="Liveness check", description="Answers while the process serves HTTP.")
def healthz() -> Health:
    return Health()


@router.get(
    "/readyz",
    summary="Readiness check",
    description="200 when an export would be acknowledged now (storage reachable with migrations "
    "applied, or spool writable), 503 otherwise; the body says which.",
    response_model=Readiness,
    responses={503: {"model": Readiness, "description": "Neither storage nor spool can take spans."}},
)
async def readyz(request: Request, store: StoreDep) -> JSONResponse:
    pipeline: Pipeline = request.app.state.pipeline
    storage = await run_in_threadpool(_probe, store)
    status = pipeline.status()
    if not status.running:
        storage = "not running (starting or stopping)"
    storage_ready = storage == "ok" and store.migrated
    writes_to: Literal["storage", "spool", "nowhere"] = (
        "storage" if storage_ready else "spool" if status.running and status.spool_writable else "nowhere"
    )
    body = Readiness(
        status="ready" if writes_to != "nowhere" else "not ready",
        writes_to=writes_to,
        storage=storage,
        migrations="applied" if store.migrated else "pending",
        spool=status.spool,
        spool_pending_spans=status.spool_pending_spans,
        queue_depth=status.queue_depth,
        grpc=getattr(request.app.state, "grpc_status", "not started"),
    )
    return JSONResponse(body.model_dump(), status_code=200 if writes_to != "nowhere" else 503)


def _probe(store: Store) -> str:
    """``ok`` when ClickHouse answers (the writer applies pending migrations, not this probe)."""
    try:
        store.ping()
    except StorageError as exc:
        return str(exc)
    return "ok"
