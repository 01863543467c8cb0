"""``latencylens slow | explain | stats | compare``: the query API in a terminal (tables or ``--json``).

Times (``--since 1h``, ISO-8601, unix seconds) are sent to the service as typed: the service
parses them, so every surface reads them the same way.
"""

from __future__ import annotations

import argparse
import re
import textwrap
from collections.abc import Mapping, Sequence
from typing import Any, Final

from latencylens_collector.analysis.attribution import (
    APP_OTHER,
    APPLICATION_COMPONENTS,
    COMPONENTS,
    DECODE,
    INFERENCE,
    MODEL_UNATTRIBUTED,
    NETWORK,
    PREFILL,
    QUEUE,
    SERVER_OTHER,
)
from latencylens_collector.analysis.vocabulary import APPLICATION, PART_LABELS, label
from latencylens_collector.cli import replay as replay_cli
from latencylens_collector.cli.cache import cache_text
from latencylens_collector.cli.errors import FAILED, USAGE, CliError
from latencylens_collector.cli.http import ServiceClient, add_client_options
from latencylens_collector.cli.output import (
    MISSING,
    Column,
    Table,
    ms,
    percent,
    render,
    show,
    show_json,
    utc,
    width,
)

TRACE_ID_LENGTH: Final = 32
_HEX = re.compile(r"^[0-9a-fA-F]{1,32}$")
TIME_HELP: Final = "1h, 30m, 2d (ago), ISO-8601 or unix seconds"
SLOW_COLUMNS: Final[tuple[tuple[str, tuple[str, ...]], ...]] = (
    (APPLICATION.label, APPLICATION_COMPONENTS),
    *((PART_LABELS[name], (name,)) for name in (NETWORK, QUEUE, PREFILL, DECODE, INFERENCE, SERVER_OTHER)),
    (PART_LABELS[MODEL_UNATTRIBUTED], (MODEL_UNATTRIBUTED,)),
)
"""Columns of ``slow`` after e2e: (header, components summed into it); headers are the labels of
analysis/vocabulary.py, as in the web UI and the dashboards."""
OPTIONAL_SLOW_COLUMNS: Final = frozenset({PART_LABELS[INFERENCE], PART_LABELS[SERVER_OTHER]})
"""Shown only when a listed request has them: only providers that do not split prefill from
decode report them."""
SLOW_NOTE: Final = (
    f"{APPLICATION.label} = retrieval + tool + {PART_LABELS[APP_OTHER]}; "
    f"{PART_LABELS[MODEL_UNATTRIBUTED]} = model time not split"
)
UNSPLIT_NOTE: Final = (
    f"{PART_LABELS[INFERENCE]} = prefill + decode, not split by the provider; "
    f"{PART_LABELS[SERVER_OTHER]} = its server time outside queue and inference"
)


def register(sub: Any) -> None:
    slow = sub.add_parser(
        "slow",
        help="list the slowest requests with their time breakdown",
        description="Ask a running service for its slowest requests and print where their time went "
        "(milliseconds per component along the critical path).",
    )
    slow.add_argument("--since", help=f"window start: {TIME_HELP} (default 24 h ago)")
    slow.add_argument("--until", help="window end (default now)")
    add_filter_options(slow)
    slow.add_argument("--min-duration-ms", type=float, help="only requests at least this long")
    slow.add_argument("--limit", type=int, default=20, help="at most this many requests (default 20)")
    slow.add_argument("--cursor", help="next page: the cursor printed under the previous one")
    add_client_options(slow)
    slow.set_defaults(handler=_slow)

    explain = sub.add_parser(
        "explain",
        help="explain one request: the dominant component and its span tree",
        description="Where did the time of this request go: the dominant component, how it is known, "
        "and every span with its self time and share of the critical path.",
    )
    explain.add_argument(
        "trace_id", metavar="TRACE_ID", help="a trace id (32 hex characters) or any unique prefix of one"
    )
    add_client_options(explain)
    explain.set_defaults(handler=_explain)

    stats = sub.add_parser(
        "stats",
        help="percentiles and shares per group (e.g. --by model --since 1h)",
        description="Counts, p50/p95/p99 of end-to-end time, TTFT and ITL, and each component's share "
        "of the total, grouped by any of service, route, model, provider and/or time buckets.",
    )
    stats.add_argument("--since", help=f"window start: {TIME_HELP} (default 24 h ago)")
    stats.add_argument("--until", help="window end (default now)")
    stats.add_argument("--by", help="comma list of: service, route, model, provider")
    stats.add_argument("--bucket", choices=("1m", "5m", "1h", "1d"), help="time bucket")
    stats.add_argument("--cache", action="store_true", help="cached and uncached requests apart")
    add_filter_options(stats)
    add_client_options(stats)
    stats.set_defaults(handler=_stats)

    compare = sub.add_parser(
        "compare",
        help="compare two time ranges: what changed, in which component, where",
        description="A metric's percentile in range A and range B (default: the last hour against the "
        "hour before), the change of each component, and per group with --by.",
    )
    compare.add_argument("--a-since", help="range A start (default: B's length before B)")
    compare.add_argument("--a-until", help="range A end (default: B's start)")
    compare.add_argument("--b-since", help=f"range B start: {TIME_HELP} (default 1h)")
    compare.add_argument("--b-until", help="range B end (default now)")
    compare.add_argument("--metric", choices=("ttft", "e2e", "itl"), default="ttft")
    compare.add_argument("--quantile", choices=("p50", "p90", "p95", "p99"), default="p95")
    compare.add_argument("--by", default="provider,model", help="comma list (default provider,model)")
    add_filter_options(compare)
    replay_cli.add_compare_options(compare)
    add_client_options(compare)
    compare.set_defaults(handler=_compare)


def add_filter_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--service", help="only requests of this service")
    parser.add_argument("--route", help="only requests whose root span has this name")
    parser.add_argument("--model", help="only requests whose primary model is this")
    parser.add_argument("--provider", help="only requests whose primary provider is this")


def _filters(args: argparse.Namespace) -> dict[str, Any]:
    return {"service": args.service, "route": args.route, "model": args.model, "provider": args.provider}


# slow ---------------------------------------------------------------------------------------------


def _slow(args: argparse.Namespace) -> int:
    params = {
        "since": args.since,
        "until": args.until,
        **_filters(args),
        "min_duration_ms": args.min_duration_ms,
        "limit": args.limit,
        "cursor": args.cursor,
    }
    body = ServiceClient.from_args(args).get("/api/requests", params)
    if args.json:
        show_json(body)
        return 0
    show(slow_text(body["requests"]))
    if body.get("next_cursor"):
        show(f"more: --cursor {body['next_cursor']}")
    return 0


def slow_text(requests: Sequence[Mapping[str, Any]], columns: int | None = None) -> str:
    """Requests (``RequestSummary`` dicts) as a table of milliseconds per component, full ids."""
    if not requests:
        return "no requests in this window"
    shown = [
        (header, names)
        for header, names in SLOW_COLUMNS
        if header not in OPTIONAL_SLOW_COLUMNS
        or any(request.get("parts", {}).get(name, 0) for request in requests for name in names)
    ]
    notes = [SLOW_NOTE]
    if any(header in OPTIONAL_SLOW_COLUMNS for header, _ in shown):
        notes.append(UNSPLIT_NOTE)
    table = Table(
        "Slowest requests (ms on the critical path)",
        [
            Column("trace id"),
            Column("start"),
            Column("service / name", wraps=True),
            Column("model", wraps=True),
            Column("e2e", numeric=True),
            *(Column(header, numeric=True) for header, _ in shown),
        ],
        notes=notes,
    )
    for request in requests:
        parts = request.get("parts", {})
        table.add(
            request["trace_id"],
            utc(request["start_time"]),
            f"{request['service']} / {request['name']}",
            request.get("model") or MISSING,
            ms(request["e2e_ns"]),
            *(ms(sum(parts.get(name, 0) for name in names)) for _, names in shown),
        )
    return render(table, columns)


def print_requests(requests: Sequence[Mapping[str, Any]], console: Any) -> None:
    """The ``slow`` table on a rich console (the demo's), at the console's width."""
    console.print(slow_text(requests, console.width), markup=False, highlight=False, soft_wrap=True)


# explain ------------------------------------------------------------------------------------------


def _explain(args: argparse.Namespace) -> int:
    wanted = args.trace_id.strip()
    if not _HEX.match(wanted):
        raise CliError(
            f"TRACE_ID must be a trace id or a prefix of one (hex characters), got {wanted!r}", USAGE
        )
    client = ServiceClient.from_args(args)
    trace_id = wanted.lower() if len(wanted) == TRACE_ID_LENGTH else resolve_prefix(client, wanted.lower())
    body = client.get(f"/api/requests/{trace_id}")
    if args.json:
        show_json(body)
    else:
        show(explanation_text(body))
    return 0


def resolve_prefix(client: ServiceClient, prefix: str) -> str:
    """The one stored trace id starting with ``prefix``; a one-line error when none or several do."""
    found = client.get("/api/requests/lookup", {"prefix": prefix})
    ids: list[str] = found["trace_ids"]
    if not ids:
        raise CliError(f"no request has a trace id starting with {prefix}", FAILED)
    if len(ids) > 1:
        more = " and more" if found.get("truncated") else ""
        raise CliError(
            f"trace id prefix {prefix} is ambiguous: {', '.join(ids)}{more}; give more characters", FAILED
        )
    return ids[0]


def tokens(value: int | None, estimated: bool = False) -> str:
    """A token count: ``-`` when unknown (not reported; never 0), ``~`` before an estimate."""
    return MISSING if value is None else f"{'~' if estimated else ''}{value:,}"


def token_line(detail: Mapping[str, Any]) -> str:
    """``tokens: 19 in (0 cached) → 10 out``, saying which counts are unknown or estimated."""
    estimated = bool(detail.get("tokens_estimated"))
    counts = [detail["input_tokens"], detail["output_tokens"], detail["cache_read_input_tokens"]]
    line = (
        f"tokens: {tokens(counts[0], estimated)} in ({tokens(counts[2], estimated)} cached) → "
        f"{tokens(counts[1], estimated)} out"
    )
    if estimated:
        line += "  (~ estimated by the instrumentation, not reported by the provider)"
    if None in counts:
        line += "  (- not reported: unknown)"
    return line


NO_PRICE: Final = "no price"


def dollars(value: float | None) -> str:
    """US dollars, ``$0.00288`` (three significant digits) up to ``$1,234``; ``no price`` when
    unknown (never 0)."""
    if value is None:
        return NO_PRICE
    if value >= 100:
        return f"${value:,.0f}"
    if value >= 1:
        return f"${value:,.2f}"
    return f"${value:.3g}"


def cost_line(detail: Mapping[str, Any]) -> str:
    """``cost: $0.00225 (genai-prices 0.2.3)``, or ``cost: no price``."""
    cost = detail.get("cost_usd")
    if cost is None:
        return "cost: no price"
    return f"cost: ${cost:.4g}" + (f" ({detail['price_data']})" if detail.get("price_data") else "")


def explanation_text(detail: Mapping[str, Any], columns: int | None = None) -> str:
    """The request, the sentence, the parts, and the span tree with self time and critical share."""
    limit = columns or width()
    explanation = detail["explanation"]

    def wrapped(text: str) -> list[str]:
        return textwrap.wrap(text, limit, break_long_words=False, break_on_hyphens=False) or [""]

    lines = [
        *wrapped(f"{detail['service']} / {detail['name']}"),
        f"trace id: {detail['trace_id']}",
        f"start: {utc(detail['start_time'])}",
        *wrapped(f"model: {detail['model'] or MISSING} ({detail['provider'] or MISSING})"),
        "",
        *wrapped(explanation["sentence"]),
        *wrapped(
            f"dominant: {explanation['dominant']} {ms(explanation['dominant_ns'])} ms "
            f"({percent(explanation['share'])}, {explanation['provenance']})"
        ),
        *wrapped(token_line(detail)),
        *wrapped(cost_line(detail)),
        "",
    ]
    # The components this request has, as in the web UI's breakdown: all ten are rarely there.
    busy = detail.get("busy") or {}
    shown = [name for name in COMPONENTS if detail["parts"].get(name, 0) or busy.get(name, 0)]
    parts = Table("Critical path (ms)", [Column(label(name), numeric=True) for name in ("e2e", *shown)])
    parts.add(ms(detail["e2e_ns"]), *(ms(detail["parts"].get(name, 0)) for name in shown))
    lines += [render(parts, limit), ""]
    spans = Table(
        "Spans (ms; share = of the critical path)",
        [
            Column("span", wraps=True),
            Column("kind"),
            Column("duration", numeric=True),
            Column("self", numeric=True),
            Column("critical", numeric=True),
            Column("share", numeric=True),
        ],
    )

    def add(span: Mapping[str, Any], depth: int) -> None:
        spans.add(
            "  " * depth + str(span["name"]),
            span["kind"],
            ms(span["duration_ns"]),
            ms(span["self_ns"]),
            ms(span["critical_ns"]),
            percent(span["critical_share"]),
        )
        for child in span.get("children", []):
            add(child, depth + 1)

    for root in detail["spans"]:
        add(root, 0)
    lines.append(render(spans, limit) if spans.rows else "no spans stored for this request")
    return "\n".join(lines)


# stats --------------------------------------------------------------------------------------------


def _stats(args: argparse.Namespace) -> int:
    if args.cache:
        return _cache_stats(args)
    params = {"since": args.since, "until": args.until, "by": args.by, "bucket": args.bucket}
    body = ServiceClient.from_args(args).get("/api/stats", {**params, **_filters(args)})
    if args.json:
        show_json(body)
    else:
        show(stats_text(body))
    return 0


def _cache_stats(args: argparse.Namespace) -> int:
    params = {"since": args.since, "until": args.until, "by": args.by, **_filters(args)}
    body = ServiceClient.from_args(args).get("/api/stats/cache", params)
    if args.json:
        show_json(body)
    else:
        show(cache_text(body))
    return 0


def stats_text(body: Mapping[str, Any], columns: int | None = None) -> str:
    """One row per group: count, e2e/TTFT/ITL percentiles (ms), top shares, rate, cache ratio."""
    groups = body["groups"]
    title = f"Requests {utc(body['since'])} – {utc(body['until'])} (ms)"
    if not groups:
        return f"{title}\n\nno requests in this window"
    by: Sequence[str] = body["by"]
    keys: list[Column] = []
    if body["bucket"]:
        keys.append(Column("bucket"))
    keys += [Column(field, wraps=True) for field in by]
    if not keys:
        keys.append(Column("group"))
    table = Table(
        title,
        [
            *keys,
            *(
                Column(header, numeric=True)
                for header in ("n", "e2e p50", "e2e p95", "e2e p99", "ttft p95", "itl p95")
            ),
            Column("top shares", wraps=True),
            Column("tok/s", numeric=True),
            Column("cached", numeric=True),
            Column("$/req", numeric=True),
            Column("$ total", numeric=True),
            Column("no price", numeric=True),
        ],
        notes=[
            "share = the component's part of all time on the critical path",
            f"tok/s = mean {label('decode_tokens_per_second')} (output tokens / decode time)",
            "$/req, $ total = mean and sum of the cost of requests with a price; no price = requests "
            "whose model, provider or token counts have none (left out of both)",
        ],
        keys=len(keys),
    )
    for group in groups:
        key_cells = [utc(group["bucket_start"])] if body["bucket"] else []
        key_cells += [group["key"].get(field, "") or MISSING for field in by]
        if not by and not body["bucket"]:
            key_cells.append("all")
        shares = sorted(group["components"].items(), key=lambda item: -(item[1]["share"] or 0))[:3]
        rate = group["output_tokens_per_second"]
        table.add(
            *key_cells,
            group["count"],
            ms(group["e2e_ns"]["p50"]),
            ms(group["e2e_ns"]["p95"]),
            ms(group["e2e_ns"]["p99"]),
            ms(group["ttft_ns"]["p95"]),
            ms(group["itl_ns"]["p95"]),
            ", ".join(f"{label(name)} {percent(c['share'])}" for name, c in shares if c["share"]) or MISSING,
            MISSING if rate is None else f"{rate:.0f}",
            percent(group["cached_token_ratio"]),
            *cost_cells(group.get("cost")),
        )
    return render(table, columns)


def cost_cells(cost: Mapping[str, Any] | None) -> tuple[str, str, str]:
    """``$/req``, ``$ total`` and ``no price`` of a stats group."""
    if cost is None:
        return NO_PRICE, NO_PRICE, MISSING
    return dollars(cost["mean_usd"]), dollars(cost["total_usd"]), str(cost["no_price"])


# compare ------------------------------------------------------------------------------------------


def _compare(args: argparse.Namespace) -> int:
    if args.replay:
        return replay_cli.show_comparison(args)
    params = {
        "a_since": args.a_since,
        "a_until": args.a_until,
        "b_since": args.b_since,
        "b_until": args.b_until,
        "metric": args.metric,
        "quantile": args.quantile,
        "by": args.by or None,
    }
    body = ServiceClient.from_args(args).get("/api/compare", {**params, **_filters(args)})
    if args.json:
        show_json(body)
    else:
        show(compare_text(body))
    return 0


def compare_text(body: Mapping[str, Any], columns: int | None = None) -> str:
    """The summary line, then components and groups by size of change (ms)."""
    limit = columns or width()
    lines = textwrap.wrap(body["summary"], limit, break_long_words=False, break_on_hyphens=False)
    lines.append(
        f"A: {body['a']['count']} requests, {ms(body['a']['value_ns'])} ms; "
        f"B: {body['b']['count']} requests, {ms(body['b']['value_ns'])} ms"
    )
    lines += textwrap.wrap(compare_cost_line(body), limit, break_long_words=False, break_on_hyphens=False)
    components = Table(
        f"{body['quantile']} of each component (ms)",
        [
            Column("component"),
            Column("A", numeric=True),
            Column("B", numeric=True),
            Column("Δ", numeric=True),
        ],
    )
    for c in body["components"]:
        components.add(c["name"], ms(c["a_ns"]), ms(c["b_ns"]), ms(c["delta_ns"], signed=True))
    lines += ["", render(components, limit)]
    if body["groups"]:
        groups = Table(
            f"{body['quantile']} {body['metric']} per group (ms)",
            [
                Column("group", wraps=True),
                Column("A", numeric=True),
                Column("B", numeric=True),
                Column("Δ", numeric=True),
                Column("top component"),
                Column("its Δ", numeric=True),
                Column("$/req B÷A", numeric=True),
            ],
        )
        for g in body["groups"]:
            groups.add(
                ", ".join(f"{k} {v}" for k, v in g["key"].items()),
                ms(g["a_ns"]),
                ms(g["b_ns"]),
                ms(g["delta_ns"], signed=True),
                g["top_component"] or MISSING,
                ms(g["top_component_delta_ns"], signed=True),
                ratio(g.get("cost_ratio")),
            )
        lines += ["", render(groups, limit)]
    return "\n".join(lines)


def ratio(value: float | None) -> str:
    """``×1.25``; ``-`` without a cost on both sides."""
    return MISSING if value is None else f"×{value:.2f}"


def compare_cost_line(body: Mapping[str, Any]) -> str:
    """``cost per request: A $0.00288, B $0.0036 (×1.25)``, saying how many had no price."""
    sides = []
    for name in ("A", "B"):
        side = body[name.lower()]
        text = f"{name} {dollars(side.get('cost_per_request_usd'))}"
        unpriced = side.get("no_price", 0)
        if unpriced and side.get("cost_per_request_usd") is not None:
            text += f" ({unpriced} without a price left out)"
        sides.append(text)
    line = "cost per request: " + ", ".join(sides)
    if body.get("cost_ratio") is not None:
        line += f" ({ratio(body['cost_ratio'])})"
    return line
