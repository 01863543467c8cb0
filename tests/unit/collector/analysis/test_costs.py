"""What a call costs at genai-prices' bundled prices (analysis/costs.py), worked out by hand."""

from __future__ import annotations

import pytest

from latencylens_collector.analysis.advice import MeanUsage
from latencylens_collector.analysis.costs import configured_cost_usd, price_data_version, request_cost_usd
from latencylens_collector.settings import Settings, SettingsError


def test_cost_of_input_cached_input_and_output_tokens() -> None:
    # gpt-4o at OpenAI: $2.50 / M input, $1.25 / M cache-read input, $10 / M output.
    # 1000 input of which 500 cached, 100 output: 500 × 2.5e-6 + 500 × 1.25e-6 + 100 × 10e-6
    assert request_cost_usd("openai", "gpt-4o", 1000, 500, 100) == pytest.approx(0.002875)
    assert request_cost_usd("openai", "gpt-4o", 500, 0, 100) == pytest.approx(0.00225)


@pytest.mark.parametrize(
    ("provider", "model"),
    [("openai", "no-such-model"), ("p-nowhere", "gpt-4o"), ("", "gpt-4o"), ("openai", "")],
)
def test_unknown_models_and_providers_have_no_price(provider: str, model: str) -> None:
    assert request_cost_usd(provider, model, 500, 0, 100) is None


def test_mean_usage_without_counted_requests_has_no_price() -> None:
    assert MeanUsage().cost_usd("openai", "gpt-4o") is None
    assert MeanUsage(3, 500, 0, 100).cost_usd("openai", "gpt-4o") == pytest.approx(0.00225)


def test_price_data_names_its_version() -> None:
    version = price_data_version()
    assert version is not None and version.startswith("genai-prices ")


def test_configured_prices_take_precedence() -> None:
    prices = {"vllm/my-llama": {"input": 0.5, "cached_input": 0.1, "output": 1.5}}
    # 1000 input of which 400 cached, 200 output: (600 × 0.5 + 400 × 0.1 + 200 × 1.5) / 1e6 = $0.00064
    assert request_cost_usd("vllm", "my-llama", 1000, 400, 200, prices=prices) == pytest.approx(0.00064)
    assert request_cost_usd("vllm", "my-llama", 1000, 400, 200) is None  # unknown to the bundled data
    # a configured price replaces the bundled one; cached input defaults to the input price:
    # (1000 × 1 + 100 × 2) / 1e6 = $0.0012
    gpt = {"openai/gpt-4o": {"input": 1.0, "output": 2.0}}
    assert request_cost_usd("openai", "gpt-4o", 1000, 500, 100, prices=gpt) == pytest.approx(0.0012)
    assert configured_cost_usd({"input": 1.0, "output": 2.0}, 1000, 500, 100) == pytest.approx(0.0012)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"my-llama": {"input": 1, "output": 2}}', "'my-llama' is not provider/model"),
        ('{"vllm/x": {"input": 1}}', "needs input and output"),
        ('{"vllm/x": {"input": 1, "output": 2, "per_call": 3}}', "needs input and output"),
        ('{"vllm/x": {"input": -1, "output": 2}}', "negative or infinite"),
    ],
)
def test_bad_configured_prices_are_refused(text: str, message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        Settings(environ={"LATENCYLENS_PRICES": text})
