"""Readers for the OpenAI Chat Completions shape, shared by every OpenAI-compatible adapter.

A response (or a final stream chunk) carries ``id``, ``model``, ``choices[].finish_reason`` and a
``usage`` object; adapters differ only in where usage and timings live, which they say by
overriding :meth:`ChatCompletionsAdapter.read_usage` and :meth:`ChatCompletionsAdapter.carries_usage`.
Field paths are string constants so reading a response builds no strings.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from latencylens.providers._base import BaseAdapter, Usage, field_of, nonempty_text, take_int


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


def read_token_usage(usage: Any, paths: tuple[str, str, str, str, str], out: Usage) -> None:
    """Token counts of a Chat Completions ``usage`` object (cached ⊂ prompt, reasoning ⊂ completion)."""
    out.input_tokens = take_int(usage, "prompt_tokens", paths[0], out, expected=True)
    out.output_tokens = take_int(usage, "completion_tokens", paths[1], out, expected=True)
    if usage is None:
        return
    prompt_details = field_of(usage, "prompt_tokens_details")
    if prompt_details is not None:
        out.cache_read_input_tokens = take_int(prompt_details, "cached_tokens", paths[2], out, expected=False)
        out.cache_creation_input_tokens = take_int(
            prompt_details, "cache_write_tokens", paths[3], out, expected=False
        )
    completion_details = field_of(usage, "completion_tokens_details")
    if completion_details is not None:
        out.reasoning_output_tokens = take_int(
            completion_details, "reasoning_tokens", paths[4], out, expected=False
        )


def read_meta(obj: Any, out: Usage) -> None:
    """Response id, model and the finish reason of every choice that has one."""
    response_id = field_of(obj, "id")
    if isinstance(response_id, str):
        out.response_id = response_id
    model = field_of(obj, "model")
    if isinstance(model, str):
        out.response_model = model
    choices = field_of(obj, "choices")
    if isinstance(choices, (list, tuple)):
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

    def new_stream_state(self) -> ChatStreamState:
        return ChatStreamState(self)


class ChatStreamState:
    """Sees each Chat Completions chunk once; usage comes from the last chunk that carried it.

    Per chunk: one pass over ``choices`` (content and finish reason), and one ``usage`` lookup;
    the usage chunk is kept and read once, at the end.
    """

    __slots__ = ("_adapter", "_carries", "_meta", "_usage_chunk")

    def __init__(self, adapter: ChatCompletionsAdapter) -> None:
        self._adapter = adapter
        self._carries = adapter.carries_usage
        self._meta = Usage()
        self._usage_chunk: Any = None

    def record_chunk(self, chunk: Any) -> bool:
        meta = self._meta
        if meta.response_id is None:
            response_id = field_of(chunk, "id")
            if isinstance(response_id, str):
                meta.response_id = response_id
            model = field_of(chunk, "model")
            if isinstance(model, str):
                meta.response_model = model
        if self._carries(chunk):
            self._usage_chunk = chunk
        choices = field_of(chunk, "choices")
        if type(choices) is not list and (not choices or isinstance(choices, (str, Mapping))):
            return False
        content = False
        for choice in choices:
            if type(choice) is dict:
                delta = choice.get("delta")
                reason = choice.get("finish_reason")
            else:
                delta = field_of(choice, "delta")
                reason = field_of(choice, "finish_reason")
            if not content:
                text = delta.get("content") if type(delta) is dict else field_of(delta, "content")
                content = type(text) is str and text != ""  # nonempty_text, inlined: runs per chunk
            if reason:
                meta.finish_reasons.append(str(reason))
        return content

    def usage(self) -> Usage:
        out = Usage(
            response_model=self._meta.response_model,
            response_id=self._meta.response_id,
            finish_reasons=list(self._meta.finish_reasons),
        )
        self._adapter.read_usage(self._usage_chunk, out)
        return out
