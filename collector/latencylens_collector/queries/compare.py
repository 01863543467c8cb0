"""Two time ranges side by side: how a metric's percentile moved, which component moved it, where.

Percentiles do not add up, so "of which" compares the same percentile of each component over the
same requests (those that have the metric); the components of a metric are listed in
:data:`queries.stats.METRIC_COMPONENTS`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final

from latencylens_collector.analysis.costs import NANO_USD_PER_USD
from latencylens_collector.analysis.explanation import format_ns
from latencylens_collector.queries._common import MAX_GROUPS, QUANTILES, QueryError, finite_int, group_key
from latencylens_collector.queries._sources import Extra, RollupUse, plan, union_sql
from latencylens_collector.queries.responses import CompareGroup, CompareResponse, CompareSide, ComponentDelta
from latencylens_collector.queries.scope import METRIC_COLUMNS, NO_FILTERS, Filters
from latencylens_collector.queries.stats import METRIC_COMPONENTS
from latencylens_collector.queries.times import NS_PER_S, Window, window
from latencylens_collector.storage.rollup import LEVELS
from latencylens_collector.storage.store import Store

DEFAULT_RANGE_NS: Final = 3600 * NS_PER_S
"""Without bounds, range B is the last hour and range A the hour before it."""
METRIC_LABELS: Final = {"e2e": "end-to-end", "ttft": "TTFT", "itl": "ITL"}


@dataclass
class _Side:
    """One range's value of the metric and of each of its components, for one group."""

    count: int
    value: int | None
    components: dict[str, int | None] = field(default_factory=dict)
    cost_nano_usd: int = 0
    """Summed over the ``priced`` requests."""
    priced: int = 0

    @property
    def cost_per_request_usd(self) -> float | None:
        return self.cost_nano_usd / self.priced / NANO_USD_PER_USD if self.priced else None


def compare(
    store: Store,
    project: str,
    *,
    now: datetime,
    a_since: str | None = None,
    a_until: str | None = None,
    b_since: str | None = None,
    b_until: str | None = None,
    filters: Filters = NO_FILTERS,
    by: Sequence[str] = (),
    metric: str = "ttft",
    quantile: str = "p95",
    rollup: RollupUse = "auto",
) -> CompareResponse:
    """Compare ``metric``'s ``quantile`` in range A (before) and range B (after)."""
    if metric not in METRIC_COLUMNS:
        raise QueryError(f"unknown metric {metric!r}; allowed: {', '.join(METRIC_COLUMNS)}")
    if quantile not in QUANTILES:
        raise QueryError(f"unknown quantile {quantile!r}; allowed: {', '.join(QUANTILES)}")
    b = window(now, b_since, b_until, default_ns=DEFAULT_RANGE_NS, label="b_")
    a = window(
        now, a_since, a_until, default_ns=b.until_ns - b.since_ns, default_until_ns=b.since_ns, label="a_"
    )
    names = METRIC_COMPONENTS[metric]

    (a_all, a_groups), (b_all, b_groups) = _sides(store, project, a, b, filters, by, metric, quantile, rollup)
    components = [
        ComponentDelta(
            name=name,
            a_ns=a_all.components.get(name),
            b_ns=b_all.components.get(name),
            delta_ns=_delta(a_all.components.get(name), b_all.components.get(name)),
        )
        for name in names
    ]
    components.sort(key=lambda c: (c.delta_ns is None, -abs(c.delta_ns or 0)))
    groups = _groups(a_groups, b_groups, by, names) if by else []
    delta = _delta(a_all.value, b_all.value)
    return CompareResponse(
        metric=metric,
        quantile=quantile,
        a=_side(a_all),
        b=_side(b_all),
        delta_ns=delta,
        cost_ratio=cost_ratio(a_all, b_all),
        components=components,
        groups=groups,
        summary=summary(metric, quantile, delta, components, groups, by),
    )


def _side(side: _Side) -> CompareSide:
    return CompareSide(
        count=side.count,
        value_ns=side.value,
        cost_per_request_usd=side.cost_per_request_usd,
        no_price=side.count - side.priced,
    )


def cost_ratio(a: _Side | None, b: _Side | None) -> float | None:
    """B's cost per priced request over A's; None without a priced request on either side (or a
    free A, whose ratio means nothing)."""
    a_cost = a.cost_per_request_usd if a else None
    b_cost = b.cost_per_request_usd if b else None
    return b_cost / a_cost if a_cost and b_cost is not None else None


def _delta(a: int | None, b: int | None) -> int | None:
    return b - a if a is not None and b is not None else None


_Range = tuple[_Side, dict[tuple[str, ...], _Side]]
"""One range's whole and its groups by key."""
_SIDES: Final = ("a", "b")
_IN_RANGE: Final = (
    "({column} >= fromUnixTimestamp64Nano({{{side}_since:Int64}}, 'UTC')"
    " AND {column} < fromUnixTimestamp64Nano({{{side}_until:Int64}}, 'UTC'))"
)
"""Whether a row (``start_time``) or a rolled-up hour (``hour``, wholly inside or outside) is in
a range."""


def _sides(
    store: Store,
    project: str,
    a: Window,
    b: Window,
    filters: Filters,
    by: Sequence[str],
    metric: str,
    quantile: str,
    rollup: RollupUse = "auto",
) -> tuple[_Range, _Range]:
    """Both ranges, the whole and (with ``by``) each group, in one pass over rolled-up hours and
    request rows (:mod:`queries._sources`).

    Partial aggregates carry an ``in_a``/``in_b`` flag each and are merged with ``-MergeIf`` per
    range (ranges may overlap). ``ROLLUP`` derives the whole by merging the groups' states, cheaper
    than ``GROUPING SETS``, which aggregates once per set; its intermediate levels (``by`` of two
    or more fields) are dropped by ``HAVING``.
    """
    index = list(QUANTILES).index(quantile) + 1  # states hold every level: merge them alike
    names = METRIC_COMPONENTS[metric]
    has_metric = {"e2e": "1", "ttft": "has_ttft", "itl": "has_itl"}[metric]
    source = plan(store, project, [a, b], by, filters, rollup=rollup)
    extras = [
        Extra(
            f"in_{side}",
            _IN_RANGE.format(side=side, column="start_time"),
            _IN_RANGE.format(side=side, column="hour"),
        )
        for side in _SIDES
    ]
    inner, params = union_sql(
        store,
        project,
        source,
        fields=by,
        filters=filters,
        extras=extras,
        metrics=(metric, *names),
        sums=False,
        costs=True,
    )
    params["limit"] = MAX_GROUPS + 2
    for side, span in zip(_SIDES, (a, b), strict=True):
        params.update({f"{side}_since": span.since_ns, f"{side}_until": span.until_ns})
    measures = []
    for side in _SIDES:
        merge = f"quantilesBFloat16MergeIf({LEVELS})"
        measures += [
            f"sumIf(requests, in_{side}) AS n_{side}",
            f"{merge}(q_{metric}, in_{side})[{index}] AS value_{side}",
            *(f"{merge}(q_{name}, {has_metric} AND in_{side})[{index}] AS c_{side}_{name}" for name in names),
            f"sumIf(sum_cost, in_{side}) AS cost_{side}",
            f"sumIf(priced, in_{side}) AS priced_{side}",
        ]
    keys = ", ".join(f"k_{field}" for field in by)
    whole_mask = (1 << len(by)) - 1
    rolled = f"grouping({keys}) AS rolled, " if by else "0 AS rolled, "
    group_sql = f"GROUP BY ROLLUP({keys}) HAVING rolled IN (0, {whole_mask})" if by else ""
    sql = (
        f"SELECT {''.join(f'k_{field}, ' for field in by)}{rolled}{', '.join(measures)} "
        f"FROM ({inner}) {group_sql} LIMIT {{limit:UInt32}}"
    )
    rows = store.query(sql, params)
    if len(rows) > MAX_GROUPS + 1:
        raise QueryError(f"more than {MAX_GROUPS} groups: filter or group by fewer fields")
    wholes = {side: _Side(0, None) for side in _SIDES}
    groups: dict[str, dict[tuple[str, ...], _Side]] = {side: {} for side in _SIDES}
    for row in rows:
        is_whole = not by or int(row["rolled"]) == whole_mask
        for side in _SIDES:
            count = int(row[f"n_{side}"])
            if count == 0:
                continue
            found = _Side(
                count=count,
                value=finite_int(row[f"value_{side}"]),
                components={name: finite_int(row[f"c_{side}_{name}"]) for name in names},
                cost_nano_usd=int(row[f"cost_{side}"]),
                priced=int(row[f"priced_{side}"]),
            )
            if is_whole:
                wholes[side] = found
            else:
                groups[side][tuple(group_key(row, by).values())] = found
    return (wholes["a"], groups["a"]), (wholes["b"], groups["b"])


def _groups(
    a: Mapping[tuple[str, ...], _Side],
    b: Mapping[tuple[str, ...], _Side],
    by: Sequence[str],
    names: Sequence[str],
) -> list[CompareGroup]:
    groups = []
    for key in sorted(set(a) | set(b)):
        left, right = a.get(key), b.get(key)
        deltas = {
            name: _delta(left.components.get(name), right.components.get(name))
            for name in names
            if left is not None and right is not None
        }
        known = {name: d for name, d in deltas.items() if d is not None}
        top = max(known, key=lambda name: abs(known[name])) if known else None
        groups.append(
            CompareGroup(
                key=dict(zip(by, key, strict=True)),
                a_ns=left.value if left else None,
                b_ns=right.value if right else None,
                delta_ns=_delta(left.value if left else None, right.value if right else None),
                top_component=top,
                top_component_delta_ns=known[top] if top else None,
                a_cost_per_request_usd=left.cost_per_request_usd if left else None,
                b_cost_per_request_usd=right.cost_per_request_usd if right else None,
                cost_ratio=cost_ratio(left, right),
            )
        )
    groups.sort(key=lambda g: (g.delta_ns is None, -abs(g.delta_ns or 0)))
    return groups


def summary(
    metric: str,
    quantile: str,
    delta: int | None,
    components: Sequence[ComponentDelta],
    groups: Sequence[CompareGroup],
    by: Sequence[str],
) -> str:
    """ "p95 TTFT +180 ms, of which queue +150 ms on provider groq, model X"."""
    label = f"{quantile} {METRIC_LABELS[metric]}"
    if delta is None:
        return f"{label}: not enough requests with this metric in both ranges to compare"
    text = f"{label} {signed(delta)}"
    top = components[0] if components and components[0].delta_ns is not None else None
    if top is None or top.delta_ns is None:
        return text
    text += f", of which {top.name} {signed(top.delta_ns)}"
    where = _where(top.name, top.delta_ns, groups)
    if where is not None:
        text += " on " + ", ".join(f"{field} {where.key[field]}" for field in by)
    return text


def _where(name: str, delta: int, groups: Sequence[CompareGroup]) -> CompareGroup | None:
    """The group where ``name`` moved most in the same direction as overall."""
    same = [
        g
        for g in groups
        if g.top_component == name
        and g.top_component_delta_ns is not None
        and (g.top_component_delta_ns > 0) == (delta > 0)
        and g.top_component_delta_ns != 0
    ]
    return max(same, key=lambda g: abs(g.top_component_delta_ns or 0)) if same else None


def signed(ns: int) -> str:
    return ("+" if ns >= 0 else "−") + format_ns(abs(ns))
