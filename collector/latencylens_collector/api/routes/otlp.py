"""OTLP/HTTP trace intake (``POST /v1/traces``), protobuf or JSON, optionally gzip- or deflate-compressed.

The answer comes once the spans are durable (in ClickHouse or fsync'ed in the spool); a full queue
is answered 429 with ``Retry-After``, as OTLP exporters expect. The caller's key is checked and the
queue asked for room before the body is read, so a refused export costs no reading or decoding;
the body is inflated as it arrives and refused at ``max_body_bytes``; decoding and queueing run in
a worker thread (never on the event loop). Every error body is a ``google.rpc.Status`` in the
request's encoding (JSON when the Content-Type is not one of OTLP's).
"""

from __future__ import annotations

import asyncio
import logging
import time
from concurrent.futures import Future
from typing import Final

import anyio
from fastapi import APIRouter, Request, Response

from latencylens_collector.api.deps import SettingsDep, app_key_store
from latencylens_collector.auth import Unauthorized, resolve_project
from latencylens_collector.intake import engine, otlp
from latencylens_collector.intake.body import BodyReader, BodyTooLarge, MalformedBody, UnsupportedEncoding
from latencylens_collector.intake.errors import traces_only
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
from latencylens_collector.pipeline.turns import FairTurns
from latencylens_collector.runtime import metrics
from latencylens_collector.runtime.clock import Clock
from latencylens_collector.storage.store import RETRY_AFTER_SECONDS

_log = logging.getLogger(__name__)
router = APIRouter(tags=["otlp"])

PROTOBUF: Final = "application/x-protobuf"
JSON: Final = "application/json"
_CONTENT_TYPES: Final = {PROTOBUF: False, "application/protobuf": False, JSON: True}
ACCEPTED_TYPES: Final = ", ".join(_CONTENT_TYPES)

# google.rpc.Code values for the error body.
_INVALID_ARGUMENT, _NOT_FOUND, _RESOURCE_EXHAUSTED = 3, 5, 8
_INTERNAL, _UNAVAILABLE, _UNAUTHENTICATED = 13, 14, 16
PROTOCOL: Final = "http"
DECODE_THREADS: Final = 2
"""Exports decoded at once. Decoding is Python holding the GIL, so more threads add no speed;
they only take the GIL from the single writer thread, which is what bounds ingest throughput.
Waiting exports get the slots project by project in turn (:class:`FairTurns`)."""


def _turns(request: Request) -> FairTurns:
    """The app's decode slots, shared by projects in turn (:mod:`latencylens_collector.pipeline.turns`)."""
    state = request.app.state
    turns: FairTurns | None = getattr(state, "decode_turns", None)
    if turns is None:
        turns = state.decode_turns = FairTurns(DECODE_THREADS)
    return turns


class _Rejected(Exception):
    def __init__(self, http_status: int, code: int, message: str, reason: str) -> None:
        super().__init__(message)
        self.http_status, self.code, self.message, self.reason = http_status, code, message, reason


@router.post(
    "/v1/traces",
    summary="Export traces (OTLP/HTTP)",
    description="Accepts an ExportTraceServiceRequest as `application/x-protobuf` or `application/json` "
    "(optionally `Content-Encoding: gzip` or `deflate`) and answers with an ExportTraceServiceResponse "
    "in the same encoding once the spans are stored (or spooled to disk); invalid spans (wrong ids or "
    "times, malformed, fields of the wrong type) are dropped and reported in `partial_success`, "
    "repaired ones (invalid UTF-8, oversized or too deeply nested values, spans over the byte budget) "
    "are kept and reported there with `rejected_spans` 0. Limits: docs/collector.md#limits.",
    response_class=Response,
    responses={
        400: {"description": "Body could not be decoded (not OTLP, or compressed data cut short)."},
        401: {"description": "Missing or invalid API key (once keys exist)."},
        413: {"description": "Body larger than max_body_bytes, or decodes to more than max_batch_bytes."},
        415: {"description": "Unsupported Content-Type or Content-Encoding."},
        429: {"description": "Ingest queue (or the project's share of it) full; retry after Retry-After."},
        503: {"description": "Storage and spool unavailable; retry after Retry-After seconds."},
    },
)
async def export_traces(request: Request, settings: SettingsDep) -> Response:
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    as_json = _CONTENT_TYPES.get(content_type)
    try:
        project = _project(request)
    except Unauthorized as exc:
        response = _refuse("unauthenticated", 401, _UNAUTHENTICATED, str(exc), as_json is not False)
        response.headers["WWW-Authenticate"] = "Bearer"
        return response
    if as_json is None:
        shown = content_type or "none"
        metrics.EXPORTS_REFUSED.labels(protocol=PROTOCOL, reason="unsupported_media_type").inc()
        return _error(415, _INVALID_ARGUMENT, f"unsupported Content-Type {shown}; use {ACCEPTED_TYPES}", True)
    pipeline: Pipeline = request.app.state.pipeline
    clock: Clock = request.app.state.clock
    limits = otlp.Limits.of(settings, now_ns=clock())
    admitted = False
    try:
        pipeline.check_room(project)
        admitted = True
        body = await _read_body(request, settings.max_body_bytes)
        stored = None
        if not as_json and pipeline.engine_takes(len(body), project):
            stored = await _by_engine(pipeline, body, project, limits)
        if stored is not None:
            batch = stored
        else:
            with pipeline.decoding(project):  # until the spans are queued: the writer may linger for them
                async with _turns(request).slot(project):  # projects in turn, not first come
                    batch, written = await anyio.to_thread.run_sync(
                        _decode_and_submit, pipeline, body, as_json, project, limits
                    )
            if written is not None:
                await asyncio.wrap_future(written)
    except _Rejected as exc:
        return _refuse(exc.reason, exc.http_status, exc.code, exc.message, as_json)
    except otlp.OtlpDecodeError as exc:
        return _refuse("bad_request", 400, _INVALID_ARGUMENT, str(exc), as_json)
    except QueueFull as exc:
        return _refuse("queue_full", 429, _RESOURCE_EXHAUSTED, str(exc), as_json, QUEUE_FULL_RETRY_S)
    except ExportTooLarge as exc:
        return _refuse("too_large", 413, _RESOURCE_EXHAUSTED, str(exc), as_json)
    except (PipelineClosed, WriteFailed) as exc:
        _log.warning("could not accept spans: %s", exc)
        return _refuse("unavailable", 503, _UNAVAILABLE, str(exc), as_json, RETRY_AFTER_SECONDS)
    except Exception:
        _log.exception("unexpected error while ingesting spans")
        return _error(500, _INTERNAL, "internal error while ingesting spans", as_json)
    finally:
        if admitted:
            pipeline.done(project)
    return Response(otlp.encode_response(batch, as_json), media_type=_media_type(as_json))


@router.post("/v1/metrics", include_in_schema=False)
@router.post("/v1/logs", include_in_schema=False)
async def export_other_signal(request: Request) -> Response:
    """Metrics and logs: 404 with what to change (:func:`~.intake.errors.traces_only`) in the
    request's encoding, not a bare "Not Found". OTLP exporters do not retry a 404."""
    signal = request.url.path.rsplit("/", 1)[-1]
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    as_json = _CONTENT_TYPES.get(content_type) is not False
    return _refuse("not_traces", 404, _NOT_FOUND, traces_only(signal, "POST /v1/traces"), as_json)


def _project(request: Request) -> str:
    """The caller's project (raises Unauthorized); answered here rather than by a dependency so
    that a protobuf request's 401 is a protobuf Status too."""
    headers = request.headers
    keys = app_key_store(request.app)
    return resolve_project(headers.get("authorization"), keys, headers.get("x-api-key"))


def _decode_and_submit(
    pipeline: Pipeline, body: bytes, as_json: bool, project: str, limits: otlp.Limits
) -> tuple[otlp.DecodedBatch, Future[Outcome] | None]:
    started = time.thread_time()
    try:
        batch = otlp.decode(body, as_json, project, limits)
        count_received(batch, PROTOCOL)
        return batch, pipeline.submit(batch.spans) if batch.spans else None
    finally:
        pipeline.charge(project, time.thread_time() - started)


async def _by_engine(
    pipeline: Pipeline, body: bytes, project: str, limits: otlp.Limits
) -> otlp.DecodedBatch | None:
    """The answer when ClickHouse stored the whole body (:mod:`.intake.engine`), else None."""
    ticket = engine.submit(pipeline, body, project, limits)
    if ticket is None:
        return None
    await asyncio.wrap_future(ticket.future)
    return engine.answer(pipeline, ticket, PROTOCOL)


async def _read_body(request: Request, limit: int) -> bytes:
    """The (inflated) body, refused as soon as it is over ``limit`` bytes (:mod:`.intake.body`)."""
    try:
        reader = BodyReader(request.headers.get("content-encoding", ""), limit)
        reader.check_declared(request.headers.get("content-length"))
        async for chunk in request.stream():
            reader.feed(chunk)
        return reader.finish()
    except UnsupportedEncoding as exc:
        raise _Rejected(415, _INVALID_ARGUMENT, str(exc), "unsupported_media_type") from None
    except BodyTooLarge as exc:
        raise _Rejected(413, _RESOURCE_EXHAUSTED, str(exc), "too_large") from None
    except MalformedBody as exc:
        raise _Rejected(400, _INVALID_ARGUMENT, str(exc), "bad_request") from None


def _media_type(as_json: bool) -> str:
    return JSON if as_json else PROTOBUF


def _refuse(
    reason: str, http_status: int, code: int, message: str, as_json: bool, retry_after: int | None = None
) -> Response:
    metrics.EXPORTS_REFUSED.labels(protocol=PROTOCOL, reason=reason).inc()
    return _error(http_status, code, message, as_json, retry_after)


def _error(
    http_status: int, code: int, message: str, as_json: bool, retry_after: int | None = None
) -> Response:
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else None
    return Response(
        otlp.encode_status(code, message, as_json),
        status_code=http_status,
        media_type=_media_type(as_json),
        headers=headers,
    )
