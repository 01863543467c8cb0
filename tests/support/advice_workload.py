"""A seeded known-truth workload for the advisor: one planted cause per route, and the same
workload rerun with each planted change applied.

Every route is 20–40 request rows (``queries_data.request_row``: e2e is the sum of the parts) with
TTFT = network + queue + prefill and decode = (output tokens − 1) × ITL, so every number below can
be worked out by hand. Percentiles are exact: the value at 0-based position ⌊q·n⌋ of the sorted
values (:func:`exact`), as the advisor computes them.

==================  ====================  ==================================================
route               model @ provider      planted cause
==================  ====================  ==================================================
POST /story         m-writer @ groq       decode: 30 outputs of 200 tokens, 10 of 1000 (ITL 10 ms)
POST /summarize     m-reader @ groq       prefill: 28 uncached 4000-token prompts (200 ms of prefill,
                                          50 µs a token) and 12 that read a 3000-token prefix from
                                          the cache (50 ms)
POST /chat          m-busy @ p-slow       queue: 100 ms, but 2000 ms in 4 hours of the 20
POST /classify      m-quick @ p-fast      the quiet alternative: queue 3–7 ms
POST /lookup        m-quick @ p-far       network: 60 ms on reused connections, 400 ms on 9 of 30
POST /answer        gpt-4o @ openai (30)  a slower, dearer model: 30 ms a token; gpt-4o-mini
                    gpt-4o-mini (20)      @ openai takes 10 ms a token on the same route
POST /agent         m-agent @ p-agent     two tool calls one after the other (300 + 300 ms, or
                                          100 + 500 ms in every third request) that could overlap
==================  ====================  ==================================================

/agent's requests also have spans (:func:`workload_spans`): the root, the two tool calls back to
back, then the model call, so the advisor can see the siblings ran one after another.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Final

from queries_data import MS, S, request_row

from latencylens_collector.analysis.records import NO_PARENT, SpanRow

HOUR_NS: Final = 3600 * S
QUEUE_HOURS: Final = (8, 9, 10, 11)
"""Hours after ``t0`` in which /chat's queue is 2000 ms."""
CHANGES: Final = (
    "cap_outputs",
    "cache_prefix",
    "move_queue",
    "reuse_connections",
    "switch_model",
    "parallel_tools",
)


def exact(values: Sequence[float], q: float) -> float:
    """The value at 0-based position ⌊q·n⌋ of the sorted values (ClickHouse ``quantileExact``)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.floor(q * len(ordered)))]


def _row(
    n: int,
    start_ns: int,
    *,
    route: str,
    model: str,
    provider: str,
    network: float,
    queue: float,
    prefill: float,
    output_tokens: int,
    itl: float,
    input_tokens: int = 500,
    cached: int = 0,
) -> dict[str, Any]:
    decode = (output_tokens - 1) * itl
    return request_row(
        n,
        start_ns,
        {"network": network, "queue": queue, "prefill": prefill, "decode": decode},
        route=route,
        model=model,
        provider=provider,
        ttft_ms=network + queue + prefill,
        itl_ms=itl,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cached=cached,
    )


def story(t0: int, change: str | None = None) -> list[dict[str, Any]]:
    rows = []
    for i in range(40):
        out = 1000 if i % 4 == 3 else 200
        if change == "cap_outputs":
            out = min(out, 200)
        rows.append(
            _row(
                1000 + i,
                t0 + (i % 20) * HOUR_NS + i * S,
                route="POST /story",
                model="m-writer",
                provider="groq",
                network=50,
                queue=25,
                prefill=40,
                output_tokens=out,
                itl=10,
            )
        )
    return rows


def summarize(t0: int, change: str | None = None) -> list[dict[str, Any]]:
    rows = []
    for i in range(40):
        cached = 3000 if i < 12 else 0
        if change == "cache_prefix":
            cached = 3000
        prefill = (4000 - cached) * 0.05  # 50 µs per uncached token: 200 ms uncached, 50 ms cached
        rows.append(
            _row(
                2000 + i,
                t0 + (i % 20) * HOUR_NS + i * S,
                route="POST /summarize",
                model="m-reader",
                provider="groq",
                network=40,
                queue=30,
                prefill=prefill,
                output_tokens=20,
                itl=5,
                input_tokens=4000,
                cached=cached,
            )
        )
    return rows


def _quick_queue(i: int) -> float:
    return 3 + i % 5


def chat(t0: int, change: str | None = None) -> list[dict[str, Any]]:
    rows = []
    for i in range(40):
        hour = i // 2
        queue = 2000.0 if hour in QUEUE_HOURS else 100.0
        if change == "move_queue":
            queue = _quick_queue(i)  # the alternative's queue, as /classify sees it
        rows.append(
            _row(
                3000 + i,
                t0 + hour * HOUR_NS + i * S,
                route="POST /chat",
                model="m-busy",
                provider="p-slow",
                network=50,
                queue=queue,
                prefill=30,
                output_tokens=20,
                itl=10,
            )
        )
    return rows


def classify(t0: int, change: str | None = None) -> list[dict[str, Any]]:
    return [
        _row(
            4000 + i,
            t0 + (i % 20) * HOUR_NS + i * S,
            route="POST /classify",
            model="m-quick",
            provider="p-fast",
            network=20,
            queue=_quick_queue(i),
            prefill=5,
            output_tokens=5,
            itl=4,
            input_tokens=100,
        )
        for i in range(30)
    ]


def lookup(t0: int, change: str | None = None) -> list[dict[str, Any]]:
    rows = []
    for i in range(30):
        network = 400.0 if i % 10 in (1, 4, 7) else 60.0  # 9 of 30 open a new connection
        if change == "reuse_connections":
            network = 60.0
        rows.append(
            _row(
                5000 + i,
                t0 + (i % 20) * HOUR_NS + i * S,
                route="POST /lookup",
                model="m-quick",
                provider="p-far",
                network=network,
                queue=8,
                prefill=5,
                output_tokens=5,
                itl=4,
                input_tokens=100,
            )
        )
    return rows


def answer(t0: int, change: str | None = None) -> list[dict[str, Any]]:
    rows = []
    for i in range(50):
        slow = i < 30
        out = (80, 100, 120)[i % 3]
        model, provider, itl = ("gpt-4o", "openai", 30.0) if slow else ("gpt-4o-mini", "openai", 10.0)
        if change == "switch_model":
            model, provider, itl = "gpt-4o-mini", "openai", 10.0
        rows.append(
            _row(
                6000 + i,
                t0 + (i % 20) * HOUR_NS + i * S,
                route="POST /answer",
                model=model,
                provider=provider,
                network=50,
                queue=20,
                prefill=30,
                output_tokens=out,
                itl=itl,
            )
        )
    return rows


def _agent_tools(i: int) -> tuple[float, float]:
    return (100.0, 500.0) if i % 3 == 2 else (300.0, 300.0)


AGENT_APP_MS: Final = 20.0
"""/agent's own work before the first tool call."""


def agent(t0: int, change: str | None = None) -> list[dict[str, Any]]:
    rows = []
    for i in range(30):
        first, second = _agent_tools(i)
        tool = max(first, second) if change == "parallel_tools" else first + second
        parts = {
            "app_other": AGENT_APP_MS,
            "tool": tool,
            "network": 30,
            "queue": 10,
            "prefill": 40,
            "decode": 95,
        }
        rows.append(
            request_row(
                7000 + i,
                t0 + (i % 20) * HOUR_NS + i * S,
                parts,
                route="POST /agent",
                model="m-agent",
                provider="p-agent",
                ttft_ms=80,
                itl_ms=5,
                input_tokens=500,
                output_tokens=20,
            )
        )
    return rows


def workload_spans(t0: int) -> list[SpanRow]:
    """Spans of /agent's requests (as :func:`agent` stores them, before any change)."""
    spans = []
    for i, row in enumerate(agent(t0)):
        start = row["start_time"]
        first, second = (round(ms * MS) for ms in _agent_tools(i))
        tools_start = start + round(AGENT_APP_MS * MS)
        model_ns = row["e2e_ns"] - round(AGENT_APP_MS * MS) - first - second
        root, search, fetch, model = (bytes([k]) * 8 for k in (1, 2, 3, 4))

        def span(
            span_id: bytes,
            parent: bytes,
            name: str,
            kind: str,
            begin: int,
            duration: int,
            trace: bytes = row["trace_id"],
        ) -> SpanRow:
            return SpanRow(
                trace_id=trace,
                span_id=span_id,
                parent_span_id=parent,
                service="api",
                name=name,
                span_kind="internal",
                kind=kind,
                start_ns=begin,
                duration_ns=duration,
            )

        spans += [
            span(root, NO_PARENT, "POST /agent", "request", start, row["e2e_ns"]),
            span(search, root, "search", "tool", tools_start, first),
            span(fetch, root, "fetch", "tool", tools_start + first, second),
            span(model, root, "chat m-agent", "model", tools_start + first + second, model_ns),
        ]
    return spans


ROUTES: Final = (story, summarize, chat, classify, lookup, answer, agent)


def workload(t0: int, change: str | None = None) -> list[dict[str, Any]]:
    """Every route's rows, with ``change`` (one of :data:`CHANGES`) applied where it was planted."""
    return [row for route in ROUTES for row in route(t0, change)]


def start_of_window(now_ns: int) -> int:
    """``t0``: the start of the hour 20 hours before ``now_ns``, so 20 hours of rows fit in 24 h."""
    return (now_ns // HOUR_NS - 20) * HOUR_NS
