"""What a model call costs: its token counts at the prices of pydantic's ``genai-prices``.

``genai-prices`` bundles its price data (input, cached-input and output prices per provider and
model), so a price is looked up offline; its online update is never called. A model or provider
the data does not know has no price (None), never a guess. The library takes about two seconds to
import, so it is imported on the first lookup, not with this module.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Mapping
from functools import cache
from typing import Final

PRICE_PACKAGE: Final = "genai-prices"


@cache
def price_data_version() -> str | None:
    """``genai-prices <version>`` of the installed price data; None when it is not installed."""
    try:
        return f"{PRICE_PACKAGE} {importlib.metadata.version(PRICE_PACKAGE)}"
    except importlib.metadata.PackageNotFoundError:
        return None


Prices = Mapping[str, Mapping[str, float]]
"""Configured prices (the ``prices`` setting): ``provider/model`` → ``input``, ``cached_input``
(default: ``input``) and ``output``, US dollars per million tokens. They take precedence."""


def request_cost_usd(
    provider: str,
    model: str,
    input_tokens: int,
    cached_tokens: int,
    output_tokens: int,
    prices: Prices | None = None,
) -> float | None:
    """US dollars for one call of ``model`` at ``provider`` with these counts (``input_tokens``
    includes the ``cached_tokens`` read from the provider's cache): at the configured price for
    ``provider/model`` if there is one, else at genai-prices'; None without a price."""
    configured = (prices or {}).get(f"{provider}/{model}")
    if configured is not None:
        return configured_cost_usd(configured, input_tokens, cached_tokens, output_tokens)
    return _bundled_cost_usd(provider, model, input_tokens, cached_tokens, output_tokens)


def configured_cost_usd(
    price: Mapping[str, float], input_tokens: int, cached_tokens: int, output_tokens: int
) -> float:
    """Uncached input, cached input and output tokens at a configured price per million tokens."""
    cached_price = price.get("cached_input", price["input"])
    uncached = input_tokens - cached_tokens
    return (uncached * price["input"] + cached_tokens * cached_price + output_tokens * price["output"]) / 1e6


@cache
def _bundled_cost_usd(
    provider: str, model: str, input_tokens: int, cached_tokens: int, output_tokens: int
) -> float | None:
    if not model or not provider:
        return None
    try:
        from genai_prices import Usage, calc_price
    except ImportError:
        return None
    usage = Usage(input_tokens=input_tokens, cache_read_tokens=cached_tokens, output_tokens=output_tokens)
    try:
        return float(calc_price(usage, model_ref=model, provider_id=provider).total_price)
    except LookupError:
        return None


__all__ = [
    "PRICE_PACKAGE",
    "Prices",
    "configured_cost_usd",
    "price_data_version",
    "request_cost_usd",
]
