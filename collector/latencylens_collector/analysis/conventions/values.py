"""Reading attribute values, which the collector stores as text whatever their OTLP type."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

MAX_INT: Final = 10**18
"""The largest count or ns an attribute is read as (≈ 31 years in ns): a request row's columns are
Int64, and a row adds a few of them up."""


def parse_int(value: str | None) -> int | None:
    """An attribute value as a count or ns, an integer from 0 to :data:`MAX_INT` (``"12"``,
    ``"1.5e3"``), or None: every integer read from attributes is one, so a negative or absurd
    number from a hostile or broken sender is not a number to attribute (nor to store)."""
    if value is None or value == "":
        return None
    try:
        number = int(value)
    except ValueError:
        try:
            number = round(float(value))
        except (ValueError, OverflowError):
            return None
    return number if 0 <= number <= MAX_INT else None


def first_int(attributes: Mapping[str, str], *keys: str) -> int | None:
    """The first of ``keys`` holding an integer."""
    for key in keys:
        text = attributes.get(key)
        if text:  # most keys are absent: no call for them
            value = parse_int(text)
            if value is not None:
                return value
    return None


def seconds_to_ns(value: str | None) -> int | None:
    """A duration in (fractional) seconds as integer ns; None when absent, negative, past
    :data:`MAX_INT` ns or not a number."""
    return _scaled_ns(value, 1e9)


def first_seconds_ns(attributes: Mapping[str, str], *keys: str) -> int | None:
    """The first of ``keys`` holding a duration in seconds, as ns."""
    return _first_scaled_ns(attributes, keys, 1e9)


def first_ms_ns(attributes: Mapping[str, str], *keys: str) -> int | None:
    """The first of ``keys`` holding a duration in (fractional) milliseconds, as ns."""
    return _first_scaled_ns(attributes, keys, 1e6)


def _scaled_ns(value: str | None, ns_per_unit: float) -> int | None:
    if value is None or value == "":
        return None
    try:
        amount = float(value)
    except ValueError:
        return None
    ns = amount * ns_per_unit
    if not 0 <= ns <= MAX_INT:  # NaN and infinities fail the comparison too
        return None
    return round(ns)


def _first_scaled_ns(attributes: Mapping[str, str], keys: tuple[str, ...], ns_per_unit: float) -> int | None:
    for key in keys:
        text = attributes.get(key)
        if text:
            value = _scaled_ns(text, ns_per_unit)
            if value is not None:
                return value
    return None


def first_text(attributes: Mapping[str, str], *keys: str) -> str:
    """The first non-empty value among ``keys``, else ``""``."""
    for key in keys:
        value = attributes.get(key)
        if value:
            return value
    return ""


def is_true(attributes: Mapping[str, str], *keys: str) -> bool:
    """Whether any of ``keys`` is a true boolean (stored as ``true``)."""
    for key in keys:
        value = attributes.get(key)
        if value and value.lower() == "true":
            return True
    return False
