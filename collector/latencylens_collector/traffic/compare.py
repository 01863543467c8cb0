"""A replay run beside the production requests it copied: percentiles, parts, goodput, findings.

The run's traces are found by the ``latencylens.replay.run_id`` their spans carry, the production
traces by the ``latencylens.replay.source_trace_id`` they name; both sides' request rows are read
through :class:`RequestScope` (bound parameters only). The statistics are pure functions of rows.

Two distributions *match* when the replay's median is within :data:`MATCH_RATIO` of production's
and the two-sample Kolmogorov–Smirnov test cannot tell them apart at the 5 % level (distance at
most ``1.358 · √((n + m) / (n · m))`` for samples of n and m; 0.30 for two samples of 40). A part
(queue, prefill, decode, network) *grew* or *shrank* when its mean changed by at least
:data:`PART_CHANGE_RATIO` of production's and by at least :data:`PART_CHANGE_MIN_NS`.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence
from typing import Any, Final

from latencylens import semconv
from latencylens_collector.analysis.attribution import COMPONENTS, DECODE, NETWORK, PREFILL, QUEUE
from latencylens_collector.analysis.costs import request_cost_usd
from latencylens_collector.queries.scope import RequestScope
from latencylens_collector.storage.store import Store
from latencylens_collector.traffic.responses import Distance, Percentiles, ReplayComparison, Side, Slo

MATCH_RATIO: Final = 0.25
KS_C_ALPHA_5: Final = 1.358
"""c(α) of the two-sample Kolmogorov–Smirnov test at α = 0.05 (large-sample approximation)."""
PART_CHANGE_RATIO: Final = 0.25
PART_CHANGE_MIN_NS: Final = 2_000_000
NAMED_PARTS: Final = (QUEUE, PREFILL, DECODE, NETWORK)
ROW_FIELDS: Final = (
    "lower(hex(trace_id)) AS trace_hex, toUnixTimestamp64Nano(start_time) AS start_ns, e2e_ns, "
    "ttft_ns, itl_ns, status_error, input_tokens, output_tokens, cache_read_input_tokens, "
    "decode_tokens_per_second, provider, model, " + ", ".join(f"{name}_ns" for name in COMPONENTS)
)
NS_PER_S: Final = 1_000_000_000
MS: Final = 1_000_000


class UnknownRun(LookupError):
    """No span of the project carries this run id."""


def run_traces(store: Store, project: str, run_id: str) -> dict[bytes, str]:
    """The run's trace ids → the hex id of the recorded request each copies ("" when unknown)."""
    sql = (
        f"SELECT trace_id, max(attributes[{{source_key:String}}]) AS source FROM {store.table('spans')} "
        "WHERE project = {project:String} AND attributes[{run_key:String}] = {run:String} GROUP BY trace_id"
    )
    params = {
        "project": project,
        "run": run_id,
        "run_key": semconv.REPLAY_RUN_ID,
        "source_key": semconv.REPLAY_SOURCE_TRACE_ID,
    }
    return {bytes(row["trace_id"]): str(row["source"]) for row in store.query(sql, params)}


def compare_run(store: Store, project: str, run_id: str, slo: Slo) -> ReplayComparison:
    """The run's request rows beside those of the requests it copied; raises :class:`UnknownRun`."""
    traces = run_traces(store, project, run_id)
    if not traces:
        raise UnknownRun(f"no replay run {run_id!r} in this project")
    sources = sorted({bytes.fromhex(s) for s in traces.values() if _is_trace_hex(s)})
    replay_rows = _rows(store, project, list(traces))
    production_rows = _rows(store, project, sources) if sources else []
    return comparison(run_id, production_rows, replay_rows, slo)


def _rows(store: Store, project: str, trace_ids: Sequence[bytes]) -> list[dict[str, Any]]:
    sql, params = RequestScope(project, trace_ids=trace_ids).latest(store, ROW_FIELDS)
    return store.query(sql, params)


def _is_trace_hex(text: str) -> bool:
    return len(text) == 32 and all(c in "0123456789abcdef" for c in text.lower())


def comparison(
    run_id: str, production: Sequence[Mapping[str, Any]], replay: Sequence[Mapping[str, Any]], slo: Slo
) -> ReplayComparison:
    """Both sides summarized and compared (pure)."""
    ttft = distance(_values(production, "ttft_ns"), _values(replay, "ttft_ns"))
    itl = distance(_values(production, "itl_ns"), _values(replay, "itl_ns"))
    prod, rep = side(production, slo), side(replay, slo)
    return ReplayComparison(
        run_id=run_id,
        slo=slo,
        production=prod,
        replay=rep,
        ttft=ttft,
        itl=itl,
        findings=findings(
            prod, rep, ttft, itl, slo_set=any(v is not None for v in slo.model_dump().values())
        ),
    )


def side(rows: Sequence[Mapping[str, Any]], slo: Slo) -> Side:
    """One side's percentiles, mean parts, throughput and goodput."""
    count = len(rows)
    wall_ns = 0
    if rows:
        first = min(int(r["start_ns"]) for r in rows)
        wall_ns = max(int(r["start_ns"]) + int(r["e2e_ns"]) for r in rows) - first
    wall_s = wall_ns / NS_PER_S
    output_tokens = sum(int(r["output_tokens"] or 0) for r in rows)
    good = sum(1 for r in rows if is_good(r, slo))
    rates = [float(r["decode_tokens_per_second"]) for r in rows if r.get("decode_tokens_per_second")]
    costs = [cost for cost in (row_cost(r) for r in rows) if cost is not None]
    return Side(
        requests=count,
        failed=sum(1 for r in rows if r["status_error"]),
        ttft=percentiles(_values(rows, "ttft_ns")),
        itl=percentiles(_values(rows, "itl_ns")),
        e2e=percentiles(_values(rows, "e2e_ns")),
        parts_mean_ns={
            name: round(sum(int(r[f"{name}_ns"]) for r in rows) / count) if count else 0
            for name in COMPONENTS
        },
        input_tokens=sum(int(r["input_tokens"] or 0) for r in rows),
        output_tokens=output_tokens,
        decode_tokens_per_s_p50=quantile(sorted(rates), 0.5),
        output_tokens_per_s=output_tokens / wall_s if wall_s > 0 else None,
        wall_s=round(wall_s, 3),
        good=good,
        good_share=good / count if count else None,
        goodput_per_s=good / wall_s if wall_s > 0 else None,
        priced=len(costs),
        cost_usd=round(sum(costs), 6) if costs else None,
    )


def row_cost(row: Mapping[str, Any]) -> float | None:
    """US dollars of one request at its provider's and model's prices (genai-prices); None when
    the price data does not know them (a self-hosted server)."""
    if not row.get("model") or not row.get("provider"):
        return None
    return request_cost_usd(
        str(row["provider"]),
        str(row["model"]),
        int(row.get("input_tokens") or 0),
        int(row.get("cache_read_input_tokens") or 0),
        int(row.get("output_tokens") or 0),
    )


def is_good(row: Mapping[str, Any], slo: Slo) -> bool:
    """Met every target of ``slo`` and did not fail; a target on a metric the row lacks is missed."""
    if row["status_error"]:
        return False
    for target, column in ((slo.ttft_ns, "ttft_ns"), (slo.itl_ns, "itl_ns"), (slo.e2e_ns, "e2e_ns")):
        if target is not None and (row.get(column) is None or int(row[column]) > target):
            return False
    return True


def _values(rows: Sequence[Mapping[str, Any]], column: str) -> list[int]:
    return sorted(int(r[column]) for r in rows if r.get(column) is not None)


def quantile(ordered: Sequence[float], q: float) -> float | None:
    """Linear interpolation between closest ranks (numpy's default) of sorted values."""
    if not ordered:
        return None
    position = (len(ordered) - 1) * q
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def percentiles(ordered: Sequence[int]) -> Percentiles:
    def at(q: float) -> int | None:
        value = quantile(ordered, q)
        return None if value is None else round(value)

    return Percentiles(p50=at(0.5), p95=at(0.95), p99=at(0.99))


def ks_statistic(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Two-sample Kolmogorov–Smirnov statistic: the largest gap between the empirical CDFs."""
    if not a or not b:
        return None
    xs, ys = sorted(a), sorted(b)
    gap = 0.0
    for value in sorted(set(xs) | set(ys)):
        gap = max(
            gap, abs(bisect.bisect_right(xs, value) / len(xs) - bisect.bisect_right(ys, value) / len(ys))
        )
    return gap


def ks_critical(n: int, m: int) -> float:
    """The largest KS distance two samples of ``n`` and ``m`` from one distribution show at the
    5 % level."""
    return KS_C_ALPHA_5 * math.sqrt((n + m) / (n * m))


def distance(production: Sequence[int], replay: Sequence[int]) -> Distance:
    ks = ks_statistic(production, replay)
    p50 = _ratio(quantile(replay, 0.5), quantile(production, 0.5))
    p95 = _ratio(quantile(replay, 0.95), quantile(production, 0.95))
    matches = (
        ks is not None
        and ks <= ks_critical(len(production), len(replay))
        and p50 is not None
        and abs(p50 - 1) <= MATCH_RATIO
    )
    return Distance(ks=None if ks is None else round(ks, 4), p50_ratio=p50, p95_ratio=p95, matches=matches)


def _ratio(value: float | None, base: float | None) -> float | None:
    if value is None or base is None or base <= 0:
        return None
    return round(value / base, 4)


def findings(
    production: Side, replay: Side, ttft: Distance, itl: Distance, slo_set: bool = True
) -> list[str]:
    """What differs, one sentence each: distributions, then parts that grew or shrank, and the
    share of good requests when there is an SLO."""
    lines = []
    for name, found, prod, rep in (
        ("TTFT", ttft, production.ttft, replay.ttft),
        ("ITL", itl, production.itl, replay.itl),
    ):
        if found.ks is None:
            continue
        if found.matches:
            lines.append(
                f"{name} matches production (p95 {_ms(prod.p95)} → {_ms(rep.p95)}, "
                f"KS distance {found.ks:.2f})"
            )
        else:
            lines.append(
                f"{name} differs from production: p50 {_ms(prod.p50)} → {_ms(rep.p50)}, "
                f"p95 {_ms(prod.p95)} → {_ms(rep.p95)} (KS distance {found.ks:.2f})"
            )
    for part in NAMED_PARTS:
        before, after = production.parts_mean_ns[part], replay.parts_mean_ns[part]
        change = after - before
        if abs(change) >= PART_CHANGE_MIN_NS and abs(change) >= PART_CHANGE_RATIO * before:
            verb = "grew" if change > 0 else "shrank"
            lines.append(f"{part} {verb}: mean {_ms(before)} → {_ms(after)} per request")
    if production.cost_usd is not None and replay.cost_usd is not None:
        lines.append(f"cost: ${production.cost_usd:.4f} → ${replay.cost_usd:.4f} for the same requests")
    if slo_set and production.good_share is not None and replay.good_share is not None:
        lines.append(f"good requests under the SLO: {production.good_share:.0%} → {replay.good_share:.0%}")
    return lines


def _ms(ns: int | None) -> str:
    return "-" if ns is None else f"{ns / MS:.1f} ms"


__all__ = [
    "KS_C_ALPHA_5",
    "MATCH_RATIO",
    "MS",
    "NAMED_PARTS",
    "NS_PER_S",
    "PART_CHANGE_MIN_NS",
    "PART_CHANGE_RATIO",
    "ROW_FIELDS",
    "UnknownRun",
    "compare_run",
    "comparison",
    "distance",
    "findings",
    "is_good",
    "ks_critical",
    "ks_statistic",
    "percentiles",
    "quantile",
    "row_cost",
    "run_traces",
    "side",
]
