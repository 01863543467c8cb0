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
