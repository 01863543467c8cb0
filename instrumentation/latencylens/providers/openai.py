"""OpenAI Chat Completions and Responses API, and the fallback for any OpenAI-compatible server.

OpenAI reports no server timing in the body. For a non-streamed call the ``openai-processing-ms``
header is the server's whole processing time (queue + prefill + decode, not splittable), recorded
as the server total; streams send that header before generating, so it is ignored there.
Chat Completions streams carry usage only with ``stream_options.include_usage``, in an extra final
chunk whose ``choices`` is empty. Responses API objects (``object == "response"``) keep usage as
``input_tokens`` (cached included) / ``output_tokens`` (reasoning included); their streams are typed
events, with content in ``response.output_text.delta`` and usage in ``response.completed``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from latencylens.providers._base import (
    StreamStateBase,
    Usage,
    field_of,
    header,
    ms_to_ns,
    nonempty_text,
    note,
    take_int,
)
from latencylens.providers._chat import ChatCompletionsAdapter, ChatStreamState

PROCESSING_MS_HEADER = "openai-processing-ms"
_PROCESSING_PATH = "header.openai-processing-ms"
_R_INPUT = "usage.input_tokens"
_R_OUTPUT = "usage.output_tokens"
_R_CACHED = "usage.input_tokens_details.cached_tokens"
_R_CACHE_WRITE = "usage.input_tokens_details.cache_write_tokens"
_R_REASONING = "usage.output_tokens_details.reasoning_tokens"
_CONTENT_EVENTS = frozenset(
    {"response.output_text.delta", "response.reasoning_text.delta", "response.function_call_arguments.delta"}
)
_FINAL_EVENTS = frozenset({"response.completed", "response.incomplete", "response.failed"})


def is_responses_object(obj: Any) -> bool:
    """A Responses API ``Response`` (``object == "response"``), not a chat completion."""
    return field_of(obj, "object") == "response"


def read_responses_usage(response: Any, out: Usage) -> None:
    """Id, model, status and token counts of a Responses API ``Response``."""
    response_id = field_of(response, "id")
    if isinstance(response_id, str):
        out.response_id = response_id
    model = field_of(response, "model")
    if isinstance(model, str):
        out.response_model = model
    status = field_of(response, "status")
    if isinstance(status, str) and status != "in_progress":
        out.finish_reasons.append(status)
    usage = field_of(response, "usage")
    out.input_tokens = take_int(usage, "input_tokens", _R_INPUT, out, expected=True)
    out.output_tokens = take_int(usage, "output_tokens", _R_OUTPUT, out, expected=True)
    if usage is None:
        return
    details = field_of(usage, "input_tokens_details")
    if details is not None:
        out.cache_read_input_tokens = take_int(details, "cached_tokens", _R_CACHED, out, expected=False)
        out.cache_creation_input_tokens = take_int(
            details, "cache_write_tokens", _R_CACHE_WRITE, out, expected=False
        )
    details = field_of(usage, "output_tokens_details")
    if details is not None:
        out.reasoning_output_tokens = take_int(details, "reasoning_tokens", _R_REASONING, out, expected=False)


class OpenAIAdapter(ChatCompletionsAdapter):
    """Token counts from ``usage`` (either API); server total from ``openai-processing-ms``."""

    def __init__(self, name: str = "openai") -> None:
        super().__init__(name)

    def extract(self, response: Any, headers: Mapping[str, str] | None = None) -> Usage:
        if is_responses_object(response):
            out = Usage()
            read_responses_usage(response, out)
        else:
            out = super().extract(response)
        if headers is not None:
            self.read_headers(headers, out)
        return out

    def read_headers(self, headers: Mapping[str, str], out: Usage) -> None:
        total = ms_to_ns(header(headers, PROCESSING_MS_HEADER))
        note(out, total is not None, _PROCESSING_PATH, False)
        if total is not None:
            out.server_total_ns = total

    def new_stream_state(self) -> OpenAIStreamState:  # type: ignore[override]
        return OpenAIStreamState(self)


class OpenAIStreamState(StreamStateBase):
    """Chat chunks or Responses events, told apart by the first item (events have a ``type``)."""

    __slots__ = ("_chat", "_final", "_meta", "_responses")

    def __init__(self, adapter: OpenAIAdapter) -> None:
        self._chat = ChatStreamState(adapter)
        self._responses: bool | None = None
        self._final: Any = None
        self._meta: Any = None

    def record_chunk(self, chunk: Any) -> bool:
        responses = self._responses
        if responses is None:
            event_type = field_of(chunk, "type")
            responses = self._responses = isinstance(event_type, str) and event_type.startswith("response.")
        if not responses:
            return self._chat.record_chunk(chunk)
        event_type = field_of(chunk, "type")
        if event_type in _CONTENT_EVENTS:
            return nonempty_text(field_of(chunk, "delta"))
        if event_type in _FINAL_EVENTS:
            self._final = field_of(chunk, "response")
        elif event_type == "response.created":
            self._meta = field_of(chunk, "response")
        return False

    def usage(self) -> Usage:
        if not self._responses:
            return self._chat.usage()
        out = Usage()
        read_responses_usage(self._final if self._final is not None else self._meta, out)
        return out

    def usage_attributes(self) -> dict[str, Any]:
        if not self._responses:
            return self._chat.usage_attributes()
        return super().usage_attributes()
