"""llama.cpp ``llama-server``: OpenAI-style ``usage`` plus a top-level ``timings`` object in ms.

``timings.prompt_n`` excludes the ``cache_n`` prompt tokens reused from the KV cache, so the prompt
length is ``cache_n + prompt_n`` and ``cache_n`` is the cache read. ``prompt_ms`` is prefill (slot
start → first token sampled; slot wait is not reported, so there is no queue), ``predicted_ms`` is
decode (first → last token) over ``predicted_n`` generated tokens. In a stream ``timings`` rides on
the last chunk. Without ``timings`` (other builds), the ``usage`` counts are used.
"""

from __future__ import annotations

from typing import Any

from latencylens.providers._base import Usage, field_of, take_int, take_ms
from latencylens.providers._chat import USAGE_PATHS, ChatCompletionsAdapter, read_token_usage


class LlamaCppAdapter(ChatCompletionsAdapter):
    """Token counts and prefill/decode time from ``timings``."""

    def __init__(self, name: str = "llama.cpp") -> None:
        super().__init__(name)

    def read_usage(self, holder: Any, out: Usage) -> None:
        timings = field_of(holder, "timings")
        if timings is None:
            read_token_usage(field_of(holder, "usage"), USAGE_PATHS, out)
            out.fields_missing.append("timings")
            return
        cache_n = take_int(timings, "cache_n", "timings.cache_n", out, expected=True)
        prompt_n = take_int(timings, "prompt_n", "timings.prompt_n", out, expected=True)
        if prompt_n is not None:
            out.input_tokens = prompt_n + (cache_n or 0)
            out.cache_read_input_tokens = cache_n
        out.output_tokens = take_int(timings, "predicted_n", "timings.predicted_n", out, expected=True)
        out.prefill_ns = take_ms(timings, "prompt_ms", "timings.prompt_ms", out, expected=True)
        out.decode_ns = take_ms(timings, "predicted_ms", "timings.predicted_ms", out, expected=True)
        usage = field_of(holder, "usage")
        if usage is not None:
            reasoning = field_of(field_of(usage, "completion_tokens_details"), "reasoning_tokens")
            if type(reasoning) is int:
                out.reasoning_output_tokens = reasoning

    def carries_usage(self, chunk: Any) -> bool:
        return field_of(chunk, "timings") is not None or field_of(chunk, "usage") is not None
