"""Cerebras Chat Completions: OpenAI-style ``usage`` plus a sibling ``time_info`` in seconds.

``time_info.queue_time`` / ``prompt_time`` / ``completion_time`` are queue, prefill and decode;
``total_time`` is the server's wall-clock total and, unlike Groq's, already includes the queue (and
a few ms of other server work), so it is the server total as reported. Streams carry ``usage`` and
``time_info`` only on the final chunk.
"""

from __future__ import annotations

from typing import Any

from latencylens.providers._base import Usage, field_of, take_seconds
from latencylens.providers._chat import USAGE_PATHS, ChatCompletionsAdapter, read_token_usage


class CerebrasAdapter(ChatCompletionsAdapter):
    """Token counts and ``time_info`` timings."""

    def __init__(self, name: str = "cerebras") -> None:
        super().__init__(name)

    def read_usage(self, holder: Any, out: Usage) -> None:
        read_token_usage(field_of(holder, "usage"), USAGE_PATHS, out)
        info = field_of(holder, "time_info")
        out.queue_ns = take_seconds(info, "queue_time", "time_info.queue_time", out, expected=True)
        out.prefill_ns = take_seconds(info, "prompt_time", "time_info.prompt_time", out, expected=True)
        out.decode_ns = take_seconds(info, "completion_time", "time_info.completion_time", out, expected=True)
        out.server_total_ns = take_seconds(info, "total_time", "time_info.total_time", out, expected=True)

    def carries_usage(self, chunk: Any) -> bool:
        return field_of(chunk, "usage") is not None or field_of(chunk, "time_info") is not None
