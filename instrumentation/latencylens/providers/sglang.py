"""SGLang: server timing in ``meta_info``, on the native ``/generate`` API and, on request, beside
each choice of its OpenAI-compatible API.

Native ``/generate`` replies (and every chunk of their SSE stream) carry ``meta_info`` with
``prompt_tokens``, ``completion_tokens`` (a running total in streams), ``cached_tokens``,
``reasoning_tokens``, ``id`` and ``finish_reason`` (an object: ``{"type": "length", ...}``). The
final one adds ``e2e_latency``: seconds from the tokenizer manager receiving the request to its
finish, the server total. Started with ``--enable-metrics``, it also gives ``queue_time`` (seconds
in the scheduler's wait queue), ``inference_time`` (seconds from entering the forward pass to the
finish: prefill + decode) and the epoch timestamps ``forward_entry_time`` and
``prefill_finished_time``, both from the server's one calibrated clock; their difference is prefill
and ``inference_time`` minus it is decode (both derived; without the timestamps inference stays
unsplit). ``/v1/chat/completions`` reports OpenAI ``usage`` (``reasoning_tokens`` beside the
counts); with ``"return_meta_info": true`` (non-streamed only) each choice carries the same
``meta_info`` (with ``n`` > 1, the timing is that of the choice with the longest ``e2e_latency``).
Streamed text is cumulative unless the server streams increments; either way a chunk is content
when its ``text`` differs from the chunk before.

A batch (``/generate`` given several prompts, or ``n`` > 1) answers a list of such replies, or
streams each request's chunks with its ``index``. Its counts are summed over the requests (each
sample is a request of its own, its prompt mostly read from the cache, as ``cached_tokens``
shows), every request's finish reason is kept, and its timing is that of the request with the
longest ``e2e_latency``: the one the call waited for.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from latencylens.providers._base import Usage, field_of, nonempty_text, seconds_to_ns, take_int, take_seconds
from latencylens.providers._batch import BatchStreamState, slowest, summed
from latencylens.providers._chat import USAGE_PATHS, ChatCompletionsAdapter, read_token_usage

_SPLIT_DERIVED = frozenset({"prefill", "decode"})
_COUNT_FIELDS = ("prompt_tokens", "completion_tokens", "cached_tokens", "reasoning_tokens")
_TIMING_FIELDS = (
    "e2e_latency",
    "queue_time",
    "inference_time",
    "forward_entry_time",
    "prefill_finished_time",
)


def _meta_info(holder: Any) -> tuple[Any, bool]:
    """``(meta_info, native)``: the top-level block of a native reply, else the slowest choice's."""
    meta = field_of(holder, "meta_info")
    if meta is not None:
        return meta, True
    choices = field_of(holder, "choices")
    if isinstance(choices, (list, tuple)) and choices:
        metas = [meta for meta in (field_of(choice, "meta_info") for choice in choices) if meta is not None]
        return (_slowest(metas) if metas else None), False
    return None, False


def _slowest(metas: Sequence[Any]) -> Any:
    """The ``meta_info`` of the request with the longest ``e2e_latency``."""
    return slowest(metas, lambda meta: seconds_to_ns(field_of(meta, "e2e_latency")))


def _read_native_counts(meta: Any, out: Usage) -> None:
    out.input_tokens = take_int(meta, "prompt_tokens", "meta_info.prompt_tokens", out, expected=True)
    out.output_tokens = take_int(meta, "completion_tokens", "meta_info.completion_tokens", out, expected=True)
    out.cache_read_input_tokens = take_int(
        meta, "cached_tokens", "meta_info.cached_tokens", out, expected=False
    )
    out.reasoning_output_tokens = take_int(
        meta, "reasoning_tokens", "meta_info.reasoning_tokens", out, expected=False
    )
    response_id = field_of(meta, "id")
    if isinstance(response_id, str):
        out.response_id = response_id
    _read_finish_reason(meta, out)


def _read_finish_reason(meta: Any, out: Usage) -> None:
    reason = field_of(meta, "finish_reason")
    kind = field_of(reason, "type") if reason is not None and not isinstance(reason, str) else reason
    if isinstance(kind, str) and kind:
        out.finish_reasons.append(kind)


def _batch_meta(replies: Sequence[Any], out: Usage) -> dict[str, Any] | None:
    """One ``meta_info`` for a batch's replies: each count summed (left out when a request lacks
    it), the timing fields of the request with the longest ``e2e_latency``, no id (each request
    has its own). Every request's finish reason goes to ``out``. None when no reply has one."""
    metas = [meta for meta in (field_of(reply, "meta_info") for reply in replies) if meta is not None]
    if not metas:
        return None
    combined: dict[str, Any] = {}
    for name in _COUNT_FIELDS:
        combined[name] = summed(metas, name)
    waited_for = _slowest(metas)
    for name in _TIMING_FIELDS:
        combined[name] = field_of(waited_for, name)
    for meta in metas:
        _read_finish_reason(meta, out)
    return combined


_FAR = 1e12
"""Seconds past any timestamp a server writes (the year 33,000)."""


def _read_timings(meta: Any, out: Usage) -> None:
    out.server_total_ns = take_seconds(meta, "e2e_latency", "meta_info.e2e_latency", out, expected=True)
    out.queue_ns = take_seconds(meta, "queue_time", "meta_info.queue_time", out, expected=True)
    out.inference_ns = take_seconds(meta, "inference_time", "meta_info.inference_time", out, expected=False)
    entered = field_of(meta, "forward_entry_time")
    prefilled = field_of(meta, "prefill_finished_time")
    inference = out.inference_ns
    if inference is None or not _is_time(entered) or not _is_time(prefilled):
        return
    prefill = seconds_to_ns(prefilled - entered)  # subtract first: epoch seconds × 1e9 loses ns
    if (
        prefill is not None and 0 <= prefill <= inference
    ):  # anything else is a clock the split cannot trust: leave it unsplit
        out.prefill_ns, out.decode_ns = prefill, inference - prefill
        out.derived = _SPLIT_DERIVED
        out.fields_reported += ("meta_info.forward_entry_time", "meta_info.prefill_finished_time")


def _is_time(value: Any) -> bool:
    """A timestamp in seconds: a finite number (``NaN`` fails the comparison), not a bool."""
    return type(value) in (int, float) and -_FAR < value < _FAR


class SGLangAdapter(ChatCompletionsAdapter):
    """Token counts from ``usage`` or ``meta_info``; server total, queue and inference from ``meta_info``."""

    def __init__(self, name: str = "sglang") -> None:
        super().__init__(name)

    def read_usage(self, holder: Any, out: Usage) -> None:
        if isinstance(holder, (list, tuple)):  # a batch's replies
            meta: Any = _batch_meta(holder, out)
            _read_native_counts(meta, out)
            _read_timings(meta, out)
            return
        meta, native = _meta_info(holder)
        if native:
            _read_native_counts(meta, out)
        else:
            usage = field_of(holder, "usage")
            read_token_usage(usage, USAGE_PATHS, out)
            if out.reasoning_output_tokens is None and usage is not None:  # SGLang puts it beside the counts
                out.reasoning_output_tokens = take_int(
                    usage, "reasoning_tokens", "usage.reasoning_tokens", out, expected=False
                )
        _read_timings(meta, out)

    def carries_usage(self, chunk: Any) -> bool:
        return field_of(chunk, "usage") is not None or field_of(chunk, "meta_info") is not None

    def new_stream_state(self) -> SGLangStreamState:
        return SGLangStreamState(self)


class SGLangStreamState(BatchStreamState):
    """OpenAI chat chunks, or native ``/generate`` chunks whose content is a changed ``text`` (per
    request of a batch, told apart by ``index``)."""

    __slots__ = ("_texts",)

    def __init__(self, adapter: SGLangAdapter) -> None:
        super().__init__(adapter)
        self._texts: dict[int | None, str] = {}

    def record_chunk(self, chunk: Any) -> bool:
        meta = field_of(chunk, "meta_info")
        if meta is None:
            return super().record_chunk(chunk)
        index = self.keep(chunk)  # every native chunk has meta_info; a request's last one its totals
        text = field_of(chunk, "text")
        if not nonempty_text(text) or text == self._texts.get(index):
            return False
        self._texts[index] = text
        return True
