"""Cutting text to size: one value (:func:`truncate_utf8`) and one span's attributes (:func:`fit`).

A span's attributes and its events' attributes share one budget of UTF-8 bytes (keys and values).
A span over it is kept, with its largest values cut to a common length (water-filling): the
largest length ``c`` is found such that ``Σ keys + Σ min(value, c)`` fits, and only values longer
than ``c`` are cut (each ends with the truncation marker). Small values — ids, model names, token
counts, timings, everything attribution reads — are never touched. When even that cannot fit (the
keys alone are over the budget, or ``c`` would leave almost nothing of each value), attributes are
kept smallest first while they fit and the rest are dropped. What was removed is written on the
span (:data:`~latencylens.semconv.SPAN_BUDGET_CUT_BYTES`,
:data:`~latencylens.semconv.SPAN_BUDGET_DROPPED_ATTRIBUTES`).

Sizes are computed exactly only for a span whose text could be over the budget (four bytes per
character at most): the usual span costs one C-level pass over its lengths.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import Final

from latencylens import semconv
from latencylens_collector.analysis.records import SpanEvent

TRUNCATION_MARKER: Final = "…[truncated {dropped} bytes]"
_MARKER_RESERVE: Final = len(TRUNCATION_MARKER.format(dropped=10**12).encode())
MIN_CUT_VALUE_BYTES: Final = 2 * _MARKER_RESERVE
"""A value is never cut shorter than this (it would be mostly marker): attributes are dropped instead."""


def truncate_utf8(value: str, limit: int) -> str:
    """``value`` cut to at most ``limit`` UTF-8 bytes plus a marker; ``value`` itself when short."""
    return cut_utf8(value, limit)[0]


def cut_utf8(value: str, limit: int) -> tuple[str, int]:
    """:func:`truncate_utf8` and how many bytes it dropped (0: ``value`` itself)."""
    data = value.encode("utf-8")
    if len(data) <= limit:
        return value, 0
    kept = data[:limit].decode("utf-8", errors="ignore")  # drops a character cut in half
    dropped = len(data) - len(kept.encode("utf-8"))
    return kept + TRUNCATION_MARKER.format(dropped=dropped), dropped


@dataclass(frozen=True)
class Fitted:
    """A span's attributes and events within the budget, and what it took."""

    attributes: dict[str, str]
    events: tuple[SpanEvent, ...]
    cut_bytes: int = 0
    """UTF-8 bytes removed (values cut or attributes dropped)."""
    dropped: int = 0
    """Attributes dropped whole."""


def could_exceed(attributes: dict[str, str], events: Sequence[SpanEvent], budget: int) -> bool:
    """Whether the text might be over ``budget`` bytes (never False when it is)."""
    chars = sum(map(len, attributes)) + sum(map(len, attributes.values()))
    for event in events:
        chars += len(event.name) + sum(map(len, event.attributes)) + sum(map(len, event.attributes.values()))
    return chars * 4 > budget


def fit(attributes: dict[str, str], events: Sequence[SpanEvent], budget: int) -> Fitted | None:
    """The span's attributes and events cut to ``budget`` bytes, or None when they fit already.
    Marks the span with what was removed."""
    if not could_exceed(attributes, events, budget):
        return None
    slots = [(-1, key, value) for key, value in attributes.items()]
    for index, event in enumerate(events):
        slots.extend((index, key, value) for key, value in event.attributes.items())
    key_sizes = [len(key.encode("utf-8")) for _, key, _ in slots]
    value_sizes = [len(value.encode("utf-8")) for _, _, value in slots]
    names = sum(len(event.name.encode("utf-8")) for event in events)  # kept whatever happens
    if names + sum(key_sizes) + sum(value_sizes) <= budget:
        return None
    cap = _water_level(value_sizes, budget - names - sum(key_sizes))
    kept: list[tuple[int, str, str]] = []
    cut_bytes = dropped = 0
    if cap is not None and cap >= MIN_CUT_VALUE_BYTES:
        for (where, key, value), size in zip(slots, value_sizes, strict=True):
            if size > cap:
                value, removed = cut_utf8(value, cap - _MARKER_RESERVE)
                cut_bytes += removed
            kept.append((where, key, value))
    else:  # smallest first while they fit
        order = sorted(range(len(slots)), key=lambda i: key_sizes[i] + value_sizes[i])
        room, keep = budget - names, set()
        for i in order:
            size = key_sizes[i] + value_sizes[i]
            if size > room:
                break
            room -= size
            keep.add(i)
        for i, slot in enumerate(slots):
            if i in keep:
                kept.append(slot)
            else:
                dropped += 1
                cut_bytes += key_sizes[i] + value_sizes[i]
    return _rebuild(kept, events, cut_bytes, dropped)


def _water_level(sizes: list[int], room: int) -> int | None:
    """The largest ``c`` with ``Σ min(size, c) <= room``, or None when ``room`` is negative."""
    if room < 0:
        return None
    ordered = sorted(sizes)
    before = [0, *accumulate(ordered)]
    count = len(ordered)
    for index, size in enumerate(ordered):
        # values from ``index`` on are all cut to c: before[index] + c * (count - index) <= room
        if before[index] + size * (count - index) > room:
            return (room - before[index]) // (count - index)
    return ordered[-1] if ordered else 0


def _rebuild(
    kept: list[tuple[int, str, str]], events: Sequence[SpanEvent], cut_bytes: int, dropped: int
) -> Fitted:
    attributes: dict[str, str] = {}
    event_attributes: list[dict[str, str]] = [{} for _ in events]
    for where, key, value in kept:
        (attributes if where < 0 else event_attributes[where])[key] = value
    attributes[semconv.SPAN_BUDGET_CUT_BYTES] = str(cut_bytes)
    if dropped:
        attributes[semconv.SPAN_BUDGET_DROPPED_ATTRIBUTES] = str(dropped)
    fitted_events = tuple(
        SpanEvent(event.name, event.time_ns, values)
        for event, values in zip(events, event_attributes, strict=True)
    )
    return Fitted(attributes, fitted_events, cut_bytes, dropped)
