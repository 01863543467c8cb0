"""OTLP/HTTP trace intake (``POST /v1/traces``), protobuf or JSON, optionally gzipped.

The answer comes once the spans are durable (in ClickHouse or fsync'ed in the spool); a full queue
is answered 429 with ``Retry-After``, as OTLP exporters expect.
"""

from __future__ import annotations

import asyncio
import logging
import zlib
from typing import Final

import anyio
from fastapi import APIRouter, Request, Response

from latencylens_collector.api.deps import ProjectDep, SettingsDep
from latencylens_collector.intake import otlp
from latencylens_collector.intake.received import count_received
from latencylens_collector.pipeline import (
    QUEUE_FULL_RETRY_S,
    Pipeline,
    PipelineClosed,
    QueueFull,
    WriteFailed,
)
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
_INVALID_ARGUMENT, _RESOURCE_EXHAUSTED, _INTERNAL, _UNAVAILABLE = 3, 8, 13, 14
PROTOCOL: Final = "http"
DECODE_THREADS: Final = 2
"""Exports decoded at once. Decoding is Python holding the GIL, so more threads add no speed;
they only take the GIL from the single writer thread, which is what bounds ingest throughput."""


def _limiter(request: Request) -> anyio.CapacityLimiter:
    """The app's decode limiter, made on first use inside its event loop (as anyio requires)."""
    state = request.app.state
    limiter: anyio.CapacityLimiter | None = getattr(state, "decode_limiter", None)
    if limiter is None:
        limiter = state.decode_limiter = anyio.CapacityLimiter(DECODE_THREADS)
    return limiter


class _Rejected(Exception):
    def __init__(self, http_status: int, code: int, message: str, reason: str) -> None:
        super().__init__(message)
        self.http_status, self.code, self.message, self.reason = http_status, code, message, reason


@router.post(
    "/v1/traces",
    summary="Export traces (OTLP/HTTP)",
    description="Accepts an ExportTraceServiceRequest as `application/x-protobuf` or `application/json` "
    "(optionally `Content-Encoding: gzip`) and answers with an ExportTraceServiceResponse in the same "
    "encoding once the spans are stored (or spooled to disk); invalid spans are dropped and "
    "reported in `partial_success`, repaired ones (invalid UTF-8, oversized values) are kept and "
    "reported there with `rejected_spans` 0.",
    response_class=Response,
    responses={
        400: {"description": "Body could not be decoded."},
        413: {"description": "Body larger than the configured limit."},
        415: {"description": "Unsupported Content-Type or Content-Encoding."},
        429: {"description": "Ingest queue full; retry after Retry-After seconds."},
        503: {"description": "Storage and spool unavailable; retry after Retry-After seconds."},
    },
)
async def export_traces(request: Request, settings: SettingsDep, project: ProjectDep) -> Response:
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    as_json = _CONTENT_TYPES.get(content_type)
    if as_json is None:
        shown = content_type or "none"
        metrics.EXPORTS_REFUSED.labels(protocol=PROTOCOL, reason="unsupported_media_type").inc()
        return _error(415, _INVALID_ARGUMENT, f"unsupported Content-Type {shown}; use {ACCEPTED_TYPES}", True)
    pipeline: Pipeline = request.app.state.pipeline
    clock: Clock = request.app.state.clock
    limits = otlp.Limits.of(settings, now_ns=clock())
    try:
        body = await _read_body(request, settings.max_body_bytes)
        with pipeline.decoding():  # until the spans are queued: the writer flushes once none is open
            batch = await anyio.to_thread.run_sync(
                otlp.decode, body, as_json, project, limits, limiter=_limiter(request)
            )
            count_received(batch, PROTOCOL)
            written = pipeline.submit(batch.spans) if batch.spans else None
        if written is not None:
            await asyncio.wrap_future(written)
    except _Rejected as exc:
        return _refuse(exc.reason, exc.http_status, exc.code, exc.message, as_json)
    except otlp.OtlpDecodeError as exc:
        return _refuse("bad_request", 400, _INVALID_ARGUMENT, str(exc), as_json)
    except QueueFull as exc:
        return _refuse("queue_full", 429, _RESOURCE_EXHAUSTED, str(exc), as_json, QUEUE_FULL_RETRY_S)
    except (PipelineClosed, WriteFailed) as exc:
        _log.warning("could not accept spans: %s", exc)
        return _refuse("unavailable", 503, _UNAVAILABLE, str(exc), as_json, RETRY_AFTER_SECONDS)
    except Exception:
        _log.exception("unexpected error while ingesting spans")
        return _error(500, _INTERNAL, "internal error while ingesting spans", as_json)
    return Response(otlp.encode_response(batch, as_json), media_type=_media_type(as_json))


async def _read_body(request: Request, limit: int) -> bytes:
    """The decompressed body, refusing anything over ``limit`` bytes before or after gunzip."""
    encoding = request.headers.get("content-encoding", "identity").strip().lower()
    if encoding not in ("identity", "gzip", ""):
        raise _Rejected(
            415,
            _INVALID_ARGUMENT,
            f"unsupported Content-Encoding {encoding}; use gzip or none",
            "unsupported_media_type",
        )
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise _Rejected(413, _RESOURCE_EXHAUSTED, _too_large(limit), "too_large")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _Rejected(413, _RESOURCE_EXHAUSTED, _too_large(limit), "too_large")
        chunks.append(chunk)
    body = b"".join(chunks)
    if encoding != "gzip":
        return body
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        data = inflater.decompress(body, limit + 1)
    except zlib.error as exc:
        raise _Rejected(400, _INVALID_ARGUMENT, f"body is not valid gzip: {exc}", "bad_request") from exc
    if len(data) > limit or inflater.unconsumed_tail:
        raise _Rejected(413, _RESOURCE_EXHAUSTED, _too_large(limit) + " after decompression", "too_large")
    return data


def _too_large(limit: int) -> str:
    return f"body larger than {limit} bytes"


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
