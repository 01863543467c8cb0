"""Hugging Face Text Generation Inference: server timing comes only as HTTP response headers.

Non-streamed responses carry ``x-queue-time`` (queue), ``x-inference-time`` (prefill + decode,
not separable: ``x-time-per-token`` includes prefill, so it is not used as ITL), ``x-total-time``
(server total) and ``x-validation-time`` (tokenization, inside the total), all integer ms, plus
``x-prompt-tokens`` / ``x-generated-tokens``. The collector shows the inference time as its own part
(``inference``, never guessed into prefill and decode) and total − queue − inference as the server's
other time (``server_other``). Streams send none of these: only client measurements
and the body's usage remain. Bodies are the OpenAI chat shape (``/v1/chat/completions``) or the native
``/generate`` shape (``generated_text`` with ``details.generated_tokens``; streamed as ``token.text``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from latencylens.providers._base import (
    Usage,
    as_int,
    field_of,
    header,
    ms_to_ns,
    nonempty_text,
    note,
)
from latencylens.providers._chat import USAGE_PATHS, ChatCompletionsAdapter, ChatStreamState, read_token_usage

_TIMING_HEADERS = (
    ("x-queue-time", "header.x-queue-time"),
    ("x-inference-time", "header.x-inference-time"),
    ("x-total-time", "header.x-total-time"),
    ("x-validation-time", "header.x-validation-time"),
)


def _header_int(headers: Mapping[str, str], name: str) -> int | None:
    value = header(headers, name)
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


class TGIAdapter(ChatCompletionsAdapter):
    """Token counts from the body (either shape) and timings from the headers."""

    def __init__(self, name: str = "tgi") -> None:
        super().__init__(name)

    def read_usage(self, holder: Any, out: Usage) -> None:
        details = field_of(holder, "details")
        if details is not None and field_of(holder, "usage") is None:
            out.output_tokens = as_int(field_of(details, "generated_tokens"))
            note(out, out.output_tokens is not None, "details.generated_tokens", True)
            reason = field_of(details, "finish_reason")
            if isinstance(reason, str):
                out.finish_reasons.append(reason)
            return
        read_token_usage(field_of(holder, "usage"), USAGE_PATHS, out)

    def read_headers(self, headers: Mapping[str, str], out: Usage) -> None:
        values = []
        for name, path in _TIMING_HEADERS:
            value = ms_to_ns(header(headers, name))
            note(out, value is not None, path, False)
            values.append(value)
        out.queue_ns, out.inference_ns, out.server_total_ns = values[0], values[1], values[2]
        if out.input_tokens is None:
            out.input_tokens = _header_int(headers, "x-prompt-tokens")
            note(out, out.input_tokens is not None, "header.x-prompt-tokens", False)
        if out.output_tokens is None:
            out.output_tokens = _header_int(headers, "x-generated-tokens")
            note(out, out.output_tokens is not None, "header.x-generated-tokens", False)
        if out.input_tokens is not None and "usage.prompt_tokens" in out.fields_missing:
            out.fields_missing.remove("usage.prompt_tokens")
        if out.output_tokens is not None and "usage.completion_tokens" in out.fields_missing:
            out.fields_missing.remove("usage.completion_tokens")

    def carries_usage(self, chunk: Any) -> bool:
        return field_of(chunk, "usage") is not None or field_of(chunk, "details") is not None

    def new_stream_state(self) -> TGIStreamState:
        return TGIStreamState(self)


class TGIStreamState(ChatStreamState):
    """OpenAI chat chunks, or native ``/generate_stream`` events whose content is ``token.text``."""

    __slots__ = ()

    def record_chunk(self, chunk: Any) -> bool:
        token = field_of(chunk, "token")
        if token is None:
            return super().record_chunk(chunk)
        if field_of(chunk, "details") is not None:
            self._usage_chunk = chunk
        return nonempty_text(field_of(token, "text")) and not field_of(token, "special")
