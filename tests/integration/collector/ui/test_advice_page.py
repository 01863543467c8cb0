"""The "What to change first" page in real headless Chromium (Debian's, driven by Playwright) against
a collector seeded with the advisor's known-truth workload, at desktop and phone widths.

Numbers are those worked out in tests/integration/collector/queries/test_advice_api.py; the page
must show what the API computed, and fail on any console error.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
from advice_service import SeededAdvice, seeded_collector
from queries_data import trace_id

sync_api = pytest.importorskip("playwright.sync_api", reason="playwright missing (the test extra has it)")

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]
TIMEOUT_MS = 20_000
VIEWPORTS = {"desktop": {"width": 1366, "height": 800}, "phone": {"width": 390, "height": 844}}
REPO = Path(__file__).resolve().parents[4]
ARTIFACTS = REPO / "test-artifacts" / "ui"


@pytest.fixture(scope="module")
def seeded(chdb_dsn: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeededAdvice]:
    with seeded_collector(chdb_dsn, Path(tmp_path_factory.mktemp("advice_ui")), "advice_ui") as running:
        yield running


@pytest.fixture(params=sorted(VIEWPORTS))
def page_at(request: pytest.FixtureRequest, seeded: SeededAdvice, tmp_path: Path) -> Iterator[Any]:
    """``page_at(path)`` opens a page at the parametrized width and waits until it is drawn."""
    executable = CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium")
    if not executable:
        pytest.skip("chromium not found (apt-get install chromium)")
    errors: list[str] = []
    with sync_api.sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path / "profile"),
            executable_path=executable,
            headless=True,
            args=ARGS,
            viewport=VIEWPORTS[request.param],
            timezone_id="UTC",
            locale="en-US",
        )

        def open_page(path: str) -> Any:
            page = context.new_page()
            page.set_default_timeout(TIMEOUT_MS)
            page.on("console", lambda msg: msg.type == "error" and errors.append(f"{path}: {msg.text}"))
            page.on("pageerror", lambda exc: errors.append(f"{path}: {exc}"))
            page.goto(seeded.url + path)
            ready(page)
            return page

        open_page.width = VIEWPORTS[request.param]["width"]  # type: ignore[attr-defined]
        open_page.name = request.param  # type: ignore[attr-defined]
        try:
            yield open_page
        finally:
            context.close()
    assert errors == []


def ready(page: Any) -> None:
    page.wait_for_selector("body[data-ready=true] main#app[data-state=ready]")


def group(page: Any, name: str) -> Any:
    return page.locator(f'section.advice-group[data-group="{name}"]')


def fits(page: Any, selector: str, width: int) -> list[str]:
    """Elements matching ``selector`` whose right edge passes the viewport (a phone must not scroll
    sideways to read them)."""
    return page.eval_on_selector_all(
        selector,
        f"els => els.filter(e => e.getBoundingClientRect().right > {width} + 1).map(e => e.outerHTML)",
    )


def test_page_ranks_each_groups_levers_with_the_computed_change(page_at) -> None:
    page = page_at("/ui/advice")
    story = group(page, "POST /story · m-writer")
    first = story.locator("ol.levers > li").first
    assert first.get_attribute("data-lever") == "shorten_outputs"
    # 10 105 ms → 2105 ms at p95 (outputs capped at the p50 length of 200 tokens)
    assert first.locator('tr[data-metric="e2e_p95"] td').all_text_contents() == [
        "End-to-end p95",
        "10.1 s",
        "2.10 s",  # 2.105 s, toFixed(2) of the float below it
        "−8.00 s",
    ]
    assert first.locator('tr[data-metric="ttft_p95"] .change').text_content() == "no change"
    assert "cap outputs at 200 tokens (p50; p95 is 1000)" in first.locator(".summary").text_content()
    assert first.locator('dd[data-evidence="output_tokens_p95"]').text_content() == "1,000"
    assert "medium confidence" in first.locator(".badge").text_content()
    # the other planted causes, one per route
    for name, lever, change in [
        ("POST /summarize · m-reader", "prefix_caching", "−150 ms"),
        ("POST /chat · m-busy", "queue_alternative", "−2.00 s"),
        ("POST /lookup · m-quick", "network_reuse", "−340 ms"),
        ("POST /answer · gpt-4o", "switch_model", "−2.38 s"),
        ("POST /agent · m-agent", "parallel_calls", "−100 ms"),
    ]:
        top = group(page, name).locator("ol.levers > li").first
        assert top.get_attribute("data-lever") == lever
        assert top.locator('tr[data-metric="e2e_p95"] .change').text_content() == change
    # /lookup's network per endpoint: its rows have no spans, so no server.address was recorded
    lookup = group(page, "POST /lookup · m-quick").locator("ol.levers > li").first
    assert lookup.locator("table.endpoints tbody td").all_text_contents() == [
        "not recorded",
        "30",
        "60.0 ms",
        "400 ms",
    ]
    assert group(page, "POST /answer · gpt-4o-mini").locator(".no-lever").count() == 1
    # costs as tests/integration/collector/queries/test_advice_api.py works them out
    assert (
        group(page, "POST /answer · gpt-4o").locator(".cost").text_content() == "Cost per request: $0.00225"
    )
    assert story.locator(".cost").text_content() == "Cost per request: no price"
    switch = group(page, "POST /answer · gpt-4o").locator("ol.levers > li").first
    assert (
        switch.locator('dd[data-evidence="alternative_cost_per_request_usd"]').text_content() == "$0.0001344"
    )
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"advice-{page_at.name}.png"), full_page=True)
    assert fits(page, "section.advice-group, section.advice-group *:not(table *)", page_at.width) == []


def test_all_says_why_the_other_levers_do_not_apply(page_at) -> None:
    page = page_at("/ui/advice?all=true&route=POST%20/story")
    assert page.locator("section.advice-group").count() == 1
    reasons = group(page, "POST /story · m-writer").locator(".not-applicable li")
    texts = {item.get_attribute("data-lever"): item.text_content() for item in reasons.all()}
    assert texts["prefix_caching"] == (
        "Cache the stable prompt prefix: prefill is 1% of end-to-end time (below 20%)"
    )
    assert set(texts) == {
        "prefix_caching",
        "queue_alternative",
        "network_reuse",
        "parallel_calls",
        "switch_model",
    }
    assert page.locator("#advice-filter").text_content().startswith("Only requests with route POST /story.")


def test_overview_and_request_pages_link_to_the_advice(page_at) -> None:
    overview = page_at("/ui/overview")
    assert overview.locator("#advice-link").get_attribute("href") == "/ui/advice"
    request = page_at(f"/ui/requests/{trace_id(1003).hex()}")  # a /story request with 1000 tokens
    assert request.locator("[data-fact=cost] .value").text_content() == "no price"  # m-writer has none
    # gpt-4o: 500 input tokens at $2.50 / M and 80 output at $10 / M = $0.00125 + $0.0008
    answer = page_at(f"/ui/requests/{trace_id(6000).hex()}")
    assert answer.locator("[data-fact=cost] .value").text_content() == "$0.00205"
    link = request.locator("#advice-link")
    query = parse_qs(urlparse(link.get_attribute("href")).query)
    assert query == {"route": ["POST /story"], "model": ["m-writer"]}
    link.click()
    request.wait_for_url("**/ui/advice?**")
    ready(request)
    assert [s.get_attribute("data-group") for s in request.locator("section.advice-group").all()] == [
        "POST /story · m-writer"
    ]


def test_cached_and_uncached_requests_apart(page_at) -> None:
    page = page_at("/ui/advice?route=POST%20/summarize")
    rows = page.locator('#cache-table tr[data-group="POST /summarize · m-reader"]')
    cells = {row.get_attribute("data-class"): row.locator("td").all_text_contents()[2:] for row in rows.all()}
    # n, cached input, TTFT p50, p95, prefill p50, prefill per 1k uncached tokens
    # (tests/integration/collector/queries/test_cache_stats.py works them out)
    assert cells["cached"] == ["12", "75%", "120 ms", "120 ms", "50.0 ms", "50.0 ms"]
    assert cells["uncached"] == ["28", "0%", "270 ms", "270 ms", "200 ms", "50.0 ms"]
    assert fits(page, "#cache-table", 10_000) == []


def test_overview_charts_each_parts_share_mean_and_p95_over_time(page_at) -> None:
    page = page_at("/ui/overview")
    page.wait_for_selector("#components-over-time[data-state=ready] g.bucket")
    chart = page.locator("#components-over-time")
    # Every route's rows start in the first minute of one of 20 hours: 20 buckets of 5 minutes.
    assert chart.locator("g.bucket").count() == 20
    chart.locator("select[name=route]").select_option("POST /story")
    page.wait_for_selector("#components-over-time[data-state=ready]")
    heights = chart.locator("g.bucket").evaluate_all(
        """gs => gs.map(g => Object.fromEntries([...g.querySelectorAll('rect')].map(r =>
            [r.dataset.component, r.getBBox().height])))"""
    )
    # /story's hours hold two requests each, of the same length: network 50 + queue 25 + prefill 40
    # + decode 1990 = 2105 ms (decode 95 %), or decode 9990 of 10 105 ms (99 %).
    assert len(heights) == 20
    for parts in heights:
        assert parts["decode"] > 0.9 * sum(parts.values())
    first = chart.locator("g.bucket").first
    first.hover()
    assert "2 requests, mean 2.10 s" in chart.locator(".readout").text_content()
    table = chart.locator("table.components-values")
    rows = {
        r.get_attribute("data-component"): r.locator("td").all_text_contents()[1:]
        for r in table.locator("tbody tr").all()
    }
    # share (1990 / 2105 = 94.5 %), mean per request, p95 over the bucket's two requests
    assert rows["decode"][:2] == ["95%", "1.99 s"]
    # p95 comes from bfloat16 percentile states (8 significant bits, truncated): 50 ms = 2^25 × 1.4901,
    # 1.4901 × 128 = 190.7 → 190 / 128 × 2^25 ns = 49.8 ms
    assert rows["network"] == ["2%", "50.0 ms", "49.8 ms"]
    assert rows["queue"][:2] == ["1%", "25.0 ms"]
    assert list(rows) == ["decode", "network", "prefill", "queue"]  # largest mean first: 1990, 50, 40, 25
    # hours 3, 7, 11, 15 and 19 hold the 1000-token requests: decode 9990 ms of 10 105
    chart.locator("g.bucket").nth(3).focus()
    assert table.locator('tr[data-component="decode"] td').nth(2).text_content() == "9.99 s"
    # the mean view stacks each part's mean: a column's height is its mean end-to-end time
    chart.locator("select[name=mode]").select_option("mean")
    totals = chart.locator("g.bucket").evaluate_all(
        "gs => gs.map(g => [...g.querySelectorAll('rect')].reduce((a, r) => a + r.getBBox().height, 0))"
    )
    assert totals[0] / totals[3] == pytest.approx(2105 / 10105, rel=0.01)
    assert chart.locator("svg").get_attribute("data-mode") == "mean"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    chart.screenshot(path=str(ARTIFACTS / f"components-over-time-{page_at.name}.png"))
    assert fits(page, "#components-over-time svg, #components-over-time select", page_at.width) == []


def test_overview_shows_cached_and_uncached_requests_apart(page_at) -> None:
    page = page_at("/ui/overview")
    rows = page.locator('#overview-cache-table tr[data-group="m-reader · groq"]')
    cells = {row.get_attribute("data-class"): row.locator("td").all_text_contents()[2:] for row in rows.all()}
    # m-reader at groq serves /summarize only: 12 requests read 3000 of 4000 input tokens from the
    # cache, 28 none (tests/integration/collector/queries/test_cache_stats.py works them out):
    # n, cached input, TTFT p50, p95, prefill p50, prefill per 1k uncached tokens
    assert cells["cached"] == ["12", "75%", "120 ms", "120 ms", "50.0 ms", "50.0 ms"]
    assert cells["uncached"] == ["28", "0%", "270 ms", "270 ms", "200 ms", "50.0 ms"]
    # m-writer (/story) reads nothing from the cache: 40 uncached, 500 tokens and 40 ms each (80 ms / 1k)
    story = page.locator('#overview-cache-table tr[data-group="m-writer · groq"][data-class="uncached"] td')
    assert story.all_text_contents()[2:4] == ["40", "0%"] and story.last.text_content() == "80.0 ms"
    page.locator("#overview-cache-table").scroll_into_view_if_needed()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"overview-cache-{page_at.name}.png"), full_page=True)
    assert fits(page, ".scroll:has(#overview-cache-table)", page_at.width) == []
