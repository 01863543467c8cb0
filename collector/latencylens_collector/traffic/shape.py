"""The shape of recorded traffic: when each request arrived and how many tokens it moved.

A shape is all a replay needs and all LatencyLens stores: arrival offsets and token counts, never
prompt text. Requests are selected from stored request rows through :class:`RequestScope` (every
value bound as a parameter), only rows with a model call and known token counts, oldest first.
A sample of N is a deterministic pseudo-random subset (hash of the trace id and a seed), kept in
arrival order, so the same selection gives the same shape.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Final

from latencylens_collector.queries.scope import Filters, RequestScope
from latencylens_collector.queries.times import Window
from latencylens_collector.storage.store import Store

MAX_SHAPES: Final = 100_000
"""Most requests one selection returns; a larger window is sampled (``sample``)."""
SHAPE_FIELDS: Final = (
    "lower(hex(trace_id)) AS trace_hex, toUnixTimestamp64Nano(start_time) AS start_ns, "
    "name, model, provider, input_tokens, output_tokens, cache_read_input_tokens, model_calls"
)


@dataclass(frozen=True)
class RequestShape:
    """One recorded request as a replay sees it: arrival offset (ns after the first selected
    request) and token counts (cached input tokens are a subset of input tokens)."""

    offset_ns: int
    input_tokens: int
    output_tokens: int
    cached_input_tokens: int = 0
    source_trace_id: str = ""
    route: str = ""
    model: str = ""
    provider: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RequestShape:
        """From :meth:`to_json`'s form; raises ValueError on a missing or negative count."""
        try:
            shape = cls(
                offset_ns=int(data["offset_ns"]),
                input_tokens=int(data["input_tokens"]),
                output_tokens=int(data["output_tokens"]),
                cached_input_tokens=int(data.get("cached_input_tokens") or 0),
                source_trace_id=str(data.get("source_trace_id") or ""),
                route=str(data.get("route") or ""),
                model=str(data.get("model") or ""),
                provider=str(data.get("provider") or ""),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a request shape: {exc}") from None
        shape.check()
        return shape

    def check(self) -> None:
        if min(self.offset_ns, self.input_tokens, self.output_tokens, self.cached_input_tokens) < 0:
            raise ValueError("offsets and token counts of a request shape are never negative")
        if self.cached_input_tokens > self.input_tokens:
            raise ValueError("cached input tokens exceed input tokens")


def select_shapes(
    store: Store,
    project: str,
    window: Window,
    filters: Filters,
    *,
    sample: int | None = None,
    seed: int = 0,
) -> list[RequestShape]:
    """Recorded requests of ``project`` in ``window`` matching ``filters``, oldest first; at most
    ``sample`` of them (all when None, never more than :data:`MAX_SHAPES`)."""
    limit = min(sample, MAX_SHAPES) if sample is not None else MAX_SHAPES
    latest, params = RequestScope(project, windows=(window,), filters=filters).latest(store, SHAPE_FIELDS)
    sql = (
        f"SELECT * FROM ({latest}) WHERE model_calls > 0 AND output_tokens > 0 "
        "ORDER BY sipHash64(trace_hex, {seed:UInt64}) LIMIT {limit:UInt32}"
    )
    rows = store.query(sql, {**params, "seed": seed, "limit": limit})
    return shapes_of(rows)


def shapes_of(rows: Sequence[Mapping[str, Any]]) -> list[RequestShape]:
    """Request rows (``SHAPE_FIELDS``) as shapes in arrival order, offsets from the first."""
    ordered = sorted(rows, key=lambda row: (int(row["start_ns"]), str(row["trace_hex"])))
    if not ordered:
        return []
    first = int(ordered[0]["start_ns"])
    shapes = []
    for row in ordered:
        input_tokens = int(row["input_tokens"] or 0)
        shapes.append(
            RequestShape(
                offset_ns=int(row["start_ns"]) - first,
                input_tokens=input_tokens,
                output_tokens=int(row["output_tokens"] or 0),
                cached_input_tokens=min(int(row["cache_read_input_tokens"] or 0), input_tokens),
                source_trace_id=str(row["trace_hex"]),
                route=str(row["name"]),
                model=str(row["model"]),
                provider=str(row["provider"]),
            )
        )
    return shapes


@dataclass(frozen=True)
class Totals:
    """What a replay of some shapes sends: requests and tokens."""

    requests: int
    input_tokens: int
    output_tokens: int
    cached_input_tokens: int


def totals(shapes: Sequence[RequestShape]) -> Totals:
    return Totals(
        requests=len(shapes),
        input_tokens=sum(s.input_tokens for s in shapes),
        output_tokens=sum(s.output_tokens for s in shapes),
        cached_input_tokens=sum(s.cached_input_tokens for s in shapes),
    )


__all__ = ["MAX_SHAPES", "SHAPE_FIELDS", "RequestShape", "Totals", "select_shapes", "shapes_of", "totals"]
