"""NVIDIA NIM for LLMs: OpenAI-compatible, with an experimental ``stats`` block in ms.

Started with ``NIM_PER_REQ_METRICS_ENABLE=1``, ``/v1/chat/completions`` and ``/v1/completions``
(streamed or not) add ``stats``: ``generation_time_in_ms`` ("total time for LLM processing": prefill
+ decode, not split, so it is reported as inference), ``time_in_queue_in_ms`` (the wait in the
queue; vLLM-backed NIMs only), ``llm_input_token_length`` / ``llm_output_token_length`` and
``response_tokens.time_to_first_token_in_ms``, which counts from the start of processing. Where that
start lies relative to the queue is not documented, so neither prefill nor decode is derived from
it. NIMs built on vLLM may instead return vLLM's per-request ``metrics`` block; it is read as the
vLLM adapter reads it. Token counts come from ``usage``, else from ``stats``. In a stream, the last
``stats`` seen is read with the last ``usage``, whichever chunks carried them.
"""

from __future__ import annotations

from typing import Any

from latencylens.providers._base import Usage, field_of, take_int, take_ms
from latencylens.providers._chat import USAGE_PATHS, ChatStreamState, read_token_usage
from latencylens.providers.vllm import VLLMAdapter


def _read_stats(stats: Any, usage: Any, out: Usage) -> None:
    if usage is not None:
        read_token_usage(usage, USAGE_PATHS, out)
    else:
        out.input_tokens = take_int(
            stats, "llm_input_token_length", "stats.llm_input_token_length", out, expected=True
        )
        out.output_tokens = take_int(
            stats, "llm_output_token_length", "stats.llm_output_token_length", out, expected=True
        )
    out.queue_ns = take_ms(stats, "time_in_queue_in_ms", "stats.time_in_queue_in_ms", out, expected=False)
    out.inference_ns = take_ms(
        stats, "generation_time_in_ms", "stats.generation_time_in_ms", out, expected=True
    )


class NIMAdapter(VLLMAdapter):
    """Token counts from ``usage`` or ``stats``; queue and unsplit inference from ``stats``."""

    def __init__(self, name: str = "nim") -> None:
        super().__init__(name)

    def read_usage(self, holder: Any, out: Usage) -> None:
        stats = field_of(holder, "stats")
        if stats is None and field_of(holder, "metrics") is not None:
            super().read_usage(holder, out)
            return
        _read_stats(stats, field_of(holder, "usage"), out)

    def carries_usage(self, chunk: Any) -> bool:
        return field_of(chunk, "stats") is not None or super().carries_usage(chunk)

    def new_stream_state(self) -> NIMStreamState:
        return NIMStreamState(self)


class NIMStreamState(ChatStreamState):
    """Chat chunks; keeps the last ``stats`` even when ``usage`` arrives on a later chunk."""

    __slots__ = ("_stats",)

    def __init__(self, adapter: NIMAdapter) -> None:
        super().__init__(adapter)
        self._stats: Any = None

    def record_chunk(self, chunk: Any) -> bool:
        content = super().record_chunk(chunk)
        stats = field_of(chunk, "stats")
        if stats is not None:
            self._stats = stats
        elif self._stats is not None and self._usage_chunk is chunk:  # usage after stats: read both
            self._usage_chunk = {
                "usage": field_of(chunk, "usage"),
                "metrics": field_of(chunk, "metrics"),
                "stats": self._stats,
            }
        return content
