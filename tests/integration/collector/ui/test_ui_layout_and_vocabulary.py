"""The web UI on a laptop (1440×900) and a phone (390×844), in real headless Chromium against a real
collector: no page overflows horizontally, nav links and waterfall labels do not overlap, the SLO
status stays on screen; a streamed call without server timing draws its wait for the first token
before decode; charts show values on hover and keyboard focus; span durations are formatted; a
request without a request root is flagged; times carry their zone.

Screenshots of each page at both sizes go to test-artifacts/ui/layout/; with
``LATENCYLENS_DOCS_SCREENSHOTS=1`` they are written to docs/img/ for docs/ui.md instead.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from ui_seed import KNOWN_TRACE, seed

from latencylens import semconv
from latencylens_collector.analysis.records import SpanRow
from latencylens_collector.analysis.vocabulary import PART_LABELS
from latencylens_collector.pipeline.ingest import Ingestor

sync_api = pytest.importorskip("playwright.sync_api", reason="playwright missing (the test extra has it)")

REPO = Path(__file__).resolve().parents[4]
DOCS_SHOTS = os.environ.get("LATENCYLENS_DOCS_SCREENSHOTS") == "1"
SHOTS = REPO / "docs" / "img" if DOCS_SHOTS else REPO / "test-artifacts" / "ui" / "layout"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-sync"]
TIMEOUT_MS = 20_000
LAPTOP = {"width": 1440, "height": 900}
PHONE = {"width": 390, "height": 844}
MS = 1_000_000

OPENAI_TRACE = "0a" * 16
"""A streamed OpenAI call: the provider reports no server timing."""
ROOTLESS_TRACE = "0b" * 16
"""A model call exported without a request root around it (the app forgot @latencylens.request)."""
LONG_VALUE = "x" * 3000
"""An attribute value with no place to break: it must wrap, not widen the page."""


def _row(
    trace: str, span: int, parent: int, name: str, kind: str, start_ns: int, dur_ns: int, **attrs: Any
) -> SpanRow:
    attributes = {key: str(value) for key, value in attrs.items()}
    if kind != "request":
        attributes[semconv.SPAN_KIND] = kind
    return SpanRow(
        trace_id=bytes.fromhex(trace),
        span_id=span.to_bytes(8, "big"),
        parent_span_id=parent.to_bytes(8, "big"),
        service="chat-api",
        name=name,
        span_kind="server" if kind == "request" else "client",
        kind=kind,
        start_ns=start_ns,
        duration_ns=dur_ns,
        attributes=attributes,
    )


def openai_request(start_ns: int) -> list[SpanRow]:
    """2000 ms: root 0–2000, one streamed call 100–1900 ms, first content at 1200 ms into the call,
    last chunk at 1700 ms, 300 output tokens, no server timing.

    The call's 1800 ms: decode 1700 − 1200 = 500 (measured), model-unattributed 1800 − 500 = 1300
    (the wait for the first token and the 100 ms after the last chunk); app 100 + 100 = 200 ms.
    Decode rate 300 / 0.5 s = 600 tok/s; the span's own output rate 300 / 1.7 s = 176 tok/s.
    """
    model = {
        semconv.GEN_AI_OPERATION_NAME: semconv.OPERATION_CHAT,
        semconv.GEN_AI_REQUEST_MODEL: "gpt-4o",
        semconv.GEN_AI_PROVIDER_NAME: "openai",
        semconv.STREAM_FIRST_CONTENT_NS: 1_200 * MS,
        semconv.STREAM_LAST_CHUNK_NS: 1_700 * MS,
        semconv.STREAM_OUTPUT_TOKENS_PER_SECOND: 300 / 1.7,
        semconv.GEN_AI_USAGE_INPUT_TOKENS: 900,
        semconv.GEN_AI_USAGE_OUTPUT_TOKENS: 300,
        "app.prompt_note": LONG_VALUE,
    }
    return [
        _row(OPENAI_TRACE, 1, 0, "POST /ask", "request", start_ns, 2_000 * MS),
        _row(OPENAI_TRACE, 2, 1, "chat gpt-4o", "model", start_ns + 100 * MS, 1_800 * MS, **model),
    ]


def rootless_request(start_ns: int) -> list[SpanRow]:
    """One model call with no parent: the whole trace is a single step."""
    model = {
        semconv.GEN_AI_OPERATION_NAME: semconv.OPERATION_CHAT,
        semconv.GEN_AI_REQUEST_MODEL: "gpt-4o-mini",
        semconv.GEN_AI_PROVIDER_NAME: "openai",
    }
    return [_row(ROOTLESS_TRACE, 1, 0, "chat gpt-4o-mini", "model", start_ns, 700 * MS, **model)]


def _chromium() -> str:
    path = CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium")
    if not path:
        pytest.skip("chromium not found (apt-get install chromium)")
    return path


@contextlib.contextmanager
def browser_at(base_url: str, profile: Path, viewport: dict[str, int]) -> Iterator[Callable[[str], Any]]:
    """``open(path)`` gives a loaded page at ``viewport``; any console or page error fails the test."""
    errors: list[str] = []
    with sync_api.sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(profile),
            executable_path=_chromium(),
            headless=True,
            args=CHROMIUM_ARGS,
            viewport=viewport,
            timezone_id="America/New_York",  # not UTC: the pages must still show UTC times
            locale="en-US",
        )

        def open_page(path: str) -> Any:
            page = context.new_page()
            page.set_default_timeout(TIMEOUT_MS)
            page.on("console", lambda msg: msg.type == "error" and errors.append(f"{path}: {msg.text}"))
            page.on("pageerror", lambda exc: errors.append(f"{path}: {exc}"))
            page.goto(base_url + path)
            page.wait_for_selector("body[data-ready=true] main#app[data-state=ready]")
            return page

        try:
            yield open_page
        finally:
            context.close()
    assert errors == [], errors


@pytest.fixture
def ui_collector(start_collector: Callable[..., Any], tmp_path: Path) -> Any:
    collector = start_collector(metadata_url=f"sqlite:///{tmp_path / 'metadata.db'}", slo_eval_interval_s=1)
    now = time.time_ns()
    seed(collector.store, now)
    assert Ingestor(collector.store).ingest(openai_request(now - 4 * 60 * 1_000_000_000)) == 1
    assert Ingestor(collector.store).ingest(rootless_request(now - 3 * 60 * 1_000_000_000)) == 1
    slo = {
        "name": "chat TTFT p95 under 800 ms",
        "metric": "ttft",
        "objective": {"type": "percentile", "quantile": 0.95, "threshold_ns": 800_000_000, "window": "3h"},
        "min_requests": 1,
    }
    response = httpx.post(collector.url + "/api/slos", json=slo, timeout=30)
    assert response.status_code in (200, 201), response.text
    return collector


PAGES = {
    "requests": "/ui/requests",
    "request": f"/ui/requests/{KNOWN_TRACE}",
    "request-openai": f"/ui/requests/{OPENAI_TRACE}",
    "overview": "/ui/overview",
    "slos": "/ui/slos",
}
if (REPO / "collector" / "latencylens_collector" / "ui" / "static" / "pages" / "advice.js").exists():
    PAGES["advice"] = "/ui/advice"

OVERFLOW = "() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]"
TEXT_BOXES = """els => els.map(e => { const r = e.getBoundingClientRect(); const t = document.createRange();
    t.selectNodeContents(e); const b = t.getBoundingClientRect();
    return [b.left, b.right, r.top, r.bottom]; })"""
"""Where each element's text is drawn (its own box may be wider than its words)."""
WIDE = """() => [...document.querySelectorAll('main *')].filter(e => e.getBoundingClientRect().right >
    document.documentElement.clientWidth + 1 && !e.closest('.scroll')).slice(0, 5).map(e => e.tagName + '.' +
    e.className + '#' + e.id + ' ' + Math.round(e.getBoundingClientRect().right))"""
"""What sticks out of the page on the right (for the failure message)."""
CLIPPED = "els => els.filter(e => e.textContent && e.scrollWidth > e.clientWidth + 1).map(e => e.textContent)"
BOXES = (
    "els => els.map(e => { const r = e.getBoundingClientRect(); return [r.left, r.right, r.top, r.bottom]; })"
)


def _overlapping(boxes: list[list[float]]) -> list[tuple[int, int]]:
    """Pairs of boxes that share area (touching edges is fine)."""
    return [
        (i, j)
        for i, a in enumerate(boxes)
        for j, b in enumerate(boxes)
        if i < j and min(a[1], b[1]) - max(a[0], b[0]) > 0.5 and min(a[3], b[3]) - max(a[2], b[2]) > 0.5
    ]


def _shot(page: Any, name: str, size: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"ui-{name}-{size}.png"), full_page=False)


@pytest.mark.parametrize("size", ["laptop", "phone"])
def test_every_page_fits_the_screen(ui_collector: Any, tmp_path: Path, size: str) -> None:
    viewport = LAPTOP if size == "laptop" else PHONE
    with browser_at(ui_collector.url, tmp_path / "profile", viewport) as open_page:
        for name, path in PAGES.items():
            page = open_page(path)
            scroll_width, client_width = page.evaluate(OVERFLOW)
            assert scroll_width <= client_width == viewport["width"], (
                f"{name} at {size}: {scroll_width} px wide: {page.evaluate(WIDE)}"
            )
            # Every label drawn on a bar fits its segment (none is shown cut).
            clipped = page.locator(".seg, #waterfall .wf-bar > span").evaluate_all(CLIPPED)
            assert clipped == [], f"{name} at {size}: labels wider than their segment {clipped}"
            nav = page.locator("header.top nav a").evaluate_all(BOXES)
            assert len(nav) >= 3 and _overlapping(nav) == [], f"{name}: nav links overlap {nav}"
            assert all(right <= viewport["width"] for _, right, _, _ in nav)
            if name in ("request", "request-openai"):
                # Axis labels apart, and every label on a bar fits inside its segment.
                ticks = page.locator("#waterfall .wf-tick").evaluate_all(TEXT_BOXES)
                assert len(ticks) >= 2 and _overlapping(ticks) == [], f"{name}: tick labels overlap {ticks}"
                names = page.locator("#waterfall .wf-row[data-span-id] .wf-name").evaluate_all(BOXES)
                bars = page.locator("#waterfall .wf-row[data-span-id] .wf-track").evaluate_all(BOXES)
                assert all(track[1] - track[0] >= 250 for track in bars), f"{name}: tracks too narrow {bars}"
                for label, track in zip(names, bars, strict=True):
                    assert _overlapping([label, track]) == [], f"{name}: a span name covers its bar"
            if name == "slos":
                # The service evaluates every second: show the evaluated SLO (status, budget).
                deadline = time.monotonic() + 30
                while page.locator("#slos .badge.no_data").count() and time.monotonic() < deadline:
                    time.sleep(1)
                    page.reload()
                    page.wait_for_selector("body[data-ready=true] main#app[data-state=ready]")
                status = page.locator("#slos tbody tr [data-column=status] .badge").first
                box = status.bounding_box()
                assert box is not None and 0 <= box["x"] and box["x"] + box["width"] <= viewport["width"]
                assert box["y"] + box["height"] <= viewport["height"], "the SLO status is on the first screen"
            _shot(page, name, size)
            if name in ("request", "request-openai"):
                page.locator("#waterfall").screenshot(path=str(SHOTS / f"ui-{name}-waterfall-{size}.png"))


def test_waterfall_draws_the_wait_for_the_first_token_before_decode(
    ui_collector: Any, tmp_path: Path
) -> None:
    with browser_at(ui_collector.url, tmp_path / "profile", LAPTOP) as open_page:
        page = open_page(f"/ui/requests/{OPENAI_TRACE}")
        model_bar = page.locator("#waterfall .wf-row[data-kind=model] .wf-bar")
        parts = model_bar.locator("span[data-component]").evaluate_all(
            "els => els.map(e => [e.dataset.component, parseFloat(e.style.width)])"
        )
        # 1300 of the call's 1800 ms before the first token, then 500 ms of decode.
        assert [name for name, _ in parts] == ["model_unattributed", "decode"]
        assert [width for _, width in parts] == pytest.approx([1300 / 1800 * 100, 500 / 1800 * 100], abs=0.01)
        marker = page.locator("#waterfall .wf-row[data-kind=model] [data-marker=first-token]")
        # 1200 ms into the call, which starts 100 ms into the 2000 ms request.
        assert float(marker.get_attribute("data-offset") or "") == pytest.approx(1200 / 1800, abs=1e-6)
        left = float(marker.evaluate("e => parseFloat(e.style.left)"))
        assert left == pytest.approx(1300 / 2000 * 100, abs=0.01)
        assert marker.get_attribute("title") == "first token after 1.20 s (TTFT)"
        # The key reads in the same order, with the shared labels.
        key = page.locator("#waterfall-key > span").evaluate_all("els => els.map(e => e.dataset.component)")
        assert key == ["model_unattributed", "decode"]
        assert page.locator("#waterfall-key").text_content().startswith(PART_LABELS["model_unattributed"])
        # The request's bar too: the wait before decode.
        top = page.locator(".card .stack.tall .seg").evaluate_all("els => els.map(e => e.dataset.component)")
        assert top == ["app_other", "model_unattributed", "decode"]
        assert page.locator("#explanation").text_content() == (
            "Waiting for the first token (TTFT 1.20 s) on gpt-4o (openai) took 1.30 s of the request's "
            "2.00 s (65%); openai reported no server timing, so the wait before the first content chunk "
            "(network, queue and prefill together) is not split."
        )
        facts = dict(
            page.locator("#facts .fact").evaluate_all(
                "els => els.map(e => [e.dataset.fact, e.querySelector('.label').firstChild.textContent"
                " + ' = ' + e.querySelector('.value').textContent])"
            )
        )
        assert facts["tps"] == "decode rate = 600 tok/s"  # 300 tokens / 0.5 s of decode
        assert facts["ttft"] == "TTFT = 1.20 s"


def test_first_token_mark_ends_the_reported_wait(ui_collector: Any, tmp_path: Path) -> None:
    """The known Groq call (tests/support/ui_seed.py): 400 ms, first token at 80 ms, queue 40 and
    prefill 20 reported, network 40: 80 − 40 − 20 = 20 ms of network drawn before the server's
    part, so the first-token mark falls where prefill ends."""
    with browser_at(ui_collector.url, tmp_path / "profile", LAPTOP) as open_page:
        page = open_page(f"/ui/requests/{KNOWN_TRACE}")
        row = page.locator("#waterfall .wf-row[data-kind=model]")
        parts = row.locator(".wf-bar > span").evaluate_all(
            "els => els.map(e => [e.dataset.component, parseFloat(e.style.width)])"
        )
        ends = [sum(width for _, width in parts[: i + 1]) for i in range(len(parts))]
        assert [name for name, _ in parts][:3] == ["network", "queue", "prefill"]
        mark = float(row.locator("[data-marker=first-token]").get_attribute("data-offset") or "")
        assert mark * 100 == pytest.approx(ends[2], abs=0.01) == pytest.approx(80 / 400 * 100, abs=0.01)


def test_span_attributes_are_formatted_and_wrap(ui_collector: Any, tmp_path: Path) -> None:
    with browser_at(ui_collector.url, tmp_path / "profile", PHONE) as open_page:
        page = open_page(f"/ui/requests/{OPENAI_TRACE}")
        page.click("#waterfall .wf-row[data-kind=model]")
        attrs = page.locator("#waterfall .wf-attrs:not([hidden])")
        first = attrs.locator(f"tr[data-attribute='{semconv.STREAM_FIRST_CONTENT_NS}'] td.mono")
        assert first.text_content() == "1.20 s (1200000000 ns)"
        assert first.get_attribute("data-raw") == "1200000000 ns"
        rate = attrs.locator(f"tr[data-attribute='{semconv.STREAM_OUTPUT_TOKENS_PER_SECOND}'] td.mono")
        assert "output rate, whole call" in rate.text_content()  # not another "decode rate"
        long = attrs.locator("tr[data-attribute='app.prompt_note'] td.mono")
        assert long.text_content() == LONG_VALUE
        box = long.bounding_box()
        assert (
            box is not None and box["x"] + box["width"] <= PHONE["width"] and box["height"] > 100
        )  # wrapped
        assert page.evaluate(OVERFLOW)[0] <= PHONE["width"]
        first.scroll_into_view_if_needed()
        _shot(page, "request-attributes", "phone")


def test_requests_without_a_root_are_flagged(ui_collector: Any, tmp_path: Path) -> None:
    with browser_at(ui_collector.url, tmp_path / "profile", LAPTOP) as open_page:
        page = open_page("/ui/requests")
        flagged = page.locator("#requests tbody tr:has([data-flag=no-root])").evaluate_all(
            "rows => rows.map(r => r.dataset.traceId)"
        )
        assert flagged == [ROOTLESS_TRACE]
        assert "README" in (page.locator("[data-flag=no-root]").get_attribute("title") or "")
        started = page.locator("#requests tbody tr td:first-child").all_text_contents()
        assert started and all(text.endswith(" UTC") for text in started)  # the browser is in New York
        page = open_page(f"/ui/requests/{ROOTLESS_TRACE}")
        hint = page.locator("#root-hint").text_content() or ""
        assert "single model step" in hint and "@latencylens.request" in hint
        # The hint names a section the README has.
        assert "README, “Request roots”" in hint
        assert "\n### Request roots\n" in (REPO / "README.md").read_text(encoding="utf-8")
        page = open_page(f"/ui/requests/{KNOWN_TRACE}")
        assert page.locator("#root-hint").count() == 0


def test_overview_charts_show_values_on_hover_and_focus(ui_collector: Any, tmp_path: Path) -> None:
    with browser_at(ui_collector.url, tmp_path / "profile", LAPTOP) as open_page:
        page = open_page("/ui/overview?window=6h")
        chart = page.locator("#charts svg.chart").first
        bands = chart.locator("rect.hover-band")
        assert bands.count() >= 10
        band = bands.last
        text = band.get_attribute("data-values") or ""
        assert " UTC: p50 " in text and ", p95 " in text and ", p99 " in text
        assert band.locator("title").text_content() == text
        band.hover()
        assert chart.locator("text.readout").text_content() == text
        band.focus()  # keyboard: every bucket is focusable and named
        assert band.get_attribute("tabindex") == "0" and band.get_attribute("aria-label") == text
        assert chart.locator("text.readout").text_content() == text


def test_overview_of_a_fresh_install_picks_its_window_from_the_data(
    start_collector: Callable[..., Any], tmp_path: Path
) -> None:
    collector = start_collector()
    now = time.time_ns()
    # Six minutes of traffic, one request a minute: a fresh install.
    for minute in range(6):
        trace = f"{minute + 1:032x}"
        rows = [
            _row(trace, 1, 0, "POST /ask", "request", now - (6 - minute) * 60 * 1_000_000_000, 900 * MS),
        ]
        assert Ingestor(collector.store).ingest(rows) == 1
    with browser_at(collector.url, tmp_path / "profile", PHONE) as open_page:
        page = open_page("/ui/overview")
        note = page.locator("#window-note")
        assert (note.get_attribute("data-window"), note.get_attribute("data-bucket")) == ("15m", "1m")
        assert (note.text_content() or "").startswith("Window chosen from the data")
        requests_chart = page.locator("#charts svg.chart").nth(3)
        assert requests_chart.locator("path.series").count() == 1  # a line, not dots
        assert requests_chart.locator("rect.hover-band").count() >= 6
        assert page.evaluate(OVERFLOW)[0] <= PHONE["width"]
        _shot(page, "overview-fresh", "phone")


def test_phone_folds_the_request_filters_until_asked(ui_collector: Any, tmp_path: Path) -> None:
    with browser_at(ui_collector.url, tmp_path / "profile", PHONE) as open_page:
        page = open_page("/ui/requests")
        fold = page.locator("details.filters-fold")
        assert fold.get_attribute("open") is None
        first_row = page.locator("#requests tbody tr").first.bounding_box()
        assert first_row is not None and first_row["y"] < PHONE["height"]  # the list starts on screen
        fold.locator("summary").click()
        page.fill("input[name=min_ms]", "1500")
        page.click("form.filters button[type=submit]")
        sync_api.expect(page.locator("#requests tbody tr")).to_have_count(1)  # the 2000 ms OpenAI call
        page.wait_for_selector("main#app[data-state=ready]")
        assert page.locator("details.filters-fold").get_attribute("open") == ""  # a filter is set
