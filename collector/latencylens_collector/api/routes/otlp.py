"""OTLP/HTTP trace intake (``POST /v1/traces``), protobuf or JSON, optionally gzipped."""

from __future__ import annotations

import logging
import zlib
from typing import Final

from fastapi import APIRouter, Request, Response
from fastapi.concurrency import run_in_threadpool

from latencylens_collector import otlp
from latencylens_collector.api.deps import RETRY_AFTER_SECONDS, IngestorDep, ProjectDep, SettingsDep
from latencylens_collector.storage import StorageError

_log = logging.getLogger(__name__)
router = APIRouter(tags=["otlp"])

PROTOBUF: Final = "application/x-protobuf"
JSON: Final = "application/json"
_CONTENT_TYPES: Final = {PROTOBUF: False, "application/protobuf": False, JSON: True}
ACCEPTED_TYPES: Final = ", ".join(_CONTENT_TYPES)

# google.rpc.Code values for the error body.
_INVALID_ARGUMENT, _RESOURCE_EXHAUSTED, _INTERNAL, _UNAVAILABLE = 3, 8, 13, 14


class _Rejected(Exception):
    def __init__(self, http_status: int, code: int, message: str) -> None:
        super().__init__(message)
        self.http_status, self.code, self.message = http_status, code, message


@router.post(
    "/v1/traces",
    summary="Export traces (OTLP/HTTP)",
    description="Accepts an ExportTraceServiceRequest as `application/x-protobuf` or `application/json` "
    "(optionally `Content-Encoding: gzip`) and answers with an ExportTraceServiceResponse in the same "
    "encoding; invalid spans are dropped and reported in `partial_success`.",
    response_class=Response,
    responses={
        400: {"description": "Body could not be decoded."},
        413: {"description": "Body larger than the configured limit."},
        415: {"description": "Unsupported Content-Type or Content-Encoding."},
        503: {"description": "Storage unavailable; retry after Retry-After seconds."},
    },
)
async def export_traces(
    request: Request, settings: SettingsDep, ingestor: IngestorDep, project: ProjectDep
) -> Response:
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    as_json = _CONTENT_TYPES.get(content_type)
    if as_json is None:
        shown = content_type or "none"
        return _error(415, _INVALID_ARGUMENT, f"unsupported Content-Type {shown}; use {ACCEPTED_TYPES}", True)
    try:
        body = await _read_body(request, settings.max_body_bytes)
        export = otlp.parse_json(body) if as_json else otlp.parse_protobuf(body)
        batch = otlp.flatten(export, project=project)
        await run_in_threadpool(ingestor.ingest, batch.spans)
    except _Rejected as exc:
        return _error(exc.http_status, exc.code, exc.message, as_json)
    except otlp.OtlpDecodeError as exc:
        return _error(400, _INVALID_ARGUMENT, str(exc), as_json)
    except StorageError as exc:
        _log.warning("could not store spans: %s", exc)
        return _error(503, _UNAVAILABLE, f"storage unavailable: {exc}", as_json, retry=True)
    except Exception:
        _log.exception("unexpected error while ingesting spans")
        return _error(500, _INTERNAL, "internal error while ingesting spans", as_json)
    return Response(otlp.encode_response(batch, as_json), media_type=_media_type(as_json))


async def _read_body(request: Request, limit: int) -> bytes:
    """The decompressed body, refusing anything over ``limit`` bytes before or after gunzip."""
    encoding = request.headers.get("content-encoding", "identity").strip().lower()
    if encoding not in ("identity", "gzip", ""):
        raise _Rejected(415, _INVALID_ARGUMENT, f"unsupported Content-Encoding {encoding}; use gzip or none")
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise _Rejected(413, _RESOURCE_EXHAUSTED, _too_large(limit))
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _Rejected(413, _RESOURCE_EXHAUSTED, _too_large(limit))
        chunks.append(chunk)
    body = b"".join(chunks)
    if encoding != "gzip":
        return body
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        data = inflater.decompress(body, limit + 1)
    except zlib.error as exc:
        raise _Rejected(400, _INVALID_ARGUMENT, f"body is not valid gzip: {exc}") from exc
    if len(data) > limit or inflater.unconsumed_tail:
        raise _Rejected(413, _RESOURCE_EXHAUSTED, _too_large(limit) + " after decompression")
    return data


def _too_large(limit: int) -> str:
    return f"body larger than {limit} bytes"


def _media_type(as_json: bool) -> str:
    return JSON if as_json else PROTOBUF


def _error(http_status: int, code: int, message: str, as_json: bool, retry: bool = False) -> Response:
    headers = {"Retry-After": str(RETRY_AFTER_SECONDS)} if retry else None
    return Response(
        otlp.encode_status(code, message, as_json),
        status_code=http_status,
        media_type=_media_type(as_json),
        headers=headers,
    )
