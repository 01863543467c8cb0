"""Liveness (``/healthz``) and readiness (``/readyz``).

Ready means an export would be acknowledged now: ClickHouse takes writes with migrations applied,
or, failing that, the spool can take the batch (it has room and is writable). The body says which,
in a few fixed words: ClickHouse's text and addresses go to the log, never into the answer.
"""

from __future__ import annotations

import logging
from typing import Literal

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from latencylens_collector.api.deps import StoreDep
from latencylens_collector.pipeline import Pipeline
from latencylens_collector.pipeline.refusals import UNREACHABLE
from latencylens_collector.queries.responses import Health
from latencylens_collector.storage.store import StorageError, StorageUnavailable, Store

_log = logging.getLogger(__name__)
router = APIRouter(tags=["health"])


class Readiness(BaseModel):
    status: Literal["ready", "not ready"]
    writes_to: Literal["storage", "spool", "nowhere"] = Field(
        description="Where an export accepted now goes: ClickHouse, the disk spool, or nowhere (503)."
    )
    storage: str = Field(
        description="`ok`, `unreachable`, `refusing writes: <ClickHouse error name>` (e.g. "
        "`TOO_MANY_PARTS`, `READONLY`), `error` or `not running (starting or stopping)`."
    )
    migrations: Literal["applied", "pending"]
    spool: str = Field(
        description="`writable`, `disabled`, `full` (its byte budget or the disk), `not writable`, "
        "`not open` or `in use by another process`."
    )
    spool_pending_spans: int = Field(description="Spans in the spool waiting for ClickHouse.")
    spool_failed_spans: int = Field(
        0,
        description="Spans ClickHouse refused for good, kept in the spool's failed/ with their reasons "
        "(see `latencylens spool status`); replayed at start-up and by `latencylens spool replay`.",
    )
    spool_bytes: int = Field(0, description="Bytes the spool holds, pending and failed batches.")
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
    if storage == "ok" and status.storage_ok is False and status.storage_refusal not in ("", UNREACHABLE):
        storage = f"refusing writes: {status.storage_refusal}"  # reachable, but the last write bounced
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
        spool_failed_spans=status.spool_failed_spans,
        spool_bytes=status.spool_bytes,
        queue_depth=status.queue_depth,
        grpc=getattr(request.app.state, "grpc_status", "not started"),
    )
    return JSONResponse(body.model_dump(), status_code=200 if writes_to != "nowhere" else 503)


def _probe(store: Store) -> str:
    """``ok`` when ClickHouse answers (the writer applies pending migrations, not this probe)."""
    try:
        store.ping()
    except StorageUnavailable as exc:
        _log.warning("readiness: ClickHouse unreachable: %s", exc)
        return "unreachable"
    except StorageError as exc:
        _log.warning("readiness: ClickHouse probe failed: %s", exc)
        return "error"
    return "ok"
