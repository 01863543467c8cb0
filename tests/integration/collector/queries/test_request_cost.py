"""A request's cost in its detail (``GET /api/requests/{id}``) and ``latencylens explain``: its tokens
at genai-prices' bundled prices, worked out by hand; no price rather than a guess."""

from __future__ import annotations

import time

import httpx
import pytest
from queries_data import S, request_row, trace_id

from latencylens_collector.cli.main import main


@pytest.fixture
def priced(collector):
    start = (time.time_ns() // S - 600) * S
    common = {"provider": "openai", "input_tokens": 1000, "output_tokens": 100}
    collector.store.upsert_requests(
        [
            request_row(1, start, {"decode": 500}, model="gpt-4o", cached=500, **common),
            request_row(2, start + S, {"decode": 500}, model="my-own-llama", cached=0, **common),
            request_row(3, start + 2 * S, {"decode": 500}, model="gpt-4o", cached=None, **common),
        ]
    )
    return collector


def detail(collector, n: int) -> dict:
    response = httpx.get(f"{collector.url}/api/requests/{trace_id(n).hex()}", timeout=30)
    assert response.status_code == 200, response.text
    return response.json()


def test_cost_of_a_request_is_its_tokens_at_the_models_prices(priced) -> None:
    # gpt-4o at OpenAI: $2.50 / M input, $1.25 / M cache-read input, $10 / M output.
    # 1000 input of which 500 cached, 100 output: 500 × 2.5e-6 + 500 × 1.25e-6 + 100 × 10e-6 = $0.002875
    body = detail(priced, 1)
    assert body["cost_usd"] == pytest.approx(0.002875)
    assert body["price_data"].startswith("genai-prices ")


def test_unknown_model_or_unreported_count_has_no_price(priced) -> None:
    assert detail(priced, 2)["cost_usd"] is None  # a model the price data does not know
    assert detail(priced, 3)["cost_usd"] is None  # cache reads not reported: the price is unknown


def test_explain_prints_the_cost(priced, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["explain", trace_id(1).hex(), "--url", priced.url]) == 0
    assert "cost: $0.002875 (genai-prices " in capsys.readouterr().out
    assert main(["explain", trace_id(2).hex(), "--url", priced.url]) == 0
    assert "cost: no price" in capsys.readouterr().out


def test_configured_prices_price_a_self_hosted_model(start_collector, capsys) -> None:
    # LATENCYLENS_PRICES (the prices setting): $0.50 / M input, $0.10 / M cached input, $1.50 / M output
    collector = start_collector(
        prices={"openai/my-own-llama": {"input": 0.5, "cached_input": 0.1, "output": 1.5}}
    )
    start = (time.time_ns() // S - 600) * S
    common = {"provider": "openai", "model": "my-own-llama", "input_tokens": 1000, "output_tokens": 100}
    collector.store.upsert_requests(
        [
            request_row(n, start + n * S, {"decode": 500}, cached=400 if n == 1 else 0, **common)
            for n in (1, 2)
        ]
    )
    # (600 × 0.5 + 400 × 0.1 + 100 × 1.5) / 1e6 = $0.00049
    assert detail(collector, 1)["cost_usd"] == pytest.approx(0.00049)
    # The advisor prices the group's mean request: 1000 input, 200 cached (mean of 400 and 0), 100
    # output → (800 × 0.5 + 200 × 0.1 + 100 × 1.5) / 1e6 = $0.00057
    body = httpx.get(f"{collector.url}/api/advice", params={"min_requests": 1}, timeout=60).json()
    (group,) = body["groups"]
    assert group["cost_per_request_usd"] == pytest.approx(0.00057)


def test_the_detail_shows_the_cost_stored_with_the_row(collector) -> None:
    """A row priced at ingest keeps that price and its price data in the detail (the figure stats
    and compare add up), even where today's prices would give another; an unpriced one says so."""
    start = (time.time_ns() // S - 600) * S
    common = {"provider": "openai", "model": "gpt-4o", "input_tokens": 1000, "output_tokens": 100}
    collector.store.upsert_requests(
        [
            # Stored at ingest: 1,234,567 nano-dollars (gpt-4o today would be $0.002875, above).
            request_row(1, start, {"decode": 500}, cached=500, cost_nano_usd=1_234_567, **common),
            request_row(2, start + S, {"decode": 500}, cached=500, **common),
        ]
    )
    body = detail(collector, 1)
    assert body["cost_usd"] == pytest.approx(0.001234567)
    assert body["price_data"] == "genai-prices test"
    # A row stored before costs were (no price_version) is priced from its counts when asked.
    assert detail(collector, 2)["cost_usd"] == pytest.approx(0.002875)
