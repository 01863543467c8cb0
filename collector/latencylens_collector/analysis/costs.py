"""What a model call costs: its token counts at the prices of pydantic's ``genai-prices``.

``genai-prices`` bundles its price data (input, cached-input and output prices per provider and
model), so a price is looked up offline; its online update is never called. A model or provider
the data does not know has no price (None), never a guess. The library takes about two seconds to
import, so it is imported on the first lookup, not with this module.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from functools import cache, lru_cache
from typing import Any, Final

PRICE_PACKAGE: Final = "genai-prices"
NANO_USD_PER_USD: Final = 1_000_000_000
"""Stored costs are integer nano-dollars (10⁻⁹ USD): sums are exact and do not depend on the order
rows are added in, so the rollup and the rows give the same totals. The cheapest prices (a few
cents per million tokens) are tens of nano-dollars per token, so rounding each call loses nothing
a reader could see."""
CONFIGURED_MARK: Final = "configured"


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


@lru_cache(maxsize=4096)
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


_configured: Prices = {}


def use_prices(prices: Prices) -> Prices:
    """Make ``prices`` (the ``prices`` setting) the ones request rows are priced with in this
    process, by the write path and the reconciler alike (one collector per process); returns the
    previous ones."""
    global _configured
    previous, _configured = _configured, dict(prices)
    return previous


def warm_prices() -> None:
    """Load genai-prices' bundled data now (at start-up), not in the first export's write."""
    try:
        from genai_prices import data_snapshot
    except ImportError:
        return
    data_snapshot.get_snapshot()


def configured_prices() -> Prices:
    """The prices set by :func:`use_prices` (none by default)."""
    return _configured


def prices_digest(prices: Prices) -> str:
    """Eight hex digits that change whenever the configured prices do."""
    text = json.dumps(prices, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:8]


@dataclass(slots=True)
class CallUsage:
    """What a model call used, as its span reported it: counts None when not reported.

    Read-only by convention, not frozen, as :class:`RequestCost`: one is built for every model
    call of every request row, and a frozen dataclass costs several times as much to construct."""

    provider: str
    model: str
    input_tokens: int | None
    cached_tokens: int | None
    output_tokens: int | None
    estimated: bool = False


@dataclass(slots=True)
class RequestCost:
    """A request's cost in nano-dollars (None: some call has no price) and the prices used."""

    nano_usd: int | None
    price_version: str


def request_cost(calls: Sequence[CallUsage], at_ns: int, prices: Prices | None = None) -> RequestCost:
    """The sum of the calls' costs at the prices in force at ``at_ns`` (the request's start), or
    None when any call has no price: a model or provider the data does not know, an input or output
    count not reported, counts an instrumentation estimated, or a cache-read count not reported
    where cached input has its own price. ``prices``: configured prices (default: those of
    :func:`use_prices`), which take precedence over the bundled data. A request without model
    calls costs 0."""
    prices = configured_prices() if prices is None else prices
    total: int | None = 0
    used_configured = False
    for call in calls:
        configured = prices.get(f"{call.provider}/{call.model}")
        used_configured |= configured is not None
        cost = None if call.estimated else _call_nano_usd(call, at_ns, configured)
        if cost is None:
            total = None
        elif total is not None:
            total += cost
    version = price_data_version() or ""
    if used_configured:
        version = f"{version} + {CONFIGURED_MARK} {prices_digest(prices)}".strip(" +")
    return RequestCost(total, version)


def _call_nano_usd(call: CallUsage, at_ns: int, configured: Mapping[str, float] | None) -> int | None:
    inputs, outputs, cached = call.input_tokens, call.output_tokens, call.cached_tokens
    if inputs is None or outputs is None or inputs < 0 or outputs < 0:
        return None
    if cached is not None and not 0 <= cached <= inputs:
        return None
    price: Any = configured
    is_configured = configured is not None
    if configured is None:
        price = _model_rates(call.provider, call.model, at_ns // _DAY_NS)
        if price is None:
            return None
        if cached is None and isinstance(price, _Rates) and price.cached == price.input:
            cached = 0  # cache reads cost what uncached input does: the price cannot depend on them
    if cached is not None:
        return _priced(price, is_configured, inputs, cached, outputs)
    # Cache reads not reported: the price is still known when it does not depend on them.
    none_cached = _priced(price, is_configured, inputs, 0, outputs)
    all_cached = _priced(price, is_configured, inputs, inputs, outputs)
    return none_cached if none_cached == all_cached else None


def _priced(price: Any, configured: bool, inputs: int, cached: int, outputs: int) -> int:
    """Nano-dollars at ``price``: a configured price (``configured``), or :func:`_model_rates`'."""
    if configured:
        return round(configured_cost_usd(price, inputs, cached, outputs) * NANO_USD_PER_USD)
    if isinstance(price, _Rates):
        total = (inputs - cached) * price.input + cached * price.cached + outputs * price.output
    else:  # tiered by input length: genai-prices does the arithmetic
        total = price.calc_price(_usage(inputs, cached, outputs))["total_price"] * NANO_USD_PER_USD
    return int(total.to_integral_value())


_DAY_NS: Final = 86_400 * NANO_USD_PER_USD  # 10⁹ ns per second as well


@dataclass(frozen=True)
class _Rates:
    """A price linear in the counts: nano-dollars per uncached input, cached input, output token."""

    input: Decimal
    cached: Decimal
    output: Decimal


@lru_cache(maxsize=1024)
def _model_rates(provider: str, model: str, day: int) -> _Rates | Any | None:
    """genai-prices' price of ``model`` at ``provider`` in force on ``day`` (days since the epoch;
    prices change at most daily), None when the data does not know them. A linear price becomes
    three rates, read once from genai-prices (its own calculation costs ~0.25 ms a call); a price
    tiered by input length stays genai-prices' ``ModelPrice``."""
    if not model or not provider:
        return None
    try:
        from genai_prices import data_snapshot
        from genai_prices.types import TieredPrices
    except ImportError:
        return None
    try:
        _, info = data_snapshot.get_snapshot().find_provider_model(model, None, provider, None)
    except LookupError:
        return None
    price = info.get_prices(datetime.fromtimestamp(day * 86_400, UTC))
    if any(isinstance(value, TieredPrices) for value in vars(price).values()):
        return price
    million = 1_000_000

    def per_token(inputs: int, cached: int, outputs: int) -> Decimal:
        usd_per_million: Decimal = price.calc_price(_usage(inputs, cached, outputs))["total_price"]
        return usd_per_million * NANO_USD_PER_USD / million

    return _Rates(
        input=per_token(million, 0, 0), cached=per_token(million, million, 0), output=per_token(0, 0, million)
    )


def _usage(input_tokens: int, cached_tokens: int, output_tokens: int) -> Any:
    from genai_prices import Usage

    return Usage(input_tokens=input_tokens, cache_read_tokens=cached_tokens, output_tokens=output_tokens)


def usd(nano_usd: int | None) -> float | None:
    """Nano-dollars as US dollars."""
    return None if nano_usd is None else float(Decimal(nano_usd) / NANO_USD_PER_USD)


__all__ = [
    "CONFIGURED_MARK",
    "NANO_USD_PER_USD",
    "PRICE_PACKAGE",
    "CallUsage",
    "Prices",
    "RequestCost",
    "configured_cost_usd",
    "configured_prices",
    "price_data_version",
    "prices_digest",
    "request_cost",
    "request_cost_usd",
    "usd",
    "use_prices",
    "warm_prices",
]
