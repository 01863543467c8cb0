"""Serves the UI: one HTML shell for every page path, the static files, and what the API offers.

Pages are rendered in the browser from the JSON API, so the server side is a file server with a
fixed list of files (no path from the URL ever reaches the filesystem).
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any, Final

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import RedirectResponse, Response

from latencylens_collector.analysis.vocabulary import as_json

STATIC_DIR: Final = Path(__file__).with_name("static")
_CONTENT_TYPES: Final = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
# Everything comes from this service: no CDN, no inline script, no third-party connection.
_SECURITY_HEADERS: Final = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; style-src 'self'; "
    "script-src 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-cache",
}
OPTIONAL_ENDPOINTS: Final = {"stats": "/api/stats", "slos": "/api/slos", "alerts": "/api/alerts"}
"""API paths some pages need that a collector may not serve; the UI asks before calling them."""

router = APIRouter(include_in_schema=False)


@cache
def _static_files() -> dict[str, Path]:
    """Relative path -> file, for every servable file under ``static/`` (read once)."""
    return {
        path.relative_to(STATIC_DIR).as_posix(): path
        for path in STATIC_DIR.rglob("*")
        if path.is_file() and path.suffix in _CONTENT_TYPES
    }


def _file_response(relative: str) -> Response:
    path = _static_files().get(relative)
    if path is None:
        raise HTTPException(status_code=404, detail="no such UI file")
    return Response(path.read_bytes(), media_type=_CONTENT_TYPES[path.suffix], headers=_SECURITY_HEADERS)


@router.get("/")
def root() -> RedirectResponse:
    return RedirectResponse("/ui/", status_code=307)


@router.get("/ui")
def ui_no_slash() -> RedirectResponse:
    return RedirectResponse("/ui/", status_code=307)


@router.get("/ui/")
@router.get("/ui/requests")
@router.get("/ui/requests/{trace_id}")
@router.get("/ui/overview")
@router.get("/ui/slos")
@router.get("/ui/advice")
def page() -> Response:
    """The shell; the script picks the page from the path."""
    return _file_response("index.html")


@router.get("/ui/static/{relative:path}")
def static_file(relative: str) -> Response:
    return _file_response(relative)


@router.get("/ui/vocabulary.js")
def vocabulary() -> Response:
    """The parts' keys, labels and meanings as an ES module: the pages name things as the API, the
    CLI, the dashboards and docs/glossary.md do (analysis/vocabulary.py defines them once)."""
    body = f"export const VOCABULARY = {json.dumps(as_json(), ensure_ascii=False)};\n"
    return Response(body, media_type=_CONTENT_TYPES[".js"], headers=_SECURITY_HEADERS)


@router.get("/ui/api/capabilities")
def capabilities(request: Request) -> dict[str, Any]:
    """Which optional endpoints this service has, and which filters the request list accepts, so
    pages offer only what works and say "not available" instead of calling into a 404."""
    # The OpenAPI document (built once, then cached by FastAPI) lists every route and parameter.
    paths: dict[str, Any] = request.app.openapi().get("paths", {})
    answer: dict[str, Any] = {name: "get" in paths.get(path, {}) for name, path in OPTIONAL_ENDPOINTS.items()}
    listing = paths.get("/api/requests", {}).get("get", {})
    answer["request_params"] = sorted(
        param["name"] for param in listing.get("parameters", []) if param.get("in") == "query"
    )
    return answer
