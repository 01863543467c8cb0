"""SGLang's stage spans under its request span: which durations become queue and prefill.

A retracted request goes back to the wait queue and is prefilled again, so its stage spans repeat;
the first of each counts (the queue and prefill before its first token). Stage spans find their
request span by walking up a few parents, so a parent loop or a lost thread span cannot hang or
mislead the reading, and several calls in one trace each get their own stages.
"""

from __future__ import annotations

from test_same_call import resolved_by_id, span

from latencylens import semconv
from latencylens_collector.analysis.records import SpanRow

SGLANG_REQUEST = {
    "module": "sglang::request",
    "gen_ai.latency.e2e": "0.2395",
    "gen_ai.latency.time_in_model_decode": "0.1943",
    "gen_ai.latency.time_in_model_prefill": "0.0421",
    "gen_ai.latency.time_to_first_token": "0.0452",
}


def sglang_call(
    base: int, start_ms: float, parent: int | None = None, prefill_ms: float = 20.0
) -> list[SpanRow]:
    """A request span ``base`` with a scheduler thread span and its stages, first ones first."""
    return [
        span(base, parent, start_ms, 239.5, SGLANG_REQUEST, name=" Req 49fa36ea"),
        span(base + 1, base, start_ms + 3.3, 235.7, name="Scheduler [TP 0] (host:1a2b3c4d | pid:4243)"),
        span(base + 2, base + 1, start_ms + 3.6, 7.8, name="prefill_waiting"),
        span(base + 3, base + 1, start_ms + 11.4, prefill_ms, name="prefill_forward"),
        # retracted: queued again, prefilled again (later, so these do not count)
        span(base + 4, base + 1, start_ms + 31.4, 5.0, name="prefill_waiting"),
        span(base + 5, base + 1, start_ms + 36.4, 8.5, name="prefill_forward"),
    ]


def test_the_first_stages_count_after_a_retraction() -> None:
    # queue = the first prefill_waiting, 7.8 ms; prefill = the first prefill_forward, 20.0 ms
    call = resolved_by_id(sglang_call(1, 0.0))[1]
    assert call.attributes[semconv.PROVIDER_QUEUE_NS] == "7800000"
    assert call.attributes[semconv.PROVIDER_PREFILL_NS] == "20000000"
    assert call.attributes[semconv.PROVIDER_DECODE_NS] == "194300000"  # the request span's 0.1943 s
    assert call.attributes[semconv.GEN_AI_PROVIDER_NAME] == "sglang"


def test_two_calls_in_one_trace_each_read_their_own_stages() -> None:
    # two SGLang calls under one app span (no client call above them): prefill 20.0 and 30.0 ms
    spans = [
        span(100, None, 0.0, 2000.0, name="POST /ask"),
        *sglang_call(10, 100.0, parent=100),
        *sglang_call(20, 1000.0, parent=100, prefill_ms=30.0),
    ]
    resolved = resolved_by_id(spans)
    assert resolved[10].attributes[semconv.PROVIDER_PREFILL_NS] == "20000000"
    assert resolved[20].attributes[semconv.PROVIDER_PREFILL_NS] == "30000000"


def test_a_stage_whose_parents_loop_or_were_lost_is_not_read() -> None:
    spans = [
        span(1, None, 0.0, 239.5, SGLANG_REQUEST, name=" Req 49fa36ea"),
        span(3, 4, 3.6, 7.8, name="prefill_waiting"),  # its thread span 4 never arrived
        span(5, 6, 11.4, 20.0, name="prefill_forward"),  # 5 → 6 → 5: a parent loop
        span(6, 5, 11.0, 30.0, name="Scheduler [TP 0]"),
    ]
    call = resolved_by_id(spans)[1]
    assert semconv.PROVIDER_QUEUE_NS not in call.attributes
    assert semconv.PROVIDER_PREFILL_NS not in call.attributes
    assert call.attributes[semconv.PROVIDER_SERVER_TOTAL_NS] == "239500000"
