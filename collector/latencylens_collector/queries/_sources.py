"""Where an aggregate reads: rolled-up hours where a fresh rollup fits, request rows elsewhere.

Both sources yield the same columns (group keys, extra per-row flags, ``has_ttft``/``has_itl``, the
request count, ``quantilesBFloat16`` states and sums), unioned and merged by the caller's outer
query, so a percentile is the same whichever mix was read (see :mod:`latencylens_collector.storage.rollup`).
An hour comes from the rollup only when it lies wholly inside or wholly outside every window (so a
per-window flag can be decided from the hour), its latest build is fresher than its last insert,
and a grouping keeping exactly the needed dimensions is built; everything else is read from
``requests FINAL``, in as few time ranges as possible.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from latencylens_collector.queries._common import FILTER_COLUMNS
from latencylens_collector.queries.scope import Filters, RequestScope
from latencylens_collector.queries.times import Window
from latencylens_collector.storage.rollup import (
    HOUR_S,
    MAX_KEPT_FIELDS,
    NS_PER_S,
    cost_columns,
    kept_mask,
    state_columns,
    sum_columns,
)
from latencylens_collector.storage.store import Store

HOUR_NS: Final = HOUR_S * NS_PER_S
RollupUse = Literal["auto", "always", "never"]
"""``auto``: the rollup where it is fresh and cheaper than rows; ``always``: wherever it is fresh
(tests compare it with ``never``, which reads only rows)."""
MERGE_COST_PER_STATE_VALUE: Final = 4
"""How many request rows reading costs as much as merging one value of one rollup state
(measured on the 1 M-request benchmark: ≈ 60 ns per merged value against ≈ 15 ns per row value)."""

_HOURS: Final = (
    "project = {project:String}"
    " AND hour >= toDateTime({h_lo:UInt32}, 'UTC') AND hour <= toDateTime({h_hi:UInt32}, 'UTC')"
)
"""The project's hours from ``h_lo`` to ``h_hi`` (unix seconds), in the rollup's tables."""


@dataclass(frozen=True)
class Extra:
    """A per-row column computed from ``start_time`` for rows and from ``hour`` for the rollup."""

    name: str
    raw_sql: str
    rollup_sql: str


@dataclass(frozen=True)
class Source:
    """The plan: which grouping and hours come from the rollup, which time ranges from rows."""

    kept: int | None = None
    hours: tuple[int, ...] = ()
    builds: tuple[int, ...] = ()
    raw_ranges: tuple[tuple[int, int], ...] = field(default_factory=tuple)

    @property
    def rolled_up(self) -> bool:
        return self.kept is not None and bool(self.hours)


def plan(
    store: Store,
    project: str,
    windows: Sequence[Window],
    fields: Sequence[str],
    filters: Filters,
    *,
    bucket_s: int | None = None,
    rollup: RollupUse = "auto",
) -> Source:
    """Decide the sources of an aggregate over ``windows`` grouped by ``fields``."""
    merged = _merge([(w.since_ns, w.until_ns) for w in windows])
    needed = set(fields) | filters.fields
    if (
        rollup == "never"
        or len(needed) > MAX_KEPT_FIELDS
        or (bucket_s is not None and bucket_s % HOUR_S != 0)
    ):
        return Source(raw_ranges=tuple(merged))
    candidates = [h for h in _whole_hours(merged) if all(_inside_or_apart(h, w) for w in windows)]
    if not candidates:
        return Source(raw_ranges=tuple(merged))
    kept = kept_mask(needed)
    params: dict[str, Any] = {"project": project, "h_lo": candidates[0], "h_hi": candidates[-1], "kept": kept}
    builds_sql = (
        "SELECT toUnixTimestamp(hour) AS hour_s, build, toUnixTimestamp64Micro(covers_until) AS covers_us,"
        " inserted_rows, requests, state_values[{kept:UInt8}] AS state_values"
        f" FROM {store.table('requests_rollup_builds')} FINAL WHERE {_HOURS}"
    )
    touched_sql = (
        "SELECT toUnixTimestamp(hour) AS hour_s, toUnixTimestamp64Micro(max(last_insert)) AS last_us,"
        " sum(inserted_rows) AS inserted_rows"
        f" FROM {store.table('requests_touched')} WHERE {_HOURS} GROUP BY hour"
    )
    builds = {int(row["hour_s"]): row for row in store.query(builds_sql, params)}
    touched = {int(row["hour_s"]): row for row in store.query(touched_sql, params)}
    fresh = [builds[h] for h in candidates if h in builds and _covers(builds[h], touched.get(h))]
    requests = sum(int(row["requests"]) for row in fresh)
    state_values = sum(int(row["state_values"]) for row in fresh)
    if not fresh or (rollup == "auto" and state_values * MERGE_COST_PER_STATE_VALUE >= requests):
        return Source(raw_ranges=tuple(merged))  # nothing fresh, or merging costs more than rows
    hours = [int(row["hour_s"]) for row in fresh]
    rolled = [(h * NS_PER_S, (h + HOUR_S) * NS_PER_S) for h in hours]
    return Source(
        kept,
        tuple(hours),
        tuple(sorted(int(row["build"]) for row in fresh)),
        tuple(_subtract(merged, rolled)),
    )


def _covers(build: dict[str, Any], touched: dict[str, Any] | None) -> bool:
    """Whether a build still covers its hour: no row inserted since it started, by count (no clock
    involved) and by stamp (an insert counted but not yet visible when the build read the rows);
    see :mod:`latencylens_collector.storage.rollup`."""
    if touched is None:
        return int(build["inserted_rows"]) == 0
    same_count = int(touched["inserted_rows"]) == int(build["inserted_rows"])
    return same_count and int(touched["last_us"]) < int(build["covers_us"])


_ROLLUP_WHERE: Final = f"{_HOURS} AND kept = {{kept:UInt8}} AND build IN {{builds:Array(UInt64)}}"


def union_sql(
    store: Store,
    project: str,
    source: Source,
    *,
    fields: Sequence[str],
    filters: Filters,
    extras: Sequence[Extra] = (),
    metrics: Sequence[str],
    sums: bool,
    costs: bool = False,
) -> tuple[str, dict[str, Any]]:
    """``SELECT … UNION ALL SELECT …`` of per-group partial aggregates (a subquery for the caller
    to merge) and its parameters. Columns: ``k_<field>``, the extras, ``has_ttft``, ``has_itl``,
    ``requests``, ``q_<metric>`` states, with ``sums`` the additive measures and with ``costs`` the
    cost's state, sum and priced count (:func:`~latencylens_collector.storage.rollup.cost_columns`)."""
    filter_sql, params = filters.sql()
    params["project"] = project
    keys = [f"{FILTER_COLUMNS[f]} AS k_{f}" for f in fields]
    names = [f"k_{f}" for f in fields] + [e.name for e in extras]
    states = state_columns(metrics)
    additive = [*(sum_columns() if sums else []), *(cost_columns() if costs else [])]
    parts = []
    if source.raw_ranges:
        select = [
            *keys,
            *(f"{e.raw_sql} AS {e.name}" for e in extras),
            "ttft_ns IS NOT NULL AS has_ttft",
            "itl_ns IS NOT NULL AS has_itl",
            "count() AS requests",
            *(f"{expr} AS {name}" for name, expr in (*states, *additive)),
        ]
        scope = RequestScope(project, [Window(lo, hi) for lo, hi in source.raw_ranges], filters)
        rows_sql, rows_params = scope.collapsed(store, ", ".join(select))
        params.update(rows_params)
        parts.append(f"{rows_sql} GROUP BY {', '.join([*names, 'has_ttft', 'has_itl'])}")
    if source.rolled_up:
        assert source.kept is not None
        params.update(
            kept=source.kept, h_lo=source.hours[0], h_hi=source.hours[-1], builds=list(source.builds)
        )
        select = [
            *keys,
            *(f"{e.rollup_sql} AS {e.name}" for e in extras),
            "has_ttft",
            "has_itl",
            "requests",
            *(name for name, _ in (*states, *additive)),
        ]
        rollup_table = store.table("requests_rollup")
        parts.append(f"SELECT {', '.join(select)} FROM {rollup_table} WHERE {_ROLLUP_WHERE}{filter_sql}")
    return " UNION ALL ".join(parts), params


def _merge(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def _whole_hours(ranges: Sequence[tuple[int, int]]) -> list[int]:
    """Hours (unix seconds) lying wholly inside one of ``ranges``."""
    hours: list[int] = []
    for lo, hi in ranges:
        first = -(-lo // HOUR_NS)
        last = hi // HOUR_NS  # exclusive
        hours.extend(h * HOUR_S for h in range(first, last))
    return hours


def _inside_or_apart(hour_s: int, window: Window) -> bool:
    lo, hi = hour_s * NS_PER_S, (hour_s + HOUR_S) * NS_PER_S
    return (window.since_ns <= lo and hi <= window.until_ns) or hi <= window.since_ns or lo >= window.until_ns


def _subtract(ranges: Sequence[tuple[int, int]], holes: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """``ranges`` minus ``holes`` (both sorted, holes inside the ranges), adjacent holes joined."""
    out = []
    joined = _merge(list(holes))
    for lo, hi in ranges:
        start = lo
        for h_lo, h_hi in joined:
            if h_hi <= start or h_lo >= hi:
                continue
            if h_lo > start:
                out.append((start, h_lo))
            start = max(start, h_hi)
        if start < hi:
            out.append((start, hi))
    return out
