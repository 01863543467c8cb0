"""A request's cost stored at ingest and shown by stats and compare, end to end: OTLP spans into a
real collector, the row's ``cost_nano_usd`` in ClickHouse, ``/api/stats``, ``/api/compare`` and the
CLI at 80 columns. Prices are genai-prices' bundled data or the configured ones, worked out by hand;
a model without a price says so (NULL, ``no price``), never $0."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest
from cli_data import wait_for_requests
from otlp_builders import MS, chat_trace, new_span_id, new_trace_id, post_protobuf, span

from latencylens import semconv
from latencylens_collector.analysis.costs import CONFIGURED_MARK, price_data_version, use_prices
from latencylens_collector.cli.main import main

S = 1_000_000_000
KNOWN = "llama-3.3-70b-versatile"
"""At Groq in genai-prices: $0.59 / M input (no cache-read price: cached input costs as input) and
$0.79 / M output. chat_trace's call: 500 input, 101 output → 500 × 0.59 + 101 × 0.79 = 374.79 µ$."""
KNOWN_NANO_USD = 374_790
UNKNOWN = "llama-3.3-70b"
"""Not a model id genai-prices knows at Groq: no price."""


@pytest.fixture(autouse=True)
def _restore_prices():
    previous = use_prices({})
    yield
    use_prices(previous)


def stored_costs(collector: Any) -> dict[str, tuple[int | None, str]]:
    rows = collector.store.query(
        f"SELECT model, cost_nano_usd, price_version FROM {collector.store.table('requests')} FINAL"
    )
    return {row["model"]: (row["cost_nano_usd"], row["price_version"]) for row in rows}


def run_cli(argv: list[str], capsys: Any, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("COLUMNS", "80")
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert all(len(line) <= 80 for line in out.splitlines()), out
    return out


@pytest.fixture
def two_models(collector: Any) -> Any:
    """Two requests an hour apart per model: one priced (KNOWN), one not (UNKNOWN)."""
    base = (time.time_ns() // S - 2 * 3600) * S
    for offset in (0, 3600 * S):
        for model in (KNOWN, UNKNOWN):
            assert post_protobuf(collector.url, chat_trace(base + offset, model=model)).status_code == 200
    wait_for_requests(collector.url, 4)
    collector.base = base
    return collector


def test_cost_is_stored_per_request_and_unknown_models_have_none(two_models: Any) -> None:
    costs = stored_costs(two_models)
    assert costs[KNOWN] == (KNOWN_NANO_USD, price_data_version())
    assert costs[UNKNOWN] == (None, price_data_version())  # NULL, not 0: the data has no price


def test_stats_show_cost_next_to_latency(two_models: Any, capsys, monkeypatch) -> None:
    body = httpx.get(f"{two_models.url}/api/stats", params={"by": "model"}, timeout=30).json()
    groups = {g["key"]["model"]: g for g in body["groups"]}
    known, unknown = groups[KNOWN]["cost"], groups[UNKNOWN]["cost"]
    # Two requests of 374.79 µ$ each: total 749.58 µ$, mean 374.79 µ$ (percentiles: 8 significant bits).
    assert known["total_usd"] == pytest.approx(2 * KNOWN_NANO_USD / 1e9)
    assert known["mean_usd"] == pytest.approx(KNOWN_NANO_USD / 1e9)
    assert known["p50_usd"] == pytest.approx(KNOWN_NANO_USD / 1e9, rel=0.008)
    assert (known["priced"], known["no_price"]) == (2, 0)
    assert unknown == {
        "total_usd": None,
        "mean_usd": None,
        "p50_usd": None,
        "p95_usd": None,
        "priced": 0,
        "no_price": 2,
    }
    out = run_cli(["stats", "--by", "model", "--url", two_models.url], capsys, monkeypatch)
    rows = {
        line.split()[0]: line.split()[1:] for line in out.splitlines() if "$" in line or "no price" in line
    }
    assert rows[KNOWN][:2] == ["$0.000375", "$0.00075"]  # $/req, $ total (749.58 µ$, 3 digits)
    assert rows[UNKNOWN] == ["no", "price", "no", "price", "2"]


def test_compare_shows_cost_per_request_per_range(two_models: Any, capsys, monkeypatch) -> None:
    base = two_models.base // S
    ranges = {"a_since": base, "a_until": base + 3600, "b_since": base + 3600, "b_until": base + 7200}
    body = httpx.get(
        f"{two_models.url}/api/compare", params={**ranges, "by": "model", "metric": "e2e"}, timeout=30
    ).json()
    # Each range: one priced request (374.79 µ$) and one without a price.
    for side in ("a", "b"):
        assert body[side]["cost_per_request_usd"] == pytest.approx(KNOWN_NANO_USD / 1e9)
        assert body[side]["no_price"] == 1
    assert body["cost_ratio"] == pytest.approx(1.0)
    groups = {g["key"]["model"]: g for g in body["groups"]}
    assert groups[KNOWN]["cost_ratio"] == pytest.approx(1.0)
    assert (groups[UNKNOWN]["a_cost_per_request_usd"], groups[UNKNOWN]["cost_ratio"]) == (None, None)
    argv = ["compare", "--url", two_models.url, "--by", "model", "--metric", "e2e"]
    argv += [f"--{k.replace('_', '-')}={v}" for k, v in ranges.items()]
    out = run_cli(argv, capsys, monkeypatch)
    assert "cost per request: A $0.000375 (1 without a price left out), B $0.000375" in " ".join(out.split())


def test_configured_prices_price_a_self_hosted_model(start_collector: Any, capsys, monkeypatch) -> None:
    # LATENCYLENS_PRICES: vllm/my-llama at $0.50 / M input, $0.10 / M cached input, $1.50 / M output.
    prices = {"vllm/my-llama": {"input": 0.5, "cached_input": 0.1, "output": 1.5}}
    collector = start_collector(prices=prices)
    base = time.time_ns() - 5 * 60 * S
    trace, root = new_trace_id(), new_span_id()
    usage = {
        semconv.GEN_AI_OPERATION_NAME: semconv.OPERATION_CHAT,
        semconv.GEN_AI_PROVIDER_NAME: "vllm",
        semconv.GEN_AI_REQUEST_MODEL: "my-llama",
        semconv.GEN_AI_USAGE_INPUT_TOKENS: 1000,
        semconv.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: 400,
        semconv.GEN_AI_USAGE_OUTPUT_TOKENS: 200,
    }
    spans = [
        span("chat my-llama", trace, new_span_id(), root, base + 10 * MS, base + 900 * MS, usage),
        span("POST /ask", trace, root, None, base, base + 1000 * MS),
    ]
    assert post_protobuf(collector.url, spans).status_code == 200
    wait_for_requests(collector.url, 1)
    # (600 × 0.5 + 400 × 0.1 + 200 × 1.5) / 1e6 = $0.00064 = 640,000 nano-dollars
    cost, version = stored_costs(collector)["my-llama"]
    assert cost == 640_000
    assert f"+ {CONFIGURED_MARK} " in version  # the row says configured prices were used
    out = run_cli(["stats", "--by", "model", "--url", collector.url], capsys, monkeypatch)
    assert "$0.00064" in out
