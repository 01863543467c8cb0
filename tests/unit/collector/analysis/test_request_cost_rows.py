"""A request row's cost, priced at ingest from its model calls' tokens (analysis/request_rows.py with
analysis/costs.py), worked out by hand from genai-prices' bundled prices; no price rather than a
guess; the reconciler's settled computation prices alike."""

from __future__ import annotations

import dataclasses

import pytest
from otlp_builders import chat_trace, export_request

from latencylens import semconv
from latencylens_collector.analysis.costs import (
    CONFIGURED_MARK,
    NANO_USD_PER_USD,
    CallUsage,
    configured_prices,
    price_data_version,
    prices_digest,
    request_cost,
    use_prices,
)
from latencylens_collector.analysis.records import SpanRow
from latencylens_collector.analysis.request_rows import build_request_row, trace_rows
from latencylens_collector.intake import otlp

BASE = 1_700_000_000_000_000_000  # 2023-11-14
MODEL_KEYS = (semconv.GEN_AI_REQUEST_MODEL, semconv.GEN_AI_RESPONSE_MODEL)


def trace(provider: str, model: str, **usage: str) -> list[SpanRow]:
    """chat_trace (500 input tokens of which 100 cached, 101 output) with its model call's provider,
    model and any usage attribute replaced."""
    spans = otlp.flatten(export_request(chat_trace(BASE, model=model))).spans
    out = []
    for row in spans:
        if semconv.GEN_AI_REQUEST_MODEL in row.attributes:
            attrs = {**row.attributes, semconv.GEN_AI_PROVIDER_NAME: provider, **usage}
            attrs = {key: value for key, value in attrs.items() if value != ""}
            row = dataclasses.replace(row, attributes=attrs)
        out.append(row)
    return out


@pytest.fixture(autouse=True)
def _no_configured_prices():
    previous = use_prices({})
    yield
    use_prices(previous)


def test_cost_of_a_request_is_its_tokens_at_the_bundled_prices() -> None:
    # gpt-4o at OpenAI (genai-prices): $2.50 / M input, $1.25 / M cache-read input, $10 / M output.
    # 500 input of which 100 cached, 101 output: 400 × 2.5 + 100 × 1.25 + 101 × 10 = 2135 µ$
    # = $0.002135 = 2,135,000 nano-dollars.
    row = build_request_row(trace("openai", "gpt-4o"))
    assert row is not None
    assert row["cost_nano_usd"] == 2_135_000
    assert row["price_version"] == price_data_version()
    # Groq's llama-3.3-70b-versatile: $0.59 / M input (no cache-read price: cached input costs as
    # input) and $0.79 / M output: 500 × 0.59 + 101 × 0.79 = 374.79 µ$ = 374,790 nano-dollars.
    groq = build_request_row(trace("groq", "llama-3.3-70b-versatile"))
    assert groq is not None and groq["cost_nano_usd"] == 374_790


def test_a_request_costs_the_sum_of_its_model_calls() -> None:
    # 1000 input (200 cached) and 300 output of gpt-4o: 800 × 2.5 + 200 × 1.25 + 300 × 10 = 5250 µ$;
    # 2000 input and 100 output of gpt-4o-mini ($0.15 / M input, $0.075 cached, $0.60 output):
    # 2000 × 0.15 + 100 × 0.6 = 360 µ$. Together 5610 µ$.
    calls = [CallUsage("openai", "gpt-4o", 1000, 200, 300), CallUsage("openai", "gpt-4o-mini", 2000, 0, 100)]
    assert request_cost(calls, BASE).nano_usd == 5_610_000
    assert request_cost([], BASE).nano_usd == 0  # no model call: nothing to pay for


@pytest.mark.parametrize(
    ("provider", "model", "usage"),
    [
        ("groq", "llama-3.3-70b", {}),  # a model the price data does not know (chat_trace's default)
        ("p-nowhere", "gpt-4o", {}),  # a provider it does not know
        ("openai", "gpt-4o", {semconv.GEN_AI_USAGE_OUTPUT_TOKENS: ""}),  # output count not reported
        # cache reads not reported where cached input has its own price: the price is unknown
        ("openai", "gpt-4o", {semconv.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: ""}),
    ],
)
def test_no_price_is_none_never_zero(provider: str, model: str, usage: dict[str, str]) -> None:
    row = build_request_row(trace(provider, model, **usage))
    assert row is not None
    assert row["cost_nano_usd"] is None
    assert row["price_version"] == price_data_version()


def test_unreported_cache_reads_do_not_matter_without_a_cache_read_price() -> None:
    # Groq's llama-3.3-70b-versatile prices cached input as input: 500 × 0.59 + 101 × 0.79 µ$.
    spans = trace("groq", "llama-3.3-70b-versatile", **{semconv.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: ""})
    row = build_request_row(spans)
    assert row is not None and row["cost_nano_usd"] == 374_790


def test_one_call_without_a_price_leaves_the_request_without_one() -> None:
    calls = [CallUsage("openai", "gpt-4o", 1000, 200, 300), CallUsage("openai", "no-such-model", 10, 0, 1)]
    assert request_cost(calls, BASE).nano_usd is None
    estimated = CallUsage("openai", "gpt-4o", 1000, 0, 300, estimated=True)
    assert request_cost([estimated], BASE).nano_usd is None  # an instrumentation's guess is not priced


def test_configured_prices_price_a_self_hosted_model_and_say_so() -> None:
    prices = {"vllm/my-llama": {"input": 0.5, "cached_input": 0.1, "output": 1.5}}
    # 500 input of which 100 cached, 101 output: 400 × 0.5 + 100 × 0.1 + 101 × 1.5 = 361.5 µ$.
    row = build_request_row(trace("vllm", "my-llama"), prices=prices)
    assert row is not None and row["cost_nano_usd"] == 361_500
    assert row["price_version"] == f"{price_data_version()} + {CONFIGURED_MARK} {prices_digest(prices)}"
    # The process's configured prices (the collector's ``prices`` setting) are the default.
    use_prices(prices)
    assert configured_prices() == prices
    default = build_request_row(trace("vllm", "my-llama"))
    assert default is not None and default["cost_nano_usd"] == 361_500
    assert prices_digest(prices) != prices_digest({"vllm/my-llama": {"input": 0.6, "output": 1.5}})


def test_the_settled_computation_prices_the_row_alike() -> None:
    # The reconciler rebuilds rows with trace_rows(settled=True): same spans, same cost.
    spans = trace("openai", "gpt-4o")
    written = build_request_row(spans)
    [reconciled, *_] = trace_rows(spans, version=7, settled=True)
    assert written is not None and reconciled["cost_nano_usd"] == written["cost_nano_usd"] == 2_135_000
    assert reconciled["price_version"] == written["price_version"]


def test_tombstones_have_no_cost() -> None:
    rows = trace_rows(trace("openai", "gpt-4o"), version=7, stored_starts=[BASE - 1])
    tombstones = [row for row in rows if row["is_deleted"]]
    assert tombstones and all(t["cost_nano_usd"] is None and t["price_version"] == "" for t in tombstones)


def test_nano_dollars() -> None:
    assert NANO_USD_PER_USD == 10**9
