"""SGLang's per-request root span (``--enable-trace``), which reuses vLLM's ``gen_ai.latency.*`` names
with other boundaries.

SGLang opens the span (named ``Req <rid>``, attribute ``module`` = ``sglang::request``) when its
tokenizer manager receives the request, as a child of the incoming ``traceparent``, and sets at the
finish (``make_span_attrs`` / ``convert_to_gen_ai_span_attrs``, all seconds): ``e2e`` (receive →
finish: the server total), ``time_to_first_token`` (receive → first token),
``time_in_model_decode`` (first token → finish: decode), and ``time_in_model_prefill`` /
``time_in_model_inference`` counted from when the request was handed to the scheduler, so they hold
the scheduler's queue as well; no ``time_in_queue`` is set. Only the server total and decode are
therefore read: queue and prefill stay together in the model call's unattributed part unless the
client reported them (the SDK's SGLang adapter reads ``meta_info``), and the client's own reported
timings are kept, the span filling only what they lack.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from latencylens import semconv
from latencylens_collector.analysis.conventions import vllm
from latencylens_collector.analysis.conventions.values import first_seconds_ns

PROVIDER: Final = "sglang"
"""Provider name given to calls that only SGLang's span describes."""
MODULE: Final = "module"
"""Attribute SGLang sets on its request span: ``sglang::<module>`` (``sglang::request``)."""
MODULE_PREFIX: Final = "sglang::"


def is_server_span(attributes: Mapping[str, str]) -> bool:
    """SGLang's request span: vLLM's latency names plus SGLang's ``module`` attribute."""
    module = attributes.get(MODULE)
    return module is not None and module.startswith(MODULE_PREFIX) and vllm.is_server_span(attributes)


def server_timing(attributes: Mapping[str, str]) -> dict[str, int]:
    """SGLang's decode and server total (e2e) under our ``latencylens.`` names, in integer ns;
    absent ones omitted. Its prefill and inference include the queue, so they are not read."""
    decode = first_seconds_ns(attributes, vllm.GEN_AI_LATENCY_TIME_IN_MODEL_DECODE)
    e2e = first_seconds_ns(attributes, vllm.GEN_AI_LATENCY_E2E)
    values = {semconv.PROVIDER_DECODE_NS: decode, semconv.PROVIDER_SERVER_TOTAL_NS: e2e}
    return {key: value for key, value in values.items() if value is not None}
