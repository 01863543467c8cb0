"""SGLang's per-request root span (``--enable-trace``), which reuses vLLM's ``gen_ai.latency.*`` names
with other boundaries.

SGLang opens the span (named ``Req <rid>``, attribute ``module`` = ``sglang::request``) when its
tokenizer manager receives the request, as a child of the incoming ``traceparent``, and sets at the
finish (``make_span_attrs`` / ``convert_to_gen_ai_span_attrs``, all seconds): ``e2e`` (receive →
finish: the server total), ``time_to_first_token`` (receive → first token),
``time_in_model_decode`` (first token → finish: decode), and ``time_in_model_prefill`` /
``time_in_model_inference`` counted from when the request was handed to the scheduler, so they hold
the scheduler's queue as well; no ``time_in_queue`` is set. Only the server total and decode are
read from it. Queue and prefill come from two of the stage spans SGLang's scheduler opens below it
(trace level 1 and up, the default 3): ``prefill_waiting`` (wait queue → forward entry: the
queue) and ``prefill_forward`` (forward entry → prefill finished, chunked prefill included); each is
one process's own interval, so no two clocks are compared. After a retraction the first of each
counts. Without them, queue and prefill stay together in the model call's unattributed part unless
the client reported them (the SDK's SGLang adapter reads ``meta_info``); the client's own reported
timings are kept, the span filling only what they lack.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from latencylens import semconv
from latencylens_collector.analysis.conventions import vllm
from latencylens_collector.analysis.conventions.values import first_seconds_ns
from latencylens_collector.analysis.records import SpanRow

PROVIDER: Final = "sglang"
"""Provider name given to calls that only SGLang's span describes."""
MODULE: Final = "module"
"""Attribute SGLang sets on its request span: ``sglang::<module>`` (``sglang::request``)."""
MODULE_PREFIX: Final = "sglang::"


STAGE_QUEUE: Final = "prefill_waiting"
"""SGLang's stage span from entering the scheduler's wait queue to entering the forward pass."""
STAGE_PREFILL: Final = "prefill_forward"
"""SGLang's stage span from entering the forward pass to the end of prefill."""
STAGES: Final = frozenset({STAGE_QUEUE, STAGE_PREFILL})


def is_server_span(attributes: Mapping[str, str]) -> bool:
    """SGLang's request span: vLLM's latency names plus SGLang's ``module`` attribute."""
    module = attributes.get(MODULE)
    return module is not None and module.startswith(MODULE_PREFIX) and vllm.is_server_span(attributes)


def server_timing(attributes: Mapping[str, str], stages: Mapping[str, int] | None = None) -> dict[str, int]:
    """SGLang's queue and prefill (from its stage spans' durations, ``stages``), decode and server
    total (e2e) under our ``latencylens.`` names, in integer ns; absent ones omitted. The span's own
    prefill and inference include the queue, so they are not read."""
    found = stages or {}
    values = {
        semconv.PROVIDER_QUEUE_NS: found.get(STAGE_QUEUE),
        semconv.PROVIDER_PREFILL_NS: found.get(STAGE_PREFILL),
        semconv.PROVIDER_DECODE_NS: first_seconds_ns(attributes, vllm.GEN_AI_LATENCY_TIME_IN_MODEL_DECODE),
        semconv.PROVIDER_SERVER_TOTAL_NS: first_seconds_ns(attributes, vllm.GEN_AI_LATENCY_E2E),
    }
    return {key: value for key, value in values.items() if value is not None}


_STAGE_DEPTH: Final = 8
"""How far above a stage span its server span is looked for (it is two levels up: stage, thread
span, request span; a stage nested in another adds one)."""


def stages_below(servers: Sequence[SpanRow], by_id: Mapping[bytes, SpanRow]) -> dict[bytes, dict[str, int]]:
    """Per SGLang server span id, the duration of the first (earliest) stage span of each of
    :data:`STAGES` below it. Each stage walks up a few parents, so a trace of many calls costs
    linear time."""
    server_ids = {server.span_id for server in servers}
    first: dict[tuple[bytes, str], SpanRow] = {}
    for row in by_id.values():
        if row.name not in STAGES:
            continue
        above: SpanRow | None = row
        for _ in range(_STAGE_DEPTH):
            above = by_id.get(above.parent_span_id) if above is not None and above.has_parent else None
            if above is None or above.span_id in server_ids:
                break
        if above is None or above.span_id not in server_ids:
            continue
        key = (above.span_id, row.name)
        current = first.get(key)
        if current is None or (row.start_ns, row.span_id) < (current.start_ns, current.span_id):
            first[key] = row
    found: dict[bytes, dict[str, int]] = {}
    for (server_id, name), row in first.items():
        found.setdefault(server_id, {})[name] = max(0, row.duration_ns)
    return found
