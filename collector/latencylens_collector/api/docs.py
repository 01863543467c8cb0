"""``/docs``: Swagger UI for the API, its script and style served from the installed
``fastapi-offline`` package (Swagger UI 5, which reads the OpenAPI 3.1 FastAPI writes), so the page
works without internet access (FastAPI's default page loads them from a CDN and stays blank offline).

Only the files Swagger UI needs are served, from a fixed table: no path from the URL reaches the
filesystem.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Final

from fastapi import APIRouter, HTTPException
from fastapi.openapi.docs import get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse, Response

DOCS_PATH: Final = "/docs"
ASSETS_PATH: Final = f"{DOCS_PATH}/assets"
OPENAPI_PATH: Final = "/openapi.json"
_ASSETS: Final = {
    "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
    "swagger-ui.css": "text/css; charset=utf-8",
    "favicon.png": "image/png",
}
"""Files of the bundle the page loads, and their content types."""

router = APIRouter(include_in_schema=False)


@cache
def _bundle_dir() -> Path:
    import fastapi_offline

    return Path(fastapi_offline.__file__).with_name("static")


@router.get(DOCS_PATH)
def swagger_ui() -> HTMLResponse:
    return get_swagger_ui_html(
        openapi_url=OPENAPI_PATH,
        title="LatencyLens API",
        swagger_js_url=f"{ASSETS_PATH}/swagger-ui-bundle.js",
        swagger_css_url=f"{ASSETS_PATH}/swagger-ui.css",
        swagger_favicon_url=f"{ASSETS_PATH}/favicon.png",
        oauth2_redirect_url=f"{DOCS_PATH}/oauth2-redirect",
    )


@router.get(f"{DOCS_PATH}/oauth2-redirect")
def swagger_ui_redirect() -> HTMLResponse:
    return get_swagger_ui_oauth2_redirect_html()


@router.get(f"{ASSETS_PATH}/{{name}}")
def swagger_asset(name: str) -> Response:
    media_type = _ASSETS.get(name)
    if media_type is None:
        raise HTTPException(status_code=404, detail="no such documentation file")
    return Response(
        (_bundle_dir() / name).read_bytes(),
        media_type=media_type,
        headers={"Cache-Control": "public, max-age=86400", "X-Content-Type-Options": "nosniff"},
    )
