"""``/docs`` in a real headless Chromium with every connection off this service refused: Swagger
UI comes from the installed package and lists the API's operations."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

sync_api = pytest.importorskip("playwright.sync_api", reason="playwright missing (the test extra has it)")

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
]


def _chromium() -> str:
    path = CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium")
    if not path:
        pytest.skip("chromium not found (apt-get install chromium; `make test` installs it)")
    return path


def test_docs_page_works_without_the_internet(collector: Any, tmp_path: Path) -> None:
    page_html = httpx.get(f"{collector.url}/docs").text
    assert "cdn." not in page_html  # FastAPI's default page loads Swagger UI from jsDelivr
    ours = urlsplit(collector.url).netloc
    refused: list[str] = []

    def only_this_service(route: Any) -> None:
        if urlsplit(route.request.url).netloc == ours:
            route.continue_()
        else:
            refused.append(route.request.url)
            route.abort("internetdisconnected")

    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=_chromium(), headless=True, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport={"width": 1366, "height": 800})
            context.route("**/*", only_this_service)
            page = context.new_page()
            page.set_default_timeout(30_000)
            page.goto(f"{collector.url}/docs")
            page.wait_for_selector(".opblock-summary-path")
            title = page.text_content(".information-container .title")
            paths = page.eval_on_selector_all(
                ".opblock-summary-path", "els => els.map(e => e.getAttribute('data-path'))"
            )
        finally:
            browser.close()
    assert title is not None and title.startswith("LatencyLens collector")
    assert {"/v1/traces", "/api/requests", "/api/requests/{trace_id}", "/api/stats"} <= set(paths)
    assert refused == []  # nothing asked for beyond this service


def test_only_the_bundles_files_are_served(collector: Any) -> None:
    assets = f"{collector.url}/docs/assets"
    script = httpx.get(f"{assets}/swagger-ui-bundle.js")
    assert script.status_code == 200 and "SwaggerUIBundle" in script.text
    assert httpx.get(f"{assets}/swagger-ui.css").headers["content-type"].startswith("text/css")
    for name in ("index.html", "..%2F__init__.py", "redoc.standalone.js"):
        assert httpx.get(f"{assets}/{name}").status_code == 404, name
