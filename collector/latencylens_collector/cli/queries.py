"""``latencylens explain | stats | compare``: the query API in a terminal (rich tables or ``--json``).

Like ``slow``, these talk to a running collector over HTTP (``--url``) and send an API key, when
given, as ``Authorization: Bearer``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from latencylens import API_KEY_ENV as ENV_API_KEY
from latencylens_collector.analysis.attribution import COMPONENTS
from latencylens_collector.settings import DEFAULT_HOST, DEFAULT_PORT

DEFAULT_URL = f"http://{DEFAULT_HOST}:{DEFAULT_PORT}"
"""Where the commands find the collector unless ``--url`` says otherwise."""
_RELATIVE = re.compile(r"^(\d+(?:\.\d+)?)([smhd])$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86_400}
_MS = 1e6


def add_client_options(parser: argparse.ArgumentParser) -> None:
    """--url, --api-key and --json, shared by every command that asks a running collector."""
    parser.add_argument("--url", default=DEFAULT_URL, help=f"collector base URL (default {DEFAULT_URL})")
    parser.add_argument("--api-key", help=f"API key sent as 'Authorization: Bearer' (env {ENV_API_KEY})")
    parser.add_argument("--json", action="store_true", help="print the raw JSON response instead of a table")


def add_filter_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--service", help="only requests of this service")
    parser.add_argument("--route", help="only requests whose root span has this name")
    parser.add_argument("--model", help="only requests whose primary model is this")
    parser.add_argument("--provider", help="only requests whose primary provider is this")


def when(value: str | None, now_s: float | None = None) -> str | None:
    """``1h`` / ``30m`` / ``2d`` ago as unix seconds; anything else (ISO, unix seconds) unchanged."""
    if value is None:
        return None
    match = _RELATIVE.match(value.strip())
    if not match:
        return value
    now_s = time.time() if now_s is None else now_s
    return f"{now_s - float(match.group(1)) * _UNIT_S[match.group(2)]:.3f}"


def headers(args: argparse.Namespace) -> dict[str, str]:
    key = getattr(args, "api_key", None) or os.environ.get(ENV_API_KEY)
    return {"Authorization": f"Bearer {key}"} if key else {}


def fetch(args: argparse.Namespace, path: str, params: Mapping[str, Any]) -> dict[str, Any] | None:
    """GET a JSON document from the collector; prints the error and returns None on failure."""
    import httpx

    url = args.url.rstrip("/") + path
    query = {k: v for k, v in params.items() if v is not None}
    try:
        response = httpx.get(url, params=query, headers=headers(args), timeout=60)
    except httpx.HTTPError as exc:
        print(f"error: cannot reach the collector at {args.url}: {exc}", file=sys.stderr)
        return None
    if response.status_code != 200:
        print(f"error: {url} answered {response.status_code}: {response.text}", file=sys.stderr)
        return None
    body: dict[str, Any] = response.json()
    return body


def register(sub: Any) -> None:
    explain = sub.add_parser(
        "explain",
        help="explain one request: the dominant component and its span tree",
        description="Where did the time of this request go: the dominant component, how it is known, "
        "and every span with its self time and share of the critical path.",
    )
    explain.add_argument("trace_id", metavar="TRACE_ID", help="32 hex characters")
    add_client_options(explain)
    explain.set_defaults(handler=_explain)

    stats = sub.add_parser(
        "stats",
        help="percentiles and shares per group (e.g. --by model --since 1h)",
        description="Counts, p50/p95/p99 of end-to-end time, TTFT and ITL, and each component's share "
        "of the total, grouped by any of service, route, model, provider and/or time buckets.",
    )
    stats.add_argument(
        "--since", help="window start: 1h, 30m, 2d ago, ISO-8601 or unix seconds (default 24h)"
    )
    stats.add_argument("--until", help="window end (default now)")
    stats.add_argument("--by", help="comma list of: service, route, model, provider")
    stats.add_argument("--bucket", choices=("1m", "5m", "1h", "1d"), help="time bucket")
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
    compare.add_argument("--b-since", help="range B start, e.g. 1h (default: 1h)")
    compare.add_argument("--b-until", help="range B end (default now)")
    compare.add_argument("--metric", choices=("ttft", "e2e", "itl"), default="ttft")
    compare.add_argument("--quantile", choices=("p50", "p90", "p95", "p99"), default="p95")
    compare.add_argument("--by", default="provider,model", help="comma list (default provider,model)")
    add_filter_options(compare)
    add_client_options(compare)
    compare.set_defaults(handler=_compare)


def _filters(args: argparse.Namespace) -> dict[str, Any]:
    return {"service": args.service, "route": args.route, "model": args.model, "provider": args.provider}


def _show(args: argparse.Namespace, body: Any, render: Callable[[Any, Any], None]) -> int:
    """Print a fetched response as JSON (``--json``) or with its rich renderer; 1 if the fetch failed."""
    if body is None:
        return 1
    if args.json:
        print(json.dumps(body, indent=2))
        return 0
    from rich.console import Console

    render(body, Console())
    return 0


def _explain(args: argparse.Namespace) -> int:
    body = fetch(args, f"/api/requests/{args.trace_id}", {})
    return _show(args, body, render_explanation)


def _stats(args: argparse.Namespace) -> int:
    params = {"since": when(args.since), "until": when(args.until), "by": args.by, "bucket": args.bucket}
    body = fetch(args, "/api/stats", {**params, **_filters(args)})
    return _show(args, body, render_stats)


def _compare(args: argparse.Namespace) -> int:
    params = {
        "a_since": when(args.a_since),
        "a_until": when(args.a_until),
        "b_since": when(args.b_since),
        "b_until": when(args.b_until),
        "metric": args.metric,
        "quantile": args.quantile,
        "by": args.by or None,
    }
    body = fetch(args, "/api/compare", {**params, **_filters(args)})
    return _show(args, body, render_compare)


def ms(ns: int | None) -> str:
    return "-" if ns is None else f"{ns / _MS:.1f}"


def signed_ms(ns: int | None) -> str:
    return "-" if ns is None else f"{ns / _MS:+.1f}"


def tokens(value: int | None, estimated: bool = False) -> str:
    """A token count: ``-`` when unknown (not reported; never 0), ``~`` before an estimate."""
    return "-" if value is None else f"{'~' if estimated else ''}{value:,}"


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


def render_explanation(detail: Mapping[str, Any], console: Any) -> None:
    """The sentence, the parts, and the span tree with self time and critical-path share."""
    from rich import box
    from rich.table import Table

    explanation = detail["explanation"]
    console.print(f"[bold]{detail['service']} / {detail['name']}[/bold]  {detail['trace_id']}")
    console.print(explanation["sentence"])
    console.print(
        f"dominant: {explanation['dominant']} {ms(explanation['dominant_ns'])} ms "
        f"({explanation['share']:.0%}, {explanation['provenance']})"
    )
    console.print(token_line(detail))
    # The components this request has, as in the web UI's breakdown: all ten would not fit.
    busy = detail.get("busy") or {}
    shown = [name for name in COMPONENTS if detail["parts"].get(name, 0) or busy.get(name, 0)]
    parts = Table(title="Critical path (ms)", box=box.SIMPLE_HEAD, pad_edge=False)
    for name in ("e2e", *shown):
        parts.add_column(name, justify="right")
    parts.add_row(ms(detail["e2e_ns"]), *(ms(detail["parts"].get(name, 0)) for name in shown))
    console.print(parts)
    tree = Table(title="Spans", box=box.SIMPLE_HEAD, pad_edge=False)
    tree.add_column("span", overflow="fold")
    tree.add_column("kind")
    for header in ("duration ms", "self ms", "critical ms", "share"):
        tree.add_column(header, justify="right", no_wrap=True)

    def add(span: Mapping[str, Any], depth: int) -> None:
        tree.add_row(
            "  " * depth + str(span["name"]),
            str(span["kind"]),
            ms(span["duration_ns"]),
            ms(span["self_ns"]),
            ms(span["critical_ns"]),
            f"{span['critical_share']:.0%}",
        )
        for child in span.get("children", []):
            add(child, depth + 1)

    for root in detail["spans"]:
        add(root, 0)
    console.print(tree)


def render_stats(body: Mapping[str, Any], console: Any) -> None:
    """One row per group: count, e2e/TTFT/ITL percentiles (ms), top shares, rate, cache ratio."""
    from rich import box
    from rich.table import Table

    groups = body["groups"]
    if not groups:
        console.print("no requests in this window")
        return
    by: Sequence[str] = body["by"]
    table = Table(
        title=f"Requests {body['since']} – {body['until']} (ms)",
        caption="share = the component's part of all time on the critical path",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
    if body["bucket"]:
        table.add_column("bucket", no_wrap=True)
    for field in by:
        table.add_column(field, overflow="fold")
    for header in (
        "n",
        "e2e p50",
        "e2e p95",
        "e2e p99",
        "ttft p95",
        "itl p95",
        "top shares",
        "tok/s",
        "cached",
    ):
        table.add_column(header, justify="right")
    for group in groups:
        cells = [str(group["bucket_start"])[:16]] if body["bucket"] else []
        cells += [group["key"].get(field, "") or "-" for field in by]
        shares = sorted(group["components"].items(), key=lambda item: -(item[1]["share"] or 0))[:3]
        rate, cached = group["output_tokens_per_second"], group["cached_token_ratio"]
        cells += [
            str(group["count"]),
            ms(group["e2e_ns"]["p50"]),
            ms(group["e2e_ns"]["p95"]),
            ms(group["e2e_ns"]["p99"]),
            ms(group["ttft_ns"]["p95"]),
            ms(group["itl_ns"]["p95"]),
            " ".join(f"{name} {c['share']:.0%}" for name, c in shares if c["share"]),
            "-" if rate is None else f"{rate:.0f}",
            "-" if cached is None else f"{cached:.0%}",
        ]
        table.add_row(*cells)
    console.print(table)


def render_compare(body: Mapping[str, Any], console: Any) -> None:
    """The summary line, then components and groups by size of change (ms)."""
    from rich import box
    from rich.table import Table

    console.print(f"[bold]{body['summary']}[/bold]")
    console.print(
        f"A: {body['a']['count']} requests, {ms(body['a']['value_ns'])} ms   "
        f"B: {body['b']['count']} requests, {ms(body['b']['value_ns'])} ms"
    )
    components = Table(
        title=f"{body['quantile']} of each component (ms)", box=box.SIMPLE_HEAD, pad_edge=False
    )
    for header in ("component", "A", "B", "Δ"):
        components.add_column(header, justify="right" if header != "component" else "left")
    for c in body["components"]:
        components.add_row(c["name"], ms(c["a_ns"]), ms(c["b_ns"]), signed_ms(c["delta_ns"]))
    console.print(components)
    if not body["groups"]:
        return
    groups = Table(
        title=f"{body['quantile']} {body['metric']} per group (ms)", box=box.SIMPLE_HEAD, pad_edge=False
    )
    groups.add_column("group", overflow="fold")
    for header in ("A", "B", "Δ", "top component", "its Δ"):
        groups.add_column(header, justify="right")
    for g in body["groups"]:
        groups.add_row(
            ", ".join(f"{k} {v}" for k, v in g["key"].items()),
            ms(g["a_ns"]),
            ms(g["b_ns"]),
            signed_ms(g["delta_ns"]),
            g["top_component"] or "-",
            signed_ms(g["top_component_delta_ns"]),
        )
    console.print(groups)
