"""Groq Chat Completions: token counts plus queue, prefill and decode time from ``usage``.

Groq reports ``queue_time``, ``prompt_time`` (prefill), ``completion_time`` (decode) and
``total_time`` in seconds. ``total_time`` is prompt + completion and excludes the queue, so all
server-side time is ``queue_time + total_time`` (derived). Streams carry the same object as
``x_groq.usage`` on the final chunk (and as top-level ``usage`` with ``include_usage``). A non-streamed
response's ``x_groq.usage`` is a different type (DRAM/SRAM cache stats) without timings, so it is skipped.
"""

from __future__ import annotations

from typing import Any

from latencylens.providers._base import Usage, field_of, take_seconds
from latencylens.providers._chat import ChatCompletionsAdapter, read_token_usage, usage_paths

_DERIVED = frozenset({"server_total"})


def _timing_paths(prefix: str) -> tuple[str, str, str, str]:
    return (
        f"{prefix}.queue_time",
        f"{prefix}.prompt_time",
        f"{prefix}.completion_time",
        f"{prefix}.total_time",
    )


_PATHS = {prefix: (usage_paths(prefix), _timing_paths(prefix)) for prefix in ("usage", "x_groq.usage")}


def _timed_usage(holder: Any) -> tuple[Any, str]:
    """The usage object that has timings, with its path: ``x_groq.usage`` first, then ``usage``."""
    x_usage = field_of(field_of(holder, "x_groq"), "usage")
    if x_usage is not None and field_of(x_usage, "total_time") is not None:
        return x_usage, "x_groq.usage"
    if x_usage is not None and field_of(x_usage, "queue_time") is not None:
        return x_usage, "x_groq.usage"
    return field_of(holder, "usage"), "usage"


class GroqAdapter(ChatCompletionsAdapter):
    """Token counts and Groq's reported server time."""

    def __init__(self, name: str = "groq") -> None:
        super().__init__(name)

    def read_usage(self, holder: Any, out: Usage) -> None:
        usage, prefix = _timed_usage(holder)
        token_paths, timing_paths = _PATHS[prefix]
        read_token_usage(usage, token_paths, out)
        queue = take_seconds(usage, "queue_time", timing_paths[0], out, expected=True)
        prompt = take_seconds(usage, "prompt_time", timing_paths[1], out, expected=True)
        completion = take_seconds(usage, "completion_time", timing_paths[2], out, expected=True)
        total = take_seconds(usage, "total_time", timing_paths[3], out, expected=True)
        out.queue_ns, out.prefill_ns, out.decode_ns = queue, prompt, completion
        if total is None and prompt is not None and completion is not None:
            total = prompt + completion
        if queue is not None and total is not None:
            out.server_total_ns = queue + total
            out.derived = _DERIVED

    def carries_usage(self, chunk: Any) -> bool:
        if field_of(chunk, "usage") is not None:
            return True
        x_groq = field_of(chunk, "x_groq")
        return x_groq is not None and field_of(x_groq, "usage") is not None
