"""vLLM's OpenAI-compatible server with ``--enable-per-request-metrics``: a ``metrics`` block in ms.

``metrics.queue_time_ms`` is the scheduler wait; ``time_to_first_token_ms`` starts when the request
is *scheduled*, so it is pure prefill; ``generation_time_ms`` is first → last token (decode). The
block rides on the final usage chunk of a stream. Frontend time (tokenization, detokenization) is
not reported, so no server total is claimed. The server's own OTel span (``gen_ai.latency.*``) is the
collector's business; this client sends it the ``traceparent`` to join.
"""

from __future__ import annotations

from typing import Any

from latencylens.providers._base import Usage, field_of, take_ms
from latencylens.providers._chat import USAGE_PATHS, ChatCompletionsAdapter, read_token_usage


class VLLMAdapter(ChatCompletionsAdapter):
    """Token counts from ``usage``; queue, prefill and decode from ``metrics``."""

    def __init__(self, name: str = "vllm") -> None:
        super().__init__(name)

    def read_usage(self, holder: Any, out: Usage) -> None:
        read_token_usage(field_of(holder, "usage"), USAGE_PATHS, out)
        metrics = field_of(holder, "metrics")
        out.queue_ns = take_ms(metrics, "queue_time_ms", "metrics.queue_time_ms", out, expected=True)
        out.prefill_ns = take_ms(
            metrics, "time_to_first_token_ms", "metrics.time_to_first_token_ms", out, expected=True
        )
        out.decode_ns = take_ms(
            metrics, "generation_time_ms", "metrics.generation_time_ms", out, expected=True
        )

    def carries_usage(self, chunk: Any) -> bool:
        return field_of(chunk, "usage") is not None or field_of(chunk, "metrics") is not None
