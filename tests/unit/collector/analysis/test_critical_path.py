"""Critical-path attribution on hand-built span trees.

Every case writes the expected parts out by hand; all must sum to the root's duration exactly.
Times are in milliseconds in the tables and converted to ns, so the arithmetic is easy to check.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from latencylens_collector.analysis.attribution import (
    APP_OTHER,
    COMPONENTS,
    DECODE,
    INFERENCE,
    NETWORK,
    PREFILL,
    QUEUE,
    RETRIEVAL,
    SERVER_OTHER,
    TOOL,
    ModelTiming,
    SpanNode,
    attribute_request,
)

MS = 1_000_000


def span(
    span_id: str,
    parent: str | None,
    start_ms: float,
    end_ms: float,
    kind: str = "other",
    timing: ModelTiming | None = None,
) -> SpanNode:
    return SpanNode(span_id, parent, int(start_ms * MS), int(end_ms * MS), kind, timing)


# A model call of 100 ms whose provider reports queue 10, prefill 20, decode 60 and 90 ms of server
# time: network = 100 − 90 = 10 ms.
MODEL_100 = ModelTiming(queue_ns=10 * MS, prefill_ns=20 * MS, decode_ns=60 * MS, server_total_ns=90 * MS)


@dataclass
class Case:
    name: str
    spans: list[SpanNode]
    expected_ms: dict[str, float]
    busy_ms: dict[str, float] | None = None


CASES = [
    Case(
        # root 0-200: retrieval 10-40, tool 50-80, model 90-190 → app_other = 10+10+10+10 = 40 ms
        "sequential retrieval, tool, model",
        [
            span("r", None, 0, 200),
            span("ret", "r", 10, 40, "retrieval"),
            span("tool", "r", 50, 80, "tool"),
            span("m", "r", 90, 190, "model", MODEL_100),
        ],
        {RETRIEVAL: 30, TOOL: 30, APP_OTHER: 40, QUEUE: 10, PREFILL: 20, DECODE: 60, NETWORK: 10},
    ),
    Case(
        # root 0-100: tools 10-50 and 10-90 in parallel; only the one ending at 90 is on the path.
        # tool B 80 ms, app_other = 10 (before) + 10 (after) = 20 ms.
        "parallel tools: the early finisher gets nothing",
        [
            span("r", None, 0, 100),
            span("a", "r", 10, 50, "tool"),
            span("b", "r", 10, 90, "tool"),
        ],
        {TOOL: 80, APP_OTHER: 20},
        busy_ms={TOOL: 120, APP_OTHER: 20},
    ),
    Case(
        # root 0-100, tool 10-90 containing a retrieval 20-60.
        # tool own = (20-10) + (90-60) = 40, retrieval 40, app_other 10 + 10 = 20.
        "nested retrieval inside a tool",
        [
            span("r", None, 0, 100),
            span("t", "r", 10, 90, "tool"),
            span("ret", "t", 20, 60, "retrieval"),
        ],
        {TOOL: 40, RETRIEVAL: 40, APP_OTHER: 20},
    ),
    Case(
        # Streaming model call 0-100 overlapped by post-processing 60-130 (a tool); root 0-140.
        # Path from the end: 130-140 root, tool 60-130 (70 ms), then the model's slice 0-60.
        # Model slice of 60 ms keeps its proportions (10:20:60:10 of 100) → 6, 12, 36, 6.
        "streaming overlapping post-processing",
        [
            span("r", None, 0, 140),
            span("m", "r", 0, 100, "model", MODEL_100),
            span("post", "r", 60, 130, "tool"),
        ],
        {TOOL: 70, APP_OTHER: 10, QUEUE: 6, PREFILL: 12, DECODE: 36, NETWORK: 6},
    ),
    Case(
        # root 0-100: tool a 10-50 starts first, tool b 20-90 ends last. Walking back from the end:
        # root 90-100 (10), b 20-90 (70), then a owns only 10-20 (10), root 0-10 (10).
        # tool 70 + 10 = 80, app_other 20; busy tool = 40 + 70 = 110.
        "parallel tools: the early finisher owns only what precedes the other",
        [
            span("r", None, 0, 100),
            span("a", "r", 10, 50, "tool"),
            span("b", "r", 20, 90, "tool"),
        ],
        {TOOL: 80, APP_OTHER: 20},
        busy_ms={TOOL: 110, APP_OTHER: 20},
    ),
    Case(
        # root 0-100, tool 10-60 whose retrieval 40-80 outlives it: clipped to 40-60.
        # root 60-100 (40) + 0-10 (10) = app_other 50; retrieval 20; tool 10-40 = 30.
        "grandchild outlives its parent",
        [
            span("r", None, 0, 100),
            span("t", "r", 10, 60, "tool"),
            span("ret", "t", 40, 80, "retrieval"),
        ],
        {TOOL: 30, RETRIEVAL: 20, APP_OTHER: 50},
        busy_ms={TOOL: 30, RETRIEVAL: 20, APP_OTHER: 50},
    ),
    Case(
        # A child 50-150 outliving its root 0-100 is clipped to 50-100.
        "child outlives parent",
        [span("r", None, 0, 100), span("t", "r", 50, 150, "tool")],
        {TOOL: 50, APP_OTHER: 50},
    ),
    Case(
        # Skewed clock: the child claims -20..30 under a root 0-100; clipped to 0-30.
        "child starts before parent (clock skew)",
        [span("r", None, 0, 100), span("ret", "r", -20, 30, "retrieval")],
        {RETRIEVAL: 30, APP_OTHER: 70},
    ),
    Case(
        # A span whose parent never arrived hangs under the root.
        "orphan under root",
        [span("r", None, 0, 100), span("t", "missing", 20, 40, "tool")],
        {TOOL: 20, APP_OTHER: 80},
    ),
    Case(
        # Children of a model call (e.g. an HTTP client span) do not take its time.
        "model call is a leaf",
        [
            span("r", None, 0, 100),
            span("m", "r", 0, 100, "model", MODEL_100),
            span("http", "m", 1, 99),
        ],
        {QUEUE: 10, PREFILL: 20, DECODE: 60, NETWORK: 10},
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_critical_path(case: Case) -> None:
    breakdown = attribute_request(case.spans)
    assert breakdown is not None
    expected = {name: int(case.expected_ms.get(name, 0) * MS) for name in COMPONENTS}
    assert breakdown.parts == expected
    assert sum(breakdown.parts.values()) == breakdown.e2e_ns
    if case.busy_ms is not None:
        assert {k: v for k, v in breakdown.busy.items() if v} == {
            name: int(ms * MS) for name, ms in case.busy_ms.items()
        }


def test_span_shares_sum_to_root() -> None:
    breakdown = attribute_request(CASES[1].spans)
    assert breakdown is not None
    assert breakdown.span_critical_ns == {"r": 20 * MS, "b": 80 * MS}
    assert breakdown.span_self_ns["r"] == 20 * MS
    assert breakdown.span_self_ns["a"] == 40 * MS


def test_no_root_yet_gives_nothing() -> None:
    assert attribute_request([span("t", "missing-root", 0, 10, "tool")]) is None


def test_inconsistent_model_call_flags_request() -> None:
    timing = ModelTiming(queue_ns=200 * MS, server_total_ns=200 * MS)
    breakdown = attribute_request([span("r", None, 0, 100), span("m", "r", 0, 100, "model", timing)])
    assert breakdown is not None
    assert breakdown.inconsistent
    assert breakdown.parts[QUEUE] == 100 * MS
    assert sum(breakdown.parts.values()) == 100 * MS


def test_tgi_call_partly_on_the_critical_path_keeps_its_proportions() -> None:
    # TGI call of 1300 ms (queue 15, inference 1217, server other 2, network 66) from 0 to 1300 ms
    # inside a 1400 ms root; a 1000 ms tool runs from 400 ms to 1400 ms, so only [0, 400) of the call
    # is on the critical path: 400/1300 of each part, rounded to sum to 400 ms exactly.
    timing = ModelTiming(queue_ns=15 * MS, inference_ns=1_217 * MS, server_total_ns=1_234 * MS)
    breakdown = attribute_request(
        [
            span("r", None, 0, 1_400),
            span("m", "r", 0, 1_300, "model", timing),
            span("t", "r", 400, 1_400, "tool"),
        ]
    )
    assert breakdown is not None
    assert breakdown.parts[TOOL] == 1_000 * MS
    model_ns = sum(breakdown.parts[name] for name in (NETWORK, QUEUE, INFERENCE, SERVER_OTHER))
    assert model_ns == 400 * MS
    # inference: 1217 × 400 / 1300 = 374.46 ms
    assert abs(breakdown.parts[INFERENCE] - 1_217 * MS * 400 // 1_300) <= 1
    assert breakdown.parts[PREFILL] == breakdown.parts[DECODE] == 0
    assert sum(breakdown.parts.values()) == breakdown.e2e_ns == 1_400 * MS
    # The busy view counts the whole call: 2 ms of the server's other time.
    assert breakdown.busy[SERVER_OTHER] == 2 * MS
    assert breakdown.provenance[INFERENCE] == "reported"
    assert breakdown.provenance[SERVER_OTHER] == "derived"


def test_deep_chain_does_not_overflow() -> None:
    spans = [span("s0", None, 0, 10_000)]
    spans += [span(f"s{i}", f"s{i - 1}", i, 10_000 - i) for i in range(1, 2_000)]
    breakdown = attribute_request(spans)
    assert breakdown is not None
    assert sum(breakdown.parts.values()) == breakdown.e2e_ns
