"""llama.cpp ``llama-server``: OpenAI-style ``usage`` plus a top-level ``timings`` object in ms.

``timings.prompt_n`` excludes the ``cache_n`` prompt tokens reused from the KV cache, so the prompt
length is ``cache_n + prompt_n`` and ``cache_n`` is the cache read. ``prompt_ms`` is prefill (slot
start → first token sampled; slot wait is not reported, so there is no queue), ``predicted_ms`` is
decode (first → last token) over ``predicted_n`` generated tokens. In a stream ``timings`` rides on
the last chunk. Without ``timings`` (other builds), the ``usage`` counts are used.

The native ``/completion`` API answers one object (in a stream, the last chunk, ``stop`` true) with
the same ``timings``, ``tokens_evaluated`` (the whole prompt), ``tokens_cached``,
``tokens_predicted``, ``model`` and ``stop_type`` (``eos``, ``limit`` or ``word``); each stream
chunk before it carries the next piece of text in ``content`` and the counts so far. Given several
prompts (or ``n_cmpl`` > 1) it answers a list, or streams each request's chunks with its
``index``: the counts are summed over the requests and the timing is that of the request whose
``prompt_ms + predicted_ms`` is the longest, the one the call waited for (a slot's wait, not
reported, is in neither).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from latencylens.providers._base import Usage, field_of, ms_to_ns, nonempty_text, take_int, take_ms
from latencylens.providers._batch import BatchStreamState, slowest, summed
from latencylens.providers._chat import USAGE_PATHS, ChatCompletionsAdapter, read_token_usage

_NATIVE_COUNTS = ("tokens_evaluated", "tokens_cached", "tokens_predicted")
_TIMING_COUNTS = ("cache_n", "prompt_n", "predicted_n")
_STOPPED = frozenset({"eos", "limit", "word"})
"""``stop_type`` of a finished request (``none`` while it generates)."""


def _processing_ns(timings: Any) -> int | None:
    prefill, decode = ms_to_ns(field_of(timings, "prompt_ms")), ms_to_ns(field_of(timings, "predicted_ms"))
    return None if prefill is None or decode is None else prefill + decode


def _read_native_meta(reply: Any, out: Usage) -> None:
    """The model and finish reason only native ``/completion`` replies carry."""
    stop_type = field_of(reply, "stop_type")
    if isinstance(stop_type, str) and stop_type in _STOPPED:
        out.finish_reasons.append(stop_type)
    model = field_of(reply, "model")
    if out.response_model is None and isinstance(model, str) and model:
        out.response_model = model


def _batch_reply(replies: Sequence[Any], out: Usage) -> dict[str, Any]:
    """One native reply for a batch's: counts summed, the timing of the request the call waited
    for (only when every request has ``timings``). Every request's finish reason goes to ``out``."""
    for reply in replies:
        _read_native_meta(reply, out)
    combined: dict[str, Any] = {name: summed(replies, name) for name in _NATIVE_COUNTS}
    timings = [block for block in (field_of(reply, "timings") for reply in replies) if block is not None]
    if timings and len(timings) == len(replies):
        waited_for = slowest(timings, _processing_ns)
        combined["timings"] = {
            **{name: summed(timings, name) for name in _TIMING_COUNTS},
            "prompt_ms": field_of(waited_for, "prompt_ms"),
            "predicted_ms": field_of(waited_for, "predicted_ms"),
        }
    return combined


def _read_native_counts(reply: Any, out: Usage) -> None:
    out.input_tokens = take_int(reply, "tokens_evaluated", "tokens_evaluated", out, expected=True)
    out.cache_read_input_tokens = take_int(reply, "tokens_cached", "tokens_cached", out, expected=False)
    out.output_tokens = take_int(reply, "tokens_predicted", "tokens_predicted", out, expected=True)


class LlamaCppAdapter(ChatCompletionsAdapter):
    """Token counts and prefill/decode time from ``timings``."""

    def __init__(self, name: str = "llama.cpp") -> None:
        super().__init__(name)

    def read_usage(self, holder: Any, out: Usage) -> None:
        native = isinstance(holder, (list, tuple))
        if native:  # a native batch's replies
            holder = _batch_reply(holder, out)
        else:
            _read_native_meta(holder, out)
            native = field_of(holder, "tokens_evaluated") is not None
        timings = field_of(holder, "timings")
        if timings is None:
            if native:
                _read_native_counts(holder, out)
            else:
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

    def new_stream_state(self) -> LlamaCppStreamState:
        return LlamaCppStreamState(self)


class LlamaCppStreamState(BatchStreamState):
    """OpenAI chat chunks, or native ``/completion`` chunks (a boolean ``stop``) whose content is a
    non-empty ``content`` piece; a batch's requests told apart by ``index``."""

    __slots__ = ()

    def record_chunk(self, chunk: Any) -> bool:
        if type(field_of(chunk, "stop")) is not bool:
            return super().record_chunk(chunk)
        self.keep(chunk)  # each native chunk has the counts so far; a request's last one its timings
        return nonempty_text(field_of(chunk, "content"))
