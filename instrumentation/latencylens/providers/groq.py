"""Groq Chat Completions: token counts plus queue, prefill and decode time from ``usage``.

Groq reports ``queue_time``, ``prompt_time`` (prefill), ``completion_time`` (decode) and
``total_time`` in seconds. ``total_time`` is prompt + completion and excludes the queue, so all
server-side time is ``queue_time + total_time`` (derived). Streams carry the same object as
``x_groq.usage`` on the final chunk (and as top-level ``usage`` with ``include_usage``). A non-streamed
response's ``x_groq.usage`` is a different type (DRAM/SRAM cache stats) without timings, so it is skipped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from latencylens.providers._base import (
    MAX_READ,
    MAX_SECONDS,
    CheckedAttributes,
    Usage,
    field_of,
    fields_of,
    mapping_types,
    note,
    seconds_to_ns,
)
from latencylens.providers._chat import (
    META_FIELDS,
    TOKEN_FIELDS,
    ChatCompletionsAdapter,
    meta,
    token_counts,
    usage_paths,
)
from latencylens.semconv import (
    GEN_AI_RESPONSE_FINISH_REASONS,
    GEN_AI_RESPONSE_ID,
    GEN_AI_RESPONSE_MODEL,
    GEN_AI_USAGE_INPUT_TOKENS,
    GEN_AI_USAGE_OUTPUT_TOKENS,
    PROVENANCE_DECODE,
    PROVENANCE_PREFILL,
    PROVENANCE_QUEUE,
    PROVENANCE_SERVER_TOTAL,
    PROVIDER_DECODE_NS,
    PROVIDER_FIELDS_REPORTED,
    PROVIDER_PREFILL_NS,
    PROVIDER_QUEUE_NS,
    PROVIDER_SERVER_TOTAL_NS,
    SOURCE_DERIVED,
    SOURCE_REPORTED,
)

_DERIVED = frozenset({"server_total"})


def _timing_paths(prefix: str) -> tuple[str, str, str, str]:
    return (
        f"{prefix}.queue_time",
        f"{prefix}.prompt_time",
        f"{prefix}.completion_time",
        f"{prefix}.total_time",
    )


_PATHS = {prefix: (usage_paths(prefix), _timing_paths(prefix)) for prefix in ("usage", "x_groq.usage")}


_TIMING_FIELDS = ("queue_time", "prompt_time", "completion_time", "total_time")
_USAGE_FIELDS = TOKEN_FIELDS + _TIMING_FIELDS
_HOLDER_FIELDS = ("x_groq", "usage")
_RESPONSE_FIELDS = META_FIELDS + _HOLDER_FIELDS
_LISTS = (GEN_AI_RESPONSE_FINISH_REASONS, PROVIDER_FIELDS_REPORTED)
_REPORTED_ONLY = (PROVIDER_FIELDS_REPORTED,)
_ALL_REPORTED = {prefix: tokens[:2] + timings for prefix, (tokens, timings) in _PATHS.items()}
"""Fields reported by a complete reply without token details, in the order ``extract`` notes them."""


def _timed_fields(x_groq: Any, usage: Any) -> tuple[Sequence[Any] | None, str]:
    """The :data:`_USAGE_FIELDS` of the usage object that has timings, with its path:
    ``x_groq.usage`` when it has a queue or total time, else ``usage`` (``None`` when absent)."""
    x_usage = field_of(x_groq, "usage") if x_groq is not None else None
    if x_usage is not None:
        values = fields_of(x_usage, _USAGE_FIELDS)
        if values[4] is not None or values[7] is not None:  # queue_time, total_time
            return values, "x_groq.usage"
    return (fields_of(usage, _USAGE_FIELDS) if usage is not None else None), "usage"


def _usual_attributes(
    x_groq: Any, usage: Any, response_id: str | None, model: str | None, reasons: list[str]
) -> dict[str, Any] | None:
    """What ``Usage.to_attributes`` gives for the usage Groq sends (token counts as ints, no token
    details, all four timings as floats), built directly; ``None`` for anything else."""
    values, prefix = _timed_fields(x_groq, usage)
    if values is None:
        return None
    (
        prompt_tokens,
        completion_tokens,
        prompt_details,
        completion_details,
        queue,
        prompt,
        completion,
        total,
    ) = values
    if (
        type(prompt_tokens) is not int
        or type(completion_tokens) is not int
        or prompt_details is not None
        or completion_details is not None
        or type(queue) is not float
        or type(prompt) is not float
        or type(completion) is not float
        or type(total) is not float
    ):
        return None
    # Counts and seconds in range (a NaN or an infinity fails the comparison): else the checked path.
    if not (
        0 <= prompt_tokens <= MAX_READ
        and 0 <= completion_tokens <= MAX_READ
        and 0.0 <= queue <= MAX_SECONDS
        and 0.0 <= prompt <= MAX_SECONDS
        and 0.0 <= completion <= MAX_SECONDS
        and 0.0 <= total <= MAX_SECONDS
    ):
        return None
    queue_ns = round(queue * 1e9)
    checked = (model is None or type(model) is str) and (response_id is None or type(response_id) is str)
    for reason in reasons:
        if type(reason) is not str:
            checked = False
    attributes: dict[str, Any] = {
        GEN_AI_USAGE_INPUT_TOKENS: prompt_tokens,
        GEN_AI_USAGE_OUTPUT_TOKENS: completion_tokens,
        PROVIDER_QUEUE_NS: queue_ns,
        PROVENANCE_QUEUE: SOURCE_REPORTED,
        PROVIDER_PREFILL_NS: round(prompt * 1e9),
        PROVENANCE_PREFILL: SOURCE_REPORTED,
        PROVIDER_DECODE_NS: round(completion * 1e9),
        PROVENANCE_DECODE: SOURCE_REPORTED,
        PROVIDER_SERVER_TOTAL_NS: queue_ns + round(total * 1e9),
        PROVENANCE_SERVER_TOTAL: SOURCE_DERIVED,
    }
    if model is not None:
        attributes[GEN_AI_RESPONSE_MODEL] = model
    if response_id is not None:
        attributes[GEN_AI_RESPONSE_ID] = response_id
    if reasons:
        attributes[GEN_AI_RESPONSE_FINISH_REASONS] = reasons
    attributes[PROVIDER_FIELDS_REPORTED] = list(_ALL_REPORTED[prefix])
    if not checked:
        return attributes
    # every value is now of a type checked above (ints, ns from round(), our strings, lists of str)
    clean = CheckedAttributes(attributes)
    clean.lists = _LISTS if reasons else _REPORTED_ONLY
    return clean


def _seconds_ns(value: Any) -> int | None:
    """:func:`seconds_to_ns`, with a shortcut for the float every Groq reply carries."""
    if type(value) is float and 0.0 <= value <= MAX_SECONDS:
        return round(value * 1e9)
    return seconds_to_ns(value)


class GroqAdapter(ChatCompletionsAdapter):
    """Token counts and Groq's reported server time."""

    def __init__(self, name: str = "groq") -> None:
        super().__init__(name)

    def extract(self, response: Any, headers: Mapping[str, str] | None = None) -> Usage:
        # One read of the five top-level fields instead of two passes (meta, then usage).
        out = Usage()
        response_id, model, choices, x_groq, usage = fields_of(response, _RESPONSE_FIELDS)
        meta(out, response_id, model, choices)
        self._read(x_groq, usage, out)
        if headers is not None:
            self.read_headers(headers, out)
        return out

    def response_attributes(self, response: Any, headers: Mapping[str, str] | None = None) -> dict[str, Any]:
        """The attributes ``extract(...).to_attributes()`` gives, built in one pass for the reply Groq
        sends (id, model, choices, every usage field a number, no token details); anything else takes
        the general path. Equivalence is pinned by tests over complete and partial replies."""
        response_id, model, choices, x_groq, usage = fields_of(response, _RESPONSE_FIELDS)
        # Headers need no look: Groq sends no timing headers (``read_headers`` is the no-op).
        if type(response_id) is str and type(model) is str and type(choices) is list:
            reasons = [str(reason) for choice in choices if (reason := field_of(choice, "finish_reason"))]
            attributes = _usual_attributes(x_groq, usage, response_id, model, reasons)
            if attributes is not None:
                return attributes
        return self.extract(response, headers).to_attributes()

    def stream_attributes(
        self, holder: Any, response_id: str | None, model: str | None, reasons: list[str]
    ) -> dict[str, Any]:
        """``stream_usage(...).to_attributes()``, built in one pass when the final chunk carries the
        usage Groq sends (pinned by the same tests as :meth:`response_attributes`)."""
        if holder is not None:
            x_groq, usage = fields_of(holder, _HOLDER_FIELDS)
            attributes = _usual_attributes(x_groq, usage, response_id, model, list(reasons))
            if attributes is not None:
                return attributes
        return self.stream_usage(holder, response_id, model, reasons).to_attributes()

    def read_usage(self, holder: Any, out: Usage) -> None:
        x_groq, usage = fields_of(holder, _HOLDER_FIELDS)
        self._read(x_groq, usage, out)

    def _read(self, x_groq: Any, usage: Any, out: Usage) -> None:
        values, prefix = _timed_fields(x_groq, usage)
        token_paths, timing_paths = _PATHS[prefix]
        if values is None:
            out.fields_missing += token_paths[:2]
            out.fields_missing += timing_paths
            return
        (
            prompt_tokens,
            completion_tokens,
            prompt_details,
            completion_details,
            queue,
            prompt,
            completion,
            total,
        ) = values
        token_counts(out, token_paths, prompt_tokens, completion_tokens, prompt_details, completion_details)
        queue, prompt, completion = _seconds_ns(queue), _seconds_ns(prompt), _seconds_ns(completion)
        total = _seconds_ns(total)
        if queue is not None and prompt is not None and completion is not None and total is not None:
            out.fields_reported += timing_paths
        else:
            for value, path in zip((queue, prompt, completion, total), timing_paths, strict=True):
                note(out, value is not None, path, True)
        out.queue_ns, out.prefill_ns, out.decode_ns = queue, prompt, completion
        if total is None and prompt is not None and completion is not None:
            total = prompt + completion
        if queue is not None and total is not None:
            out.server_total_ns = queue + total
            out.derived = _DERIVED

    def carries_usage(self, chunk: Any) -> bool:
        # Runs per chunk: SDK chunks (not mappings, known from the type cache) take plain getattr.
        if mapping_types.get(type(chunk)) is False:
            usage = getattr(chunk, "usage", None)
            x_groq = getattr(chunk, "x_groq", None)
        else:
            usage = field_of(chunk, "usage")
            x_groq = field_of(chunk, "x_groq")
        return usage is not None or (x_groq is not None and field_of(x_groq, "usage") is not None)
