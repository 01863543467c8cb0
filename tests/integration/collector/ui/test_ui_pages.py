"""The built-in UI in real headless Chromium against a real collector with seeded requests.

Chromium is Debian's package, driven by Playwright with ``executable_path`` (no browser download).
Every test fails on any console error or failed page script; screenshots go to test-artifacts/ui/.
"""

from __future__ import annotations

import contextlib
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from ui_seed import KNOWN_SPANS, TGI_TRACE, Seeded, seed, tgi_request

from latencylens_collector.pipeline.ingest import Ingestor

sync_api = pytest.importorskip("playwright.sync_api", reason="playwright missing (the test extra has it)")

REPO = Path(__file__).resolve().parents[4]
ARTIFACTS = REPO / "test-artifacts" / "ui"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TIMEOUT_MS = 20_000
# The palette in app.css, as the browser reports computed colours.
RGB = {
    "retrieval": "rgb(47, 111, 176)",
    "tool": "rgb(108, 180, 228)",
    "app_other": "rgb(138, 143, 152)",
    "network": "rgb(230, 159, 0)",
    "queue": "rgb(209, 73, 91)",
    "prefill": "rgb(155, 95, 192)",
    "decode": "rgb(42, 157, 111)",
    "inference": "rgb(19, 138, 138)",
    "server_other": "rgb(176, 122, 161)",
}
# Snippets evaluated in the page (as functions: the UI's CSP forbids eval).
TEXTS = "els => els.map(e => e.textContent)"
COLOURS = "els => els.map(e => [e.dataset.component, getComputedStyle(e).backgroundColor])"
BAR_COLOURS = """els => els.map(e => [e.dataset.component,
    [...e.children].map(c => [c.dataset.component || null, getComputedStyle(c).backgroundColor])])"""
KEY = """els => els.map(e => [e.dataset.component, e.textContent,
    getComputedStyle(e.firstChild).backgroundColor])"""
FACTS = """els => els.map(e => [e.dataset.fact,
    e.querySelector('.value').textContent + ' | ' + (e.querySelector('.prov')?.textContent || '')])"""
BREAKDOWN = (
    "els => els.map(e => [e.dataset.component, e.children[1].textContent + ' ' + e.children[4].textContent])"
)


def _chromium() -> str:
    path = CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium")
    if not path:
        pytest.skip("chromium not found (apt-get install chromium; `make test` installs it)")
    return path


class Browser:
    """One Chromium profile; collects console errors and page errors of every page it opens."""

    def __init__(self, context: Any, base_url: str) -> None:
        self.context = context
        self.base_url = base_url
        self.errors: list[str] = []

    def open(self, path: str) -> Any:
        page = self.context.new_page()
        page.set_default_timeout(TIMEOUT_MS)
        page.on("console", lambda msg: msg.type == "error" and self.errors.append(f"{path}: {msg.text}"))
        page.on("pageerror", lambda exc: self.errors.append(f"{path}: {exc}"))
        page.goto(self.base_url + path)
        ready(page)
        return page


def ready(page: Any) -> None:
    page.wait_for_selector("body[data-ready=true] main#app[data-state=ready]")


def shot(page: Any, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


@pytest.fixture
def seeded_collector(start_collector: Callable[..., Any], tmp_path: Path) -> tuple[Any, Seeded]:
    collector = start_collector(metadata_url=f"sqlite:///{tmp_path / 'metadata.db'}", slo_eval_interval_s=1)
    return collector, seed(collector.store, time.time_ns())


@contextlib.contextmanager
def chromium_at(base_url: str, profile: Path) -> Iterator[Browser]:
    """A fresh Chromium profile on ``base_url``; fails the test on unexpected console errors."""
    executable = _chromium()
    with sync_api.sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(profile),
            executable_path=executable,
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1366, "height": 800},
            timezone_id="UTC",
            locale="en-US",
        )
        the_browser = Browser(context, base_url)
        try:
            yield the_browser
        finally:
            context.close()
    assert the_browser.errors == [], the_browser.errors


@pytest.fixture
def browser(seeded_collector: tuple[Any, Seeded], tmp_path: Path) -> Iterator[Browser]:
    with chromium_at(seeded_collector[0].url, tmp_path / "profile") as the_browser:
        yield the_browser


def row_trace_ids(page: Any) -> list[str]:
    return page.eval_on_selector_all("#requests tbody tr", "rows => rows.map(r => r.dataset.traceId)")


def test_ui_root_redirects_and_serves_only_known_files(seeded_collector: tuple[Any, Seeded]) -> None:
    collector, _ = seeded_collector
    root = httpx.get(collector.url + "/", follow_redirects=False)
    assert root.status_code == 307 and root.headers["location"] == "/ui/"
    shell = httpx.get(collector.url + "/ui/requests/" + "a" * 32)
    assert shell.status_code == 200 and '<main id="app"' in shell.text
    assert "default-src 'self'" in shell.headers["content-security-policy"]
    assert (
        httpx.get(collector.url + "/ui/static/app.js").headers["content-type"].startswith("text/javascript")
    )
    assert httpx.get(collector.url + "/ui/static/../routes.py").status_code == 404
    assert httpx.get(collector.url + "/ui/static/routes.py").status_code == 404
    # Nothing in the UI loads from another origin.
    static = REPO / "collector" / "latencylens_collector" / "ui" / "static"
    for path in static.rglob("*"):
        if path.is_file():
            assert "http://" not in path.read_text().replace("http://www.w3.org/2000/svg", ""), path
            assert "https://" not in path.read_text(), path


def test_ui_slow_requests_page_lists_rows_with_component_bars(
    browser: Browser, seeded_collector: tuple[Any, Seeded]
) -> None:
    _, seeded = seeded_collector
    page = browser.open("/ui/")
    ids = row_trace_ids(page)
    assert len(ids) == seeded.count
    e2e = page.eval_on_selector_all("#requests tbody tr td:nth-child(5)", TEXTS)
    assert ids[0] == seeded.known_trace and e2e[0] == "600 ms"  # slowest first: the known one, 600 ms
    known = page.locator(f"#requests tr[data-trace-id='{seeded.known_trace}']")
    segments = known.locator(".seg").evaluate_all(COLOURS)
    # Critical-path order: retrieval, tool, app, network, queue, prefill, decode (model_unattributed is 0).
    assert [name for name, _ in segments] == [
        "retrieval",
        "tool",
        "app_other",
        "network",
        "queue",
        "prefill",
        "decode",
    ]
    assert all(colour == RGB[name] for name, colour in segments)
    # The widest segment is labelled on the bar itself: decode 300 ms is half of 600 ms.
    assert known.locator(".seg[data-component=decode]").text_content() == "decode 300 ms"
    shot(page, "slow-requests")


def test_ui_filters_change_the_list(browser: Browser, seeded_collector: tuple[Any, Seeded]) -> None:
    _, seeded = seeded_collector
    page = browser.open("/ui/requests")
    page.fill("input[name=model]", "gpt-4o-mini")
    page.click("form.filters button[type=submit]")
    sync_api.expect(page.locator("#requests tbody tr")).to_have_count(seeded.by_model["gpt-4o-mini"])
    ready(page)
    models = page.eval_on_selector_all("#requests tbody tr td:nth-child(4)", TEXTS)
    assert models and all(m.startswith("gpt-4o-mini") for m in models)
    assert "model=gpt-4o-mini" in page.url  # the filter is in the URL, so the view can be shared

    page.fill("input[name=model]", "")
    page.fill("input[name=min_ms]", "500")
    page.click("form.filters button[type=submit]")
    sync_api.expect(page.locator("#requests tbody tr")).to_have_count(seeded.slower_than_500ms)
    ready(page)
    assert seeded.known_trace in row_trace_ids(page)
    shot(page, "slow-requests-filtered")

    page.fill("input[name=min_ms]", "100000")
    page.click("form.filters button[type=submit]")
    page.wait_for_selector("#status.notice")
    assert page.locator("#requests").count() == 0


def test_ui_sorting_reorders_rows(browser: Browser) -> None:
    page = browser.open("/ui/requests")
    page.click("button.sort[data-sort=start]")
    starts = page.eval_on_selector_all("#requests tbody tr", "rows => rows.map(r => r.rowIndex)")
    assert starts == sorted(starts)
    header = page.locator("th:has(button.sort[data-sort=start])")
    assert header.get_attribute("aria-sort") == "descending"
    first = page.eval_on_selector("#requests tbody tr td:nth-child(1)", "c => c.textContent")
    page.click("button.sort[data-sort=start]")
    assert header.get_attribute("aria-sort") == "ascending"
    assert page.eval_on_selector("#requests tbody tr td:nth-child(1)", "c => c.textContent") != first


def test_ui_request_page_waterfall_order_colours_and_numbers(
    browser: Browser, seeded_collector: tuple[Any, Seeded]
) -> None:
    _, seeded = seeded_collector
    page = browser.open("/ui/requests")
    page.click(f"#requests tr[data-trace-id='{seeded.known_trace}'] a")
    page.wait_for_url(f"**/ui/requests/{seeded.known_trace}")
    ready(page)
    rows = page.locator("#waterfall .wf-row[data-span-id]")
    assert (
        rows.locator(".wf-name").evaluate_all("els => els.map(e => e.firstChild.textContent)") == KNOWN_SPANS
    )
    bars = rows.locator(".wf-bar").evaluate_all(BAR_COLOURS)
    assert [component for component, _ in bars] == ["app_other", "retrieval", "tool", "model"]
    assert bars[0][1][0][1] == RGB["app_other"]
    assert bars[1][1][0][1] == RGB["retrieval"]
    assert bars[2][1][0][1] == RGB["tool"]
    # The one model call is split in proportion and in time order: network 40 ms drawn around the
    # server's part (80 ms first token − queue 40 − prefill 20 = 20 ms before, the other 20 after),
    # queue 40, prefill 20, decode 300 ms.
    parts = ("network", "queue", "prefill", "decode", "network")
    assert bars[3][1] == [[name, RGB[name]] for name in parts]
    widths = (
        rows.nth(3).locator(".wf-bar > span").evaluate_all("els => els.map(e => parseFloat(e.style.width))")
    )
    assert widths == pytest.approx([20 / 400 * 100, 10, 5, 75, 20 / 400 * 100], abs=0.01)
    # Bars sit on the time axis: retrieval starts at 10/600 of the track, the model call at 160/600.
    lefts = rows.locator(".wf-bar").evaluate_all("els => els.map(e => parseFloat(e.style.left))")
    assert lefts == pytest.approx([0, 10 / 600 * 100, 120 / 600 * 100, 160 / 600 * 100], abs=0.01)
    sentence = page.locator("#explanation").text_content()
    assert "decode" in sentence.lower() and sentence.strip()
    facts = dict(page.locator("#facts .fact").evaluate_all(FACTS))
    assert facts["e2e"] == "600 ms | measured"
    assert facts["ttft"] == "80.0 ms | measured"  # first content 80 ms after the call started
    assert facts["output_tokens"] == "600 | reported"
    # 600 tokens over the 300 ms of reported decode = 2,000 tokens/s.
    assert facts["tps"] == "2,000 tok/s | derived"
    breakdown = dict(page.locator("#breakdown tbody tr").evaluate_all(BREAKDOWN))
    assert breakdown["decode"] == "300 ms reported"
    assert breakdown["network"] == "40.0 ms derived"
    assert breakdown["app_other"] == "70.0 ms measured"
    page.click("#waterfall .wf-row[data-kind=model]")
    assert (
        page.locator("#waterfall .wf-attrs:not([hidden])").text_content().count("gen_ai.request.model") == 1
    )
    shot(page, "request-waterfall")


def test_ui_request_page_shows_unsplit_inference_with_its_colour_and_legend(
    browser: Browser, seeded_collector: tuple[Any, Seeded]
) -> None:
    collector, _ = seeded_collector
    assert Ingestor(collector.store).ingest(tgi_request(time.time_ns() - 5 * 60 * 1_000_000_000)) == 1
    page = browser.open(f"/ui/requests/{TGI_TRACE}")
    bars = page.locator("#waterfall .wf-row[data-span-id] .wf-bar").evaluate_all(BAR_COLOURS)
    assert [component for component, _ in bars] == ["app_other", "model"]
    # The call's 1300 ms: network 66, queue 15, inference 1217, server other 2 (ui_seed.tgi_request).
    parts = ("network", "queue", "inference", "server_other")
    assert bars[1][1] == [[name, RGB[name]] for name in parts]
    key = page.locator("#waterfall-key > span").evaluate_all(KEY)
    assert [name for name, _, _ in key] == list(parts)
    legend = {name: (text, colour) for name, text, colour in key}
    assert legend["inference"] == (
        "inference — prefill + decode, not split by the provider",
        RGB["inference"],
    )
    assert legend["server_other"] == (
        "server, other — provider server time outside queue and inference (validation, tokenization)",
        RGB["server_other"],
    )
    breakdown = dict(page.locator("#breakdown tbody tr").evaluate_all(BREAKDOWN))
    assert breakdown["inference"] == "1.22 s reported"
    assert breakdown["server_other"] == "2.0 ms derived"
    assert breakdown["network"] == "66.0 ms derived"
    assert "prefill" not in breakdown and "decode" not in breakdown
    assert page.locator("#explanation").text_content() == (
        "Prefill + decode (not split by the provider) on llama-3.1-8b (tgi) took 1.22 s of the request's "
        "1.40 s (87%); tgi reported queue 15 ms and inference (prefill + decode, not split) 1.22 s; "
        "2.0 ms of server time outside them."
    )
    shot(page, "request-unsplit-inference")


def test_ui_unknown_request_says_so(browser: Browser) -> None:
    page = browser.open("/ui/requests/" + "0" * 32)
    assert "No request with trace id" in page.locator("main").text_content()
    # Chromium logs the API's 404 itself; that one is the expected answer, nothing else may appear.
    not_found = "Failed to load resource: the server responded with a status of 404 (Not Found)"
    assert browser.errors == [f"/ui/requests/{'0' * 32}: {not_found}"]
    browser.errors.clear()


def test_ui_overview_draws_percentiles_and_breakdown_by_model(
    browser: Browser, seeded_collector: tuple[Any, Seeded]
) -> None:
    _, seeded = seeded_collector
    page = browser.open("/ui/overview?window=6h")
    assert page.locator("#unavailable").count() == 0, "the service has /api/stats"
    # The four line charts (the parts-over-time chart below them is drawn later, on its own data).
    charts = page.locator("#charts svg.chart")
    assert charts.count() == 4
    # TTFT and end-to-end charts each draw p50, p95 and p99 over the 5-minute buckets of two hours.
    for index in (0, 1):
        assert charts.nth(index).locator("path.series").count() == 3
        labels = charts.nth(index).locator("text.series-label").all_text_contents()
        assert sorted(label.split()[0] for label in labels) == ["p50", "p95", "p99"]
    groups = dict(
        page.locator("#by-model tbody tr").evaluate_all(
            "rows => rows.map(r => [r.dataset.group, r.children[1].textContent])"
        )
    )
    assert groups == {
        "llama-3.3-70b · groq": str(seeded.by_model["llama-3.3-70b"]),
        "gpt-4o-mini · openai": str(seeded.by_model["gpt-4o-mini"]),
    }
    segments = page.locator("#by-model tbody tr").first.locator(".seg").evaluate_all(COLOURS)
    assert segments and all(colour == RGB[name] for name, colour in segments if name in RGB)
    shot(page, "overview")


def test_ui_slo_page_shows_status_budget_and_alert_history(
    browser: Browser, seeded_collector: tuple[Any, Seeded]
) -> None:
    collector, _ = seeded_collector
    for body in (
        {
            "name": "chat TTFT p95",
            "metric": "ttft",
            "filter": {"route": "POST /chat"},
            "objective": {
                "type": "percentile",
                "quantile": 0.95,
                "threshold_ns": 800_000_000,
                "window": "3h",
            },
            "min_requests": 1,
        },
        {
            # Every seeded request takes longer than 50 ms, so this one has no budget left.
            "name": "E2E under 50 ms",
            "metric": "e2e",
            "objective": {"type": "ratio", "target": 0.99, "threshold_ns": 50_000_000, "period": "30d"},
            "min_requests": 1,
        },
    ):
        response = httpx.post(collector.url + "/api/slos", json=body, timeout=30)
        assert response.status_code in (200, 201), response.text
    # The service evaluates every second (slo_eval_interval_s=1): wait for both evaluations.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        slos = httpx.get(collector.url + "/api/slos", timeout=10).json()["slos"]
        if all(slo["evaluated_at"] for slo in slos):
            break
        time.sleep(0.2)
    else:
        raise AssertionError(f"SLOs never evaluated: {slos}")
    page = browser.open("/ui/slos")
    assert page.locator("#unavailable").count() == 0, "the service has /api/slos"
    rows = page.locator("#slos tbody tr")
    sync_api.expect(rows).to_have_count(2)
    text = page.locator("#slos").text_content()
    assert "p95 ≤ 800 ms over 3h" in text
    assert "99.0% of requests ≤ 50.0 ms over 30d" in text
    by_name = {slo["name"]: slo for slo in slos}
    budget_row = page.locator("#slos tbody tr", has_text="E2E under 50 ms")
    assert budget_row.locator(".badge").text_content() == by_name["E2E under 50 ms"]["status"]
    assert budget_row.locator(".budget > span.out").count() == 1  # no budget left: drawn as spent
    assert budget_row.locator(".budget").text_content() == "budget spent"
    alerts = httpx.get(collector.url + "/api/alerts", timeout=10).json()["alerts"]
    alert_rows = page.locator("#alerts tbody tr")
    sync_api.expect(alert_rows).to_have_count(len(alerts))
    if alerts:  # the breached SLO fires once its alert is evaluated
        first = alert_rows.first
        assert first.locator(".badge").text_content() == alerts[0]["state"]
        links = first.locator("a").evaluate_all("els => els.map(e => e.getAttribute('href'))")
        assert links == [f"/ui/requests/{trace}" for trace in alerts[0]["worst_trace_ids"][:3]]
    assert "Alert history" in page.locator("main").text_content()
    shot(page, "slos")


def test_ui_asks_for_an_api_key_when_the_service_requires_one(
    start_collector: Callable[..., Any], tmp_path: Path
) -> None:
    from latencylens_collector.auth import KeyStore

    metadata_url = f"sqlite:///{tmp_path / 'metadata.db'}"
    _, raw_key = KeyStore(metadata_url).create("default")
    collector = start_collector(metadata_url=metadata_url)
    seeded = seed(collector.store, time.time_ns())
    with chromium_at(collector.url, tmp_path / "profile") as browser:
        page = browser.open("/ui/requests")
        assert page.locator("#key-form").count() == 1
        assert page.locator("#requests").count() == 0
        unauthorized = "Failed to load resource: the server responded with a status of 401 (Unauthorized)"
        assert browser.errors == [f"/ui/requests: {unauthorized}"]  # Chromium logs the API's answer
        browser.errors.clear()
        page.fill("#key-form input[name=key]", raw_key)
        page.click("#key-form button[type=submit]")
        page.wait_for_load_state()
        ready(page)
        sync_api.expect(page.locator("#requests tbody tr")).to_have_count(seeded.count)
        assert page.locator("#key-form").count() == 0
