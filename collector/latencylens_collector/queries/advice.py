"""What to change first: per group, each lever's effect on p50/p95 end-to-end time and TTFT.

Four reads of request rows, all through :class:`RequestScope` (one row per trace, ``FINAL``):

1. *measure*: per group, percentiles of end-to-end time, TTFT, queue, network and output tokens,
   the median time per output token, critical-path time per component, and prefill time and
   uncached input tokens summed over uncached and cached requests apart;
2. *hours*: per group and UTC hour of day, requests and median queue; *network*: per group,
   network time per endpoint (the model span's ``server.address``) and of requests after an idle
   gap to their endpoint versus sooner ones (connection reuse);
3. *alternatives*: the same window and service per (route, model, provider), whatever the route,
   model and provider filters: where else this traffic could go, and prefill rates to fall back on;
4. *what-if*: every row of the advised groups replayed with each lever's parameters
   (:class:`analysis.advice.WhatIf`, bound as arrays indexed by group), the per-row arithmetic of
   :mod:`analysis.advice` in SQL, and p50/p95 measured again.

Percentiles are exact (``quantilesExact``: the value at 0-based position ⌊q·n⌋ of the n sorted
values), the same before and after a change, so an estimate is a difference of two percentiles of
the same requests. Rows are read directly (the hourly rollup holds no per-row values to replay).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any, Final

from latencylens import semconv
from latencylens_collector.analysis import advice as levers
from latencylens_collector.analysis.advice import (
    Alternative,
    EndpointNetwork,
    GroupMeasures,
    MeanUsage,
    Percentiles,
    PrefillSums,
    ReuseSplit,
)
from latencylens_collector.analysis.attribution import COMPONENTS
from latencylens_collector.analysis.costs import Prices, price_data_version
from latencylens_collector.queries._common import FILTER_COLUMNS, MAX_GROUPS, QueryError, finite_int
from latencylens_collector.queries.advice_responses import (
    AdviceChange,
    AdviceEndpoint,
    AdviceGroup,
    AdviceLever,
    AdvicePercentiles,
    AdviceResponse,
    SmallGroup,
)
from latencylens_collector.queries.scope import NO_FILTERS, Filters, RequestScope
from latencylens_collector.queries.times import from_ns, window
from latencylens_collector.storage.store import Store

DEFAULT_BY: Final = ("route", "model")
DEFAULT_MIN_REQUESTS: Final = 20
"""Fewest requests a group needs to be advised on."""
MAX_MIN_REQUESTS: Final = 1_000_000
METHOD: Final = (
    "each estimate replays the group's own stored request rows with the change applied and measures "
    "p50/p95 again; the change is after − before over the same requests (negative is faster)",
    "percentiles are exact: the value at 0-based position floor(q·n) of the n sorted values",
    "a lever is recommended when it cuts p95 end-to-end time or p95 TTFT by at least 5 %",
    "a part is considered when it is at least 20 % of the group's end-to-end time",
)
_PART_SUMS: Final = ", ".join(f"sum({name}_ns) AS s_{name}" for name in COMPONENTS)
_ROW_COLUMNS: Final = (
    "trace_id, busy_tool_ns + busy_retrieval_ns AS busy_app_ns, e2e_ns, ttft_ns, itl_ns, "
    "output_tokens, input_tokens, cache_read_input_tokens, "
    f"{', '.join(f'{name}_ns' for name in COMPONENTS)}, "
    "name AS r_route, model AS r_model, provider AS r_provider, toHour(start_time) AS hour_utc, "
    # Time per output token: the measured ITL, else decode time over the n − 1 gaps of n tokens.
    "if(itl_ns > 0, toFloat64(itl_ns), if(output_tokens > 1 AND decode_ns > 0, "
    "decode_ns / (output_tokens - 1), NULL)) AS per_token_ns, "
    # Uncached input tokens of a request whose provider split prefill and reported both counts.
    "if(prefill_ns > 0 AND input_tokens > cache_read_input_tokens, "
    "input_tokens - cache_read_input_tokens, NULL) AS uncached"
)
_COUNTED: Final = "input_tokens IS NOT NULL AND output_tokens IS NOT NULL"
_USAGE: Final = (
    f"countIf({_COUNTED}) AS u_n, round(avgIf(input_tokens, {_COUNTED})) AS u_in, "
    f"round(avgIf(ifNull(cache_read_input_tokens, 0), {_COUNTED})) AS u_cached, "
    f"round(avgIf(output_tokens, {_COUNTED})) AS u_out"
)
"""Mean token counts per request (for its cost) over rows that reported input and output counts."""
_PREFILL_SUMS: Final = (
    "countIf(uncached IS NOT NULL{cond}) AS {p}_n, sumIf(prefill_ns, uncached IS NOT NULL{cond}) AS {p}_ns, "
    "sumIf(uncached, uncached IS NOT NULL{cond}) AS {p}_tok"
)


def advice(
    store: Store,
    project: str,
    *,
    now: datetime,
    since: str | None = None,
    until: str | None = None,
    filters: Filters = NO_FILTERS,
    by: Sequence[str] = DEFAULT_BY,
    min_requests: int = DEFAULT_MIN_REQUESTS,
    include_all: bool = False,
    prices: Prices | None = None,
) -> AdviceResponse:
    """Ranked levers per group of requests started in [since, until) (default: the last 24 h);
    with ``include_all``, the levers that do not apply too, each saying why."""
    if not 1 <= min_requests <= MAX_MIN_REQUESTS:
        raise QueryError(f"min_requests must be between 1 and {MAX_MIN_REQUESTS}")
    if not by:
        raise QueryError("advice needs at least one group-by field")
    span = window(now, since, until)
    scope = RequestScope(project, [span], filters)
    measured = _measure(store, scope, by)
    advised = [m for m in measured if m.count >= min_requests]
    small = [SmallGroup(key=dict(m.key), count=m.count) for m in measured if m.count < min_requests]
    wide = RequestScope(project, [span], Filters(service=filters.service))  # where else it could go
    alternatives = _alternatives(store, wide)
    hours = _hours(store, scope, by)
    endpoints, reuse = _network(store, scope, by)
    plans = [
        levers.plan_group(
            replace(
                _with_hours(m, hours.get(_key(m.key, by), ())),
                endpoints=tuple(endpoints.get(_key(m.key, by), ())),
                reuse=reuse.get(_key(m.key, by), ReuseSplit()),
            ),
            alternatives,
            min_requests,
            by,
            prices,
        )
        for m in advised
    ]
    after = _what_if(store, scope, by, plans)
    groups = []
    for plan in plans:
        m = plan.measures
        verdicts = levers.judge(plan, after.get(_key(m.key, by), {}))
        groups.append(
            AdviceGroup(
                key=dict(m.key),
                count=m.count,
                dominant=m.dominant,
                dominant_share=m.share(m.dominant),
                e2e_ns=AdvicePercentiles(p50=m.e2e.p50, p95=m.e2e.p95),
                ttft_ns=AdvicePercentiles(p50=m.ttft.p50, p95=m.ttft.p95),
                cost_per_request_usd=m.usage.cost_usd(m.provider, m.model, prices),
                priced_requests=m.usage.requests,
                levers=[_lever(v) for v in verdicts if include_all or v.recommended],
            )
        )
    return AdviceResponse(
        since=from_ns(span.since_ns),
        until=from_ns(span.until_ns),
        by=list(by),
        min_requests=min_requests,
        price_data=price_data_version(),
        method=list(METHOD),
        groups=groups,
        small_groups=small,
    )


def _lever(v: levers.LeverAdvice) -> AdviceLever:
    def change(c: levers.Change | None) -> AdviceChange | None:
        if c is None:
            return None
        return AdviceChange(e2e_p50=c.e2e_p50, e2e_p95=c.e2e_p95, ttft_p50=c.ttft_p50, ttft_p95=c.ttft_p95)

    return AdviceLever(
        lever=v.lever,
        title=v.title,
        recommended=v.recommended,
        summary=v.summary,
        change=change(v.change),
        after=change(v.after),
        evidence=dict(v.evidence),
        confidence=v.confidence,
        assumptions=list(v.assumptions),
        network_by_endpoint=[
            AdviceEndpoint(
                endpoint=e.endpoint or None,
                requests=e.requests,
                network_p50_ns=e.network.p50,
                network_p95_ns=e.network.p95,
            )
            for e in v.endpoints
        ]
        if v.lever == levers.NETWORK_REUSE
        else None,
    )


def _key(key: Mapping[str, str], by: Sequence[str]) -> tuple[str, ...]:
    return tuple(key[field] for field in by)


def _keys_sql(by: Sequence[str]) -> tuple[str, str]:
    """Select list of the group-by columns, and the GROUP BY list."""
    selected = ", ".join(f"{FILTER_COLUMNS[field]} AS k_{field}" for field in by)
    return selected, ", ".join(f"k_{field}" for field in by)


def _inner(store: Store, scope: RequestScope, by: Sequence[str]) -> tuple[str, dict[str, Any]]:
    """The scope's rows with the group keys, the derived per-row values and ``serial_ns``: what
    running each trace's sibling tool and retrieval calls at once would save (0 without any)."""
    selected, _ = _keys_sql(by)
    rows, params = scope.collapsed(store, f"{selected}, {_ROW_COLUMNS}")
    traces, _ = scope.collapsed(store, "trace_id")
    # Per (trace, parent) with 2+ tool/retrieval calls: analysis.advice.parallel_saving_ns in SQL.
    siblings = (
        "SELECT trace_id, greatest(0, least(sum(duration_ns), "
        "max(toUnixTimestamp64Nano(start_time) + duration_ns) - min(toUnixTimestamp64Nano(start_time))) "
        f"- max(duration_ns)) AS saving FROM {store.table('spans')} FINAL "
        f"PREWHERE project = {{project:String}} AND trace_id IN ({traces}) "  # as store._SPAN_SELECT
        "WHERE kind IN ('tool', 'retrieval') GROUP BY trace_id, parent_span_id HAVING count() >= 2"
    )
    serial = f"SELECT trace_id, sum(saving) AS serial_ns FROM ({siblings}) GROUP BY trace_id"
    sql = (
        f"SELECT r.*, ifNull(p.serial_ns, 0) AS serial_ns FROM ({rows}) AS r "
        f"LEFT JOIN ({serial}) AS p ON r.trace_id = p.trace_id"
    )
    return sql, params


def _pair(values: Sequence[Any] | None, known: int = 1) -> Percentiles:
    found = list(values or []) if known > 0 else []
    if len(found) < 2:
        return Percentiles()
    return Percentiles(finite_int(found[0]), finite_int(found[1]))


def _prefill(row: Mapping[str, Any], prefix: str) -> PrefillSums:
    return PrefillSums(int(row[f"{prefix}_n"]), int(row[f"{prefix}_ns"] or 0), int(row[f"{prefix}_tok"] or 0))


def _measure(store: Store, scope: RequestScope, by: Sequence[str]) -> list[GroupMeasures]:
    inner, params = _inner(store, scope, by)
    _, group = _keys_sql(by)
    prefills = ", ".join(
        _PREFILL_SUMS.format(cond=cond, p=prefix)
        for prefix, cond in (
            ("pre", ""),
            ("preu", " AND cache_read_input_tokens = 0"),
            ("prec", " AND cache_read_input_tokens > 0"),
        )
    )
    known_inputs = "input_tokens IS NOT NULL AND cache_read_input_tokens IS NOT NULL"
    sql = (
        f"SELECT {group}, count() AS n, "
        "quantilesExact(0.5, 0.95)(e2e_ns) AS q_e2e, count(ttft_ns) AS n_ttft, "
        f"quantilesExact(0.5, 0.95)(ttft_ns) AS q_ttft, {_PART_SUMS}, "
        "count(output_tokens) AS n_out, quantilesExact(0.5, 0.95)(output_tokens) AS q_out, "
        "countIf(output_tokens IS NOT NULL AND per_token_ns IS NOT NULL) AS n_tpt, "
        "quantileExactIf(0.5)(per_token_ns, output_tokens IS NOT NULL) AS tpt, "
        f"{prefills}, "
        "countIf(cache_read_input_tokens > 0 AND input_tokens > 0) AS n_share, "
        "quantileExactIf(0.5)(cache_read_input_tokens / input_tokens, "
        "cache_read_input_tokens > 0 AND input_tokens > 0) AS prefix_share, "
        f"sumIf(input_tokens, {known_inputs}) AS in_tok, "
        f"sumIf(cache_read_input_tokens, {known_inputs}) AS cached_tok, "
        "quantilesExact(0.5, 0.95)(queue_ns) AS q_queue, quantilesExact(0.5, 0.95)(network_ns) AS q_net, "
        "countIf(serial_ns > 0) AS n_serial, quantileExactIf(0.5)(serial_ns, serial_ns > 0) AS serial_p50, "
        f"sum(busy_app_ns) AS busy_app, {_USAGE}, "
        "topK(1)(r_route)[1] AS top_route, topK(1)(r_model)[1] AS top_model, "
        "topK(1)(r_provider)[1] AS top_provider "
        f"FROM ({inner}) GROUP BY {group} ORDER BY n DESC, {group} LIMIT {{limit:UInt32}}"
    )
    params["limit"] = MAX_GROUPS + 1
    rows = store.query(sql, params)
    if len(rows) > MAX_GROUPS:
        raise QueryError(f"more than {MAX_GROUPS} groups: filter or group by fewer fields")
    found = []
    for row in rows:
        key = {field: str(row[f"k_{field}"]) for field in by}
        n_tpt = int(row["n_tpt"])
        found.append(
            GroupMeasures(
                key=key,
                count=int(row["n"]),
                e2e=_pair(row["q_e2e"]),
                ttft=_pair(row["q_ttft"], int(row["n_ttft"])),
                part_sums={name: int(row[f"s_{name}"]) for name in COMPONENTS},
                route=key.get("route", str(row["top_route"])),
                model=key.get("model", str(row["top_model"])),
                provider=key.get("provider", str(row["top_provider"])),
                output_requests=int(row["n_out"]),
                output_tokens=_pair(row["q_out"], int(row["n_out"])),
                per_token_requests=n_tpt,
                per_token_ns=float(row["tpt"]) if n_tpt > 0 else None,
                prefill=_prefill(row, "pre"),
                prefill_uncached=_prefill(row, "preu"),
                prefill_cached=_prefill(row, "prec"),
                cached_prefix_share=float(row["prefix_share"]) if int(row["n_share"]) > 0 else None,
                input_tokens=int(row["in_tok"] or 0),
                cached_tokens=int(row["cached_tok"] or 0),
                queue=_pair(row["q_queue"]),
                network=_pair(row["q_net"]),
                serial_requests=int(row["n_serial"]),
                serial_saving_p50=int(row["serial_p50"]) if int(row["n_serial"]) > 0 else None,
                busy_app_ns=int(row["busy_app"]),
                usage=_usage(row),
            )
        )
    return found


def _usage(row: Mapping[str, Any]) -> MeanUsage:
    if int(row["u_n"]) == 0:
        return MeanUsage()
    return MeanUsage(int(row["u_n"]), int(row["u_in"]), int(row["u_cached"]), int(row["u_out"]))


def _with_hours(m: GroupMeasures, hours: Sequence[tuple[int, int, int]]) -> GroupMeasures:
    return replace(m, queue_by_hour=tuple(hours))


def _hours(
    store: Store, scope: RequestScope, by: Sequence[str]
) -> dict[tuple[str, ...], list[tuple[int, int, int]]]:
    inner, params = _inner(store, scope, by)
    _, group = _keys_sql(by)
    sql = (
        f"SELECT {group}, hour_utc, count() AS n, quantileExact(0.5)(queue_ns) AS q "
        f"FROM ({inner}) GROUP BY {group}, hour_utc ORDER BY {group}, hour_utc"
    )
    found: dict[tuple[str, ...], list[tuple[int, int, int]]] = {}
    for row in store.query(sql, params):
        key = tuple(str(row[f"k_{field}"]) for field in by)
        found.setdefault(key, []).append((int(row["hour_utc"]), int(row["n"]), int(row["q"])))
    return found


def _network(
    store: Store, scope: RequestScope, by: Sequence[str]
) -> tuple[dict[tuple[str, ...], list[EndpointNetwork]], dict[tuple[str, ...], ReuseSplit]]:
    """Per group: network time per endpoint (slowest p50 first), and of requests that came
    :data:`analysis.advice.IDLE_GAP_NS` or more after the previous request of the same service to
    the same endpoint (or the first one seen) versus sooner ones. The endpoint is the
    ``server.address`` of the trace's longest model span; without one, the request's provider
    stands in for it (and the endpoint is reported empty). Gaps are measured within the scope, so
    a filter that hides other requests to the same endpoint can make a warm request look idle."""
    selected, group = _keys_sql(by)
    rows, params = scope.collapsed(
        store,
        f"{selected}, trace_id, service, provider, toUnixTimestamp64Nano(start_time) AS t_ns, network_ns",
    )
    traces, _ = scope.collapsed(store, "trace_id")
    params["server_address"] = semconv.SERVER_ADDRESS
    addresses = (
        "SELECT trace_id, argMax(attributes[{server_address:String}], duration_ns) AS address "
        f"FROM {store.table('spans')} FINAL "
        f"PREWHERE project = {{project:String}} AND trace_id IN ({traces}) "  # as store._SPAN_SELECT
        f"WHERE kind = 'model' AND attributes[{{server_address:String}}] != '' GROUP BY trace_id"
    )
    joined = (
        "SELECT r.*, a.address AS endpoint, "
        "if(a.address != '', a.address, concat('provider:', r.provider)) AS host "
        f"FROM ({rows}) AS r LEFT JOIN ({addresses}) AS a ON r.trace_id = a.trace_id"
    )
    gaps = (
        "SELECT *, t_ns - lagInFrame(t_ns, 1, toInt64(0)) OVER (PARTITION BY service, host ORDER BY t_ns "
        "ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) >= {idle_ns:Int64} AS idle "
        f"FROM ({joined})"
    )
    params["idle_ns"] = levers.IDLE_GAP_NS
    per_endpoint = (
        f"SELECT {group}, endpoint, count() AS n, quantilesExact(0.5, 0.95)(network_ns) AS q FROM ({gaps}) "
        f"GROUP BY {group}, endpoint"
    )
    split = (
        f"SELECT {group}, countIf(idle) AS n_idle, quantileExactIf(0.5)(network_ns, idle) AS idle_p50, "
        "countIf(NOT idle) AS n_warm, quantileExactIf(0.5)(network_ns, NOT idle) AS warm_p50 "
        f"FROM ({gaps}) GROUP BY {group}"
    )
    endpoints: dict[tuple[str, ...], list[EndpointNetwork]] = {}
    for row in store.query(per_endpoint, params):
        key = tuple(str(row[f"k_{field}"]) for field in by)
        found = EndpointNetwork(str(row["endpoint"]), int(row["n"]), _pair(row["q"]))
        endpoints.setdefault(key, []).append(found)
    for listed in endpoints.values():
        listed.sort(key=lambda e: (-(e.network.p50 or 0), e.endpoint))
    reuse = {}
    for row in store.query(split, params):
        key = tuple(str(row[f"k_{field}"]) for field in by)
        n_idle, n_warm = int(row["n_idle"]), int(row["n_warm"])
        reuse[key] = ReuseSplit(
            n_idle,
            finite_int(row["idle_p50"]) if n_idle else None,
            n_warm,
            finite_int(row["warm_p50"]) if n_warm else None,
        )
    return endpoints, reuse


def _alternatives(store: Store, scope: RequestScope) -> list[Alternative]:
    """Every (route, model, provider) of the window, most requests first (at most MAX_GROUPS)."""
    inner, params = scope.collapsed(store, _ROW_COLUMNS)
    sql = (
        "SELECT r_route, r_model, r_provider, count() AS n, "
        "quantilesExact(0.5, 0.95)(e2e_ns) AS q_e2e, count(ttft_ns) AS n_ttft, "
        "quantilesExact(0.5, 0.95)(ttft_ns) AS q_ttft, quantileExact(0.5)(queue_ns) AS queue, "
        f"{_PREFILL_SUMS.format(cond='', p='pre')}, {_USAGE} "
        f"FROM ({inner}) GROUP BY r_route, r_model, r_provider "
        "ORDER BY n DESC, r_route, r_model, r_provider LIMIT {limit:UInt32}"
    )
    params["limit"] = MAX_GROUPS
    return [
        Alternative(
            route=str(row["r_route"]),
            model=str(row["r_model"]),
            provider=str(row["r_provider"]),
            count=int(row["n"]),
            e2e=_pair(row["q_e2e"]),
            ttft=_pair(row["q_ttft"], int(row["n_ttft"])),
            queue_p50=finite_int(row["queue"]),
            prefill=_prefill(row, "pre"),
            usage=_usage(row),
        )
        for row in store.query(sql, params)
    ]


_AFTER: Final = {
    # lever → per-row saving (ns), the SQL of analysis.advice's *_saving_ns / queue_change_ns
    levers.SHORTEN_OUTPUTS: (
        "ifNull(if(output_tokens > cap, "
        "least(toFloat64(decode_ns), (output_tokens - cap) * per_token_ns), 0), 0)",
        False,
    ),
    levers.PREFIX_CACHING: (
        "ifNull(least(toFloat64(prefill_ns), "
        "rate * greatest(0, share * input_tokens - cache_read_input_tokens)), 0)",
        True,
    ),
    levers.QUEUE_ALTERNATIVE: ("if(alt_queue < 0, 0, queue_ns - alt_queue)", True),
    levers.NETWORK_REUSE: ("greatest(0, network_ns - net_cap)", True),
    levers.PARALLEL_CALLS: ("if(parallel > 0, least(serial_ns, tool_ns + retrieval_ns), 0)", False),
}
"""Per lever: the per-row saving in SQL and whether it is part of TTFT (decode is not)."""


def _what_if(
    store: Store, scope: RequestScope, by: Sequence[str], plans: Sequence[levers.GroupPlan]
) -> dict[tuple[str, ...], dict[str, tuple[Percentiles, Percentiles]]]:
    """Each advised group's percentiles after each row lever, replaying its rows in ClickHouse."""
    if not plans:
        return {}
    inner, params = _inner(store, scope, by)
    _, group = _keys_sql(by)
    key_sql = "[" + ", ".join(["''", *(f"toString(k_{field})" for field in by)]) + "]"
    params["g_keys"] = [["", *_key(p.measures.key, by)] for p in plans]
    bound = {
        "cap": "output_cap",
        "rate": "prefill_rate_ns",
        "share": "prefix_share",
        "alt_queue": "alternative_queue_ns",
        "net_cap": "network_cap_ns",
        "parallel": "parallel_calls",
    }
    for name, attribute in bound.items():
        params[f"g_{name}"] = [float(getattr(p.what_if, attribute)) for p in plans]
    per_group = ", ".join(f"{{g_{name}:Array(Float64)}}[gi] AS {name}" for name in bound)
    measures = []
    for lever, (saving, in_ttft) in _AFTER.items():
        measures.append(f"quantilesExact(0.5, 0.95)(e2e_ns - ({saving})) AS e_{lever}")
        if in_ttft:
            measures.append(f"quantilesExact(0.5, 0.95)(ttft_ns - ({saving})) AS t_{lever}")
    sql = (
        f"SELECT {group}, count(ttft_ns) AS n_ttft, {', '.join(measures)} FROM ("
        f"SELECT *, {per_group} FROM (SELECT *, indexOf({{g_keys:Array(Array(String))}}, {key_sql}) AS gi "
        f"FROM ({inner})) WHERE gi > 0) GROUP BY {group}"
    )
    found: dict[tuple[str, ...], dict[str, tuple[Percentiles, Percentiles]]] = {}
    plan_by_key = {_key(p.measures.key, by): p for p in plans}
    for row in store.query(sql, params):
        key = tuple(str(row[f"k_{field}"]) for field in by)
        before = plan_by_key[key].measures
        n_ttft = int(row["n_ttft"])
        found[key] = {
            lever: (_pair(row[f"e_{lever}"]), _pair(row[f"t_{lever}"], n_ttft) if in_ttft else before.ttft)
            for lever, (_, in_ttft) in _AFTER.items()
        }
    return found
