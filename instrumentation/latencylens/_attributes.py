"""Setting a call's result attributes on a span, at a fraction of ``Span.set_attributes``' cost.

The OpenTelemetry SDK's ``set_attributes`` cleans every value (a chain of type checks, lists made
tuples, strings cut to the length limit) under two locks: about 0.7 µs per attribute, and a model
call sets about 14, which is more than the rest of the decorator costs. Our values are built by the
adapters from a closed set of types, so on the SDK's own span, when no limit could change them (no
string length limit, room for them all), they are stored directly in the form cleaning would give
them. Anything else takes ``set_attributes``, with its limits, warnings and dropped counts: another
SDK's span or a subclass, a length limit, a full span, a value of another type, an ended span.
Values an adapter checked as it built them (``CheckedAttributes``) are not looked at again.
Tests pin that both ways store the same attributes.
"""

from __future__ import annotations

from typing import Any, Final

from opentelemetry.attributes import BoundedAttributes
from opentelemetry.trace import Span

from latencylens.providers._base import CheckedAttributes

_SDK_MODULE: Final = "opentelemetry.sdk.trace"
_SDK_SPANS: Final = frozenset({"Span", "_Span"})
SCALARS: Final = frozenset({str, int, float, bool})
"""The value types cleaning leaves as they are."""
_TYPE_CACHE_LIMIT: Final = 64
_NONE: Final[dict[str, Any]] = {}
_direct: dict[type, bool] = {}
"""Span type → whether it is the SDK's own span, whose attributes can be stored directly."""


def set_result_attributes(span: Span, attributes: dict[str, Any], own: dict[str, Any] | None = None) -> None:
    """``span.set_attributes(attributes)`` then ``span.set_attributes(own)``, stored directly where
    that gives the same result. ``attributes`` is the caller's to give away: its lists may be
    replaced by tuples. ``own``: attributes this package built itself, from ints, floats, bools and
    strings, under its own non-empty names (a stream's counts and times), which cleaning could not
    change, so they are stored without a look at each value."""
    cls = type(span)
    direct = _direct.get(cls)
    if direct is None:
        direct = cls.__module__ == _SDK_MODULE and cls.__name__ in _SDK_SPANS
        if len(_direct) < _TYPE_CACHE_LIMIT:
            _direct[cls] = direct
    if direct and _store_directly(span, attributes, own or _NONE):
        return
    span.set_attributes(attributes)
    if own:
        span.set_attributes(own)


def _store_directly(span: Any, attributes: dict[str, Any], own: dict[str, Any] = _NONE) -> bool:
    """Store ``attributes`` as cleaning would leave them (lists made tuples, in place); False, with
    nothing stored, when that could differ from ``set_attributes`` or the SDK's internals are not
    what this expects. An adapter's :class:`CheckedAttributes` are not looked at one by one."""
    if type(attributes) is CheckedAttributes:
        for key in attributes.lists:
            attributes[key] = tuple(attributes[key])
    elif not _as_cleaned(attributes):
        return False
    return _store(span, attributes, own)


def _as_cleaned(attributes: dict[str, Any]) -> bool:
    """Make lists tuples, in place, and say whether cleaning would leave every value as it is."""
    for key, value in attributes.items():
        kind = type(value)
        if type(key) is not str or not key:
            return False
        if kind in SCALARS:
            continue
        if (kind is not list and kind is not tuple) or not value:
            return False
        first = type(value[0])  # one type throughout: older SDKs drop mixed sequences
        if first not in SCALARS:
            return False
        for item in value:
            if type(item) is not first:
                return False
        if kind is list:
            attributes[key] = tuple(value)  # a new value for a key already there: allowed mid-loop
    return True


def unlimited_attributes(span: Any) -> BoundedAttributes | None:
    """The SDK span's attribute store when values as cleaning leaves them may go straight in (no
    length limit, not frozen); None for anything else."""
    bounded = getattr(span, "_attributes", None)
    if type(bounded) is not BoundedAttributes or bounded.max_value_len is not None or bounded._immutable:
        return None
    return bounded


def _store(span: Any, attributes: dict[str, Any], own: dict[str, Any]) -> bool:
    """Store values already as cleaning leaves them; False, with nothing stored, where the span
    could treat them otherwise (its limits, an ended span, internals not as expected)."""
    try:
        bounded = unlimited_attributes(span)
        if bounded is None:
            return False
        with span._lock:
            if span._end_time is not None:
                return False  # set_attributes warns, as it should
            with bounded._lock:
                stored = bounded._dict
                if bounded.maxlen is not None and len(stored) + len(attributes) + len(own) > bounded.maxlen:
                    return False
                for batch in (attributes, own):
                    if not stored.keys().isdisjoint(batch):
                        for key in batch:
                            if key in stored:  # a key set again moves to the end, as in the SDK
                                del stored[key]
                    stored.update(batch)
    except AttributeError:
        return False
    return True
