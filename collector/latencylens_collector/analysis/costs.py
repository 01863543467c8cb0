"""What a model call costs: its token counts at the prices of pydantic's ``genai-prices``.

``genai-prices`` bundles its price data (input, cached-input and output prices per provider and
model), so a price is looked up offline; its online update is never called. A model or provider
the data does not know has no price (None), never a guess. The library takes about two seconds to
import, so it is imported on the first lookup, not with this module.
"""

from __future__ import annotations

import importlib.metadata
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


@cache
def request_cost_usd(
    provider: str, model: str, input_tokens: int, cached_tokens: int, output_tokens: int
) -> float | None:
    """US dollars for one call of ``model`` at ``provider`` with these counts (``input_tokens``
    includes the ``cached_tokens`` read from the provider's cache); None without a price."""
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
    "price_data_version",
    "request_cost_usd",
]
