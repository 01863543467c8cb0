"""``latencylens advise``: what to change first, per group of requests, from ``GET /api/advice``.

Each group gets a line of what it is and what dominates it, its p50/p95, a table of the levers
that would cut p95 by 5 % or more (estimated change in ms, confidence), then per lever what to do,
the evidence and the assumptions, wrapped to the output's width. ``--all`` adds, per group, one
line for each lever that does not apply, saying why.
"""

from __future__ import annotations

import argparse
import textwrap
from collections.abc import Mapping
from typing import Any, Final

from latencylens_collector.cli.http import ServiceClient, add_client_options
from latencylens_collector.cli.output import Column, Table, ms, percent, render, show, show_json, width
from latencylens_collector.cli.queries import TIME_HELP, add_filter_options

CHANGE_FIELDS: Final = ("e2e_p50", "e2e_p95", "ttft_p50", "ttft_p95")
CHANGE_HEADERS: Final = ("e2e p50", "e2e p95", "TTFT p50", "TTFT p95")
FILTERS: Final = ("service", "route", "model", "provider")
"""The filter options :func:`cli.queries.add_filter_options` adds."""


def register(sub: Any) -> None:
    advise = sub.add_parser(
        "advise",
        help="what to change first: ranked levers per route and model, with their evidence",
        description="Per group of requests (default route × model, at least --min-requests of them): "
        "the levers that would cut p95 end-to-end time or TTFT, ranked by the estimated p95 saving, "
        "each with the estimated change in ms, the evidence, a confidence and its assumptions. "
        "Estimates replay the group's own stored requests with the change applied.",
    )
    advise.add_argument("--since", help=f"window start: {TIME_HELP} (default 24 h ago)")
    advise.add_argument("--until", help="window end (default now)")
    advise.add_argument("--by", help="comma list of: service, route, model, provider (default route,model)")
    advise.add_argument("--min-requests", type=int, help="fewest requests a group needs (default 20)")
    advise.add_argument("--all", action="store_true", help="also say why each other lever does not apply")
    add_filter_options(advise)
    add_client_options(advise)
    advise.set_defaults(handler=_advise)


def _advise(args: argparse.Namespace) -> int:
    params = {
        "since": args.since,
        "until": args.until,
        "by": args.by,
        "min_requests": args.min_requests,
        "all": "true" if args.all else None,
        **{field: getattr(args, field) for field in FILTERS},
    }
    body = ServiceClient.from_args(args).get("/api/advice", params)
    if args.json:
        show_json(body)
    else:
        show(advice_text(body))
    return 0


def advice_text(body: Mapping[str, Any], columns: int | None = None) -> str:
    """The advice (an ``AdviceResponse`` dict) as text at most ``columns`` wide."""
    limit = columns or width()
    lines = _wrap(
        f"What to change first: {len(body['groups'])} group(s) by {', '.join(body['by'])} with "
        f"{body['min_requests']}+ requests",
        limit,
    )
    if not body["groups"]:
        lines += ["", *_wrap("No group has enough requests in this window to advise on.", limit)]
    for group in body["groups"]:
        lines += ["", *group_text(group, limit)]
    if body.get("price_data"):
        lines += ["", *_wrap(f"Costs: {body['price_data']} (offline price data).", limit)]
    small = body.get("small_groups") or []
    if small:
        lines += ["", *_wrap(f"{len(small)} smaller group(s) not advised on (use --min-requests).", limit)]
    return "\n".join(lines)


def group_text(group: Mapping[str, Any], limit: int) -> list[str]:
    key = " / ".join(group["key"].values()) or "all requests"
    e2e, ttft = group["e2e_ns"], group["ttft_ns"]
    lines = [
        *_wrap(
            f"{key}: {group['count']} requests, {group['dominant']} is {percent(group['dominant_share'])} "
            "of end-to-end time",
            limit,
        ),
        *_wrap(
            f"now (ms): e2e p50 {ms(e2e['p50'])}, p95 {ms(e2e['p95'])}; "
            f"TTFT p50 {ms(ttft['p50'])}, p95 {ms(ttft['p95'])}",
            limit,
        ),
        *_wrap(f"cost per request: {usd(group.get('cost_per_request_usd'))}", limit),
    ]
    recommended = [lever for lever in group["levers"] if lever["recommended"]]
    others = [lever for lever in group["levers"] if not lever["recommended"]]
    if not recommended:
        lines += _wrap("No lever cuts p95 by 5 % or more.", limit)
    else:
        table = Table(
            "",
            [
                Column("#", numeric=True),
                Column("lever"),
                *(Column(header, numeric=True) for header in CHANGE_HEADERS),
                Column("confidence"),
            ],
        )
        for rank, lever in enumerate(recommended, 1):
            change = lever["change"] or {}
            table.add(
                rank,
                lever["lever"],
                *(ms(change.get(field), signed=True) for field in CHANGE_FIELDS),
                lever["confidence"],
            )
        lines += ["", "Estimated change (ms):", render(table, limit)]
        for rank, lever in enumerate(recommended, 1):
            lines += lever_text(rank, lever, limit)
    if others:
        lines += ["", "Does not apply:"]
        for lever in others:
            lines += _wrap(f"{lever['lever']}: {lever['summary']}", limit, "- ", "  ")
    return lines


def usd(value: float | None) -> str:
    """Dollars to four significant digits (``$0.00225``); ``no price`` when unknown."""
    return "no price" if value is None else f"${value:.4g}"


def lever_text(rank: int, lever: Mapping[str, Any], limit: int) -> list[str]:
    lines = [""]
    lines += _wrap(f"{lever['title']}: {lever['summary']}", limit, f"{rank}. ", "   ")
    lines += _wrap("evidence: " + evidence_text(lever["evidence"]), limit, "   ", "   ")
    for assumption in lever["assumptions"]:
        lines += _wrap(f"assumes {assumption}", limit, "   ", "     ")
    return lines


def evidence_text(evidence: Mapping[str, Any]) -> str:
    """``name value`` pairs: ns as ms, shares as percentages, unknown values left out."""
    items = []
    for name, value in evidence.items():
        if value is None:
            continue
        label = name.replace("_", " ")
        if name.endswith("_usd") and isinstance(value, int | float):
            items.append(f"{label[:-4]} {usd(value)}")
        elif name.endswith("_ns") and isinstance(value, int | float):
            items.append(f"{label[:-3]} {ms(value)} ms")
        elif name.endswith("share") and isinstance(value, int | float):
            items.append(f"{label} {percent(value)}")
        else:
            items.append(f"{label} {value}")
    return "; ".join(items)


def _wrap(text: str, limit: int, first: str = "", rest: str = "") -> list[str]:
    return textwrap.wrap(
        text,
        limit,
        initial_indent=first,
        subsequent_indent=rest,
        break_long_words=False,
        break_on_hyphens=False,
    ) or [first.rstrip()]
