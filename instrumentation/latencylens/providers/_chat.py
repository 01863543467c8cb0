"""Readers for the OpenAI Chat Completions shape, shared by every OpenAI-compatible adapter.

A response (or a final stream chunk) carries ``id``, ``model``, ``choices[].finish_reason`` and a
``usage`` object; adapters differ only in where usage and timings live, which they say by
overriding :meth:`ChatCompletionsAdapter.read_usage` and :meth:`ChatCompletionsAdapter.carries_usage`.
Field paths are string constants so reading a response builds no strings.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from latencylens.providers._base import (
    MAX_READ,
    BaseAdapter,
    StreamStateBase,
    Usage,
    as_int,
    field_of,
    fields_of,
    is_sdk_object,
    nonempty_text,
    note,
    take_int,
)


def usage_paths(prefix: str) -> tuple[str, str, str, str, str]:
    """Full paths of the five token fields under ``prefix`` (computed once per adapter, not per call)."""
    return (
        f"{prefix}.prompt_tokens",
        f"{prefix}.completion_tokens",
        f"{prefix}.prompt_tokens_details.cached_tokens",
        f"{prefix}.prompt_tokens_details.cache_write_tokens",
        f"{prefix}.completion_tokens_details.reasoning_tokens",
    )


USAGE_PATHS = usage_paths("usage")


TOKEN_FIELDS = ("prompt_tokens", "completion_tokens", "prompt_tokens_details", "completion_tokens_details")
"""The fields of a Chat Completions ``usage`` object that :func:`token_counts` takes, in order."""
META_FIELDS = ("id", "model", "choices")
"""The fields of a response that :func:`meta` takes, in order."""


def read_token_usage(usage: Any, paths: tuple[str, str, str, str, str], out: Usage) -> None:
    """Token counts of a Chat Completions ``usage`` object (cached ⊂ prompt, reasoning ⊂ completion)."""
    if usage is None:
        out.fields_missing += paths[:2]
        return
    token_counts(out, paths, *fields_of(usage, TOKEN_FIELDS))


def token_counts(
    out: Usage,
    paths: tuple[str, str, str, str, str],
    prompt: Any,
    completion: Any,
    prompt_details: Any,
    completion_details: Any,
) -> None:
    """Fill ``out`` from the four :data:`TOKEN_FIELDS` values of a ``usage`` object already read."""
    if type(prompt) is not int or not 0 <= prompt <= MAX_READ:
        prompt = as_int(prompt)
    if type(completion) is not int or not 0 <= completion <= MAX_READ:
        completion = as_int(completion)
    out.input_tokens = prompt
    out.output_tokens = completion
    if prompt is not None and completion is not None:  # the usual case: one extend, no per-field note
        out.fields_reported += paths[:2]
    else:
        note(out, prompt is not None, paths[0], True)
        note(out, completion is not None, paths[1], True)
    if prompt_details is not None:
        out.cache_read_input_tokens = take_int(prompt_details, "cached_tokens", paths[2], out, expected=False)
        out.cache_creation_input_tokens = take_int(
            prompt_details, "cache_write_tokens", paths[3], out, expected=False
        )
    if completion_details is not None:
        out.reasoning_output_tokens = take_int(
            completion_details, "reasoning_tokens", paths[4], out, expected=False
        )


def read_meta(obj: Any, out: Usage) -> None:
    """Response id, model and the finish reason of every choice that has one."""
    meta(out, *fields_of(obj, META_FIELDS))


def meta(out: Usage, response_id: Any, model: Any, choices: Any) -> None:
    """Fill ``out`` from the three :data:`META_FIELDS` values of a response already read."""
    if type(response_id) is str or isinstance(response_id, str):
        out.response_id = response_id
    if type(model) is str or isinstance(model, str):
        out.response_model = model
    if type(choices) is list or isinstance(choices, (list, tuple)):
        for choice in choices:
            reason = field_of(choice, "finish_reason")
            if reason:
                out.finish_reasons.append(str(reason))


def has_content(chunk: Any) -> bool:
    """True when any choice's ``delta.content`` is a non-empty string (role-only chunks are not)."""
    choices = field_of(chunk, "choices")
    if not choices or isinstance(choices, (str, Mapping)):
        return False
    for choice in choices:
        if nonempty_text(field_of(field_of(choice, "delta"), "content")):
            return True
    return False


class ChatCompletionsAdapter(BaseAdapter):
    """Adapter for an OpenAI-compatible Chat Completions API; reports token counts only."""

    sdk_types: tuple[type | None, type | None, type | None] = (None, None, None)
    """The SDK chunk, choice and delta types the latest stream state learnt (read with ``getattr``);
    a new state starts from them, so a stream's first chunk takes the short path too."""

    def read_usage(self, holder: Any, out: Usage) -> None:
        """Fill ``out`` from the response or chunk ``holder`` (``None`` if usage never came)."""
        read_token_usage(field_of(holder, "usage"), USAGE_PATHS, out)

    def carries_usage(self, chunk: Any) -> bool:
        """Whether this stream chunk holds the whole request's usage."""
        return field_of(chunk, "usage") is not None

    def read_headers(self, headers: Mapping[str, str], out: Usage) -> None:
        """Server timings sent as HTTP headers (none for plain OpenAI-compatible servers)."""

    def extract(self, response: Any, headers: Mapping[str, str] | None = None) -> Usage:
        out = Usage()
        read_meta(response, out)
        self.read_usage(response, out)
        if headers is not None:
            self.read_headers(headers, out)
        return out

    def stream_usage(
        self, holder: Any, response_id: str | None, model: str | None, reasons: list[str]
    ) -> Usage:
        """A stream's usage: what the chunk ``holder`` carried (``None`` if usage never came), with
        the response id, model and finish reasons its chunks gave."""
        out = Usage(response_model=model, response_id=response_id, finish_reasons=list(reasons))
        self.read_usage(holder, out)
        return out

    def stream_attributes(
        self, holder: Any, response_id: str | None, model: str | None, reasons: list[str]
    ) -> dict[str, Any]:
        """Exactly ``stream_usage(...).to_attributes()``; an adapter may build the same dict directly
        where that is measurably cheaper (it runs once per streamed call)."""
        return self.stream_usage(holder, response_id, model, reasons).to_attributes()

    def new_stream_state(self) -> ChatStreamState:
        return ChatStreamState(self)


class ChatStreamState(StreamStateBase):
    """Sees each Chat Completions chunk once; usage comes from the last chunk that carried it.

    Per chunk: one pass over ``choices`` (content and finish reason), and one ``usage`` lookup;
    the usage chunk is kept and read once, at the end. The chunk, choice and delta types of a stream
    repeat, so once a type is known to be an SDK object its fields are read with plain ``getattr``.
    """

    __slots__ = (
        "_adapter",
        "_carries",
        "_choice_type",
        "_chunk_type",
        "_delta_type",
        "_finish_reasons",
        "_response_id",
        "_response_model",
        "_usage_chunk",
    )

    def __init__(self, adapter: ChatCompletionsAdapter) -> None:
        self._adapter = adapter
        self._carries = adapter.carries_usage
        self._response_id: str | None = None
        self._response_model: str | None = None
        self._finish_reasons: list[str] = []
        self._usage_chunk: Any = None
        # SDK types learnt by earlier streams of this adapter (a fact about the type, not the stream)
        self._chunk_type, self._choice_type, self._delta_type = adapter.sdk_types

    def record_chunk(self, chunk: Any) -> bool:
        if self._response_id is None:
            response_id = field_of(chunk, "id")
            if isinstance(response_id, str):
                self._response_id = response_id
            model = field_of(chunk, "model")
            if isinstance(model, str):
                self._response_model = model
        if self._carries(chunk):
            self._usage_chunk = chunk
        cls = type(chunk)
        if cls is dict:
            choices = chunk.get("choices")
        elif cls is self._chunk_type:
            choices = getattr(chunk, "choices", None)
        else:
            if is_sdk_object(cls):
                self._chunk_type = cls
                self._adapter.sdk_types = (cls, self._choice_type, self._delta_type)
            choices = field_of(chunk, "choices")
        if type(choices) is not list and (
            not choices or isinstance(choices, (str, Mapping)) or not isinstance(choices, Iterable)
        ):
            return False
        content = False
        for choice in choices:
            cls = type(choice)
            if cls is dict:
                delta = choice.get("delta")
                reason = choice.get("finish_reason")
            elif cls is self._choice_type:
                delta = getattr(choice, "delta", None)
                reason = getattr(choice, "finish_reason", None)
            else:
                if is_sdk_object(cls):
                    self._choice_type = cls
                    self._adapter.sdk_types = (self._chunk_type, cls, self._delta_type)
                delta = field_of(choice, "delta")
                reason = field_of(choice, "finish_reason")
            if not content:
                cls = type(delta)
                if cls is dict:
                    text = delta.get("content")
                elif cls is self._delta_type:
                    text = getattr(delta, "content", None)
                else:
                    if delta is not None and is_sdk_object(cls):
                        self._delta_type = cls
                        self._adapter.sdk_types = (self._chunk_type, self._choice_type, cls)
                    text = field_of(delta, "content")
                content = type(text) is str and text != ""  # nonempty_text, inlined: runs per chunk
            if reason:
                self._finish_reasons.append(str(reason))
        return content

    def usage(self) -> Usage:
        return self._adapter.stream_usage(
            self._usage_chunk, self._response_id, self._response_model, self._finish_reasons
        )

    def usage_attributes(self) -> dict[str, Any]:
        return self._adapter.stream_attributes(
            self._usage_chunk, self._response_id, self._response_model, self._finish_reasons
        )
