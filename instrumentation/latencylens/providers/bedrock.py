"""Amazon Bedrock Converse / ConverseStream (boto3 ``bedrock-runtime``), camelCase dicts.

Converse returns ``usage.{inputTokens, outputTokens, totalTokens, cacheReadInputTokens,
cacheWriteInputTokens}`` and ``metrics.latencyMs`` (server total, not splittable). ConverseStream
returns ``{"stream": EventStream}``; the events are ``messageStart``, ``contentBlockDelta`` (content),
``messageStop`` (stop reason) and a final ``metadata`` event with the same ``usage`` and ``metrics``.
Whether ``inputTokens`` includes cache reads/writes is settled by the numbers: when
``totalTokens == inputTokens + outputTokens + cacheRead + cacheWrite`` the cache tokens were outside
``inputTokens`` and are added, so the GenAI input count always includes them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from latencylens.providers._base import (
    BaseAdapter,
    StreamStateBase,
    Usage,
    field_of,
    nonempty_text,
    take_int,
    take_ms,
)


def _read(usage: Any, metrics: Any, out: Usage) -> None:
    raw_input = take_int(usage, "inputTokens", "usage.inputTokens", out, expected=True)
    out.output_tokens = take_int(usage, "outputTokens", "usage.outputTokens", out, expected=True)
    read = take_int(usage, "cacheReadInputTokens", "usage.cacheReadInputTokens", out, expected=False)
    write = take_int(usage, "cacheWriteInputTokens", "usage.cacheWriteInputTokens", out, expected=False)
    out.cache_read_input_tokens, out.cache_creation_input_tokens = read, write
    if raw_input is not None:
        total = field_of(usage, "totalTokens")
        cached = (read or 0) + (write or 0)
        outside = cached and total == raw_input + (out.output_tokens or 0) + cached
        out.input_tokens = raw_input + cached if outside else raw_input
    out.server_total_ns = take_ms(metrics, "latencyMs", "metrics.latencyMs", out, expected=True)


class BedrockAdapter(BaseAdapter):
    """Converse responses and ConverseStream events."""

    def __init__(self, name: str = "aws.bedrock") -> None:
        super().__init__(name)

    def extract(self, response: Any, headers: Mapping[str, str] | None = None) -> Usage:
        out = Usage()
        reason = field_of(response, "stopReason")
        if isinstance(reason, str):
            out.finish_reasons.append(reason)
        request_id = field_of(field_of(response, "ResponseMetadata"), "RequestId")
        if isinstance(request_id, str):
            out.response_id = request_id
        _read(field_of(response, "usage"), field_of(response, "metrics"), out)
        return out

    def find_stream(self, response: Any) -> Any:
        """ConverseStream's ``EventStream`` inside the response dict."""
        if type(response) is dict:
            return response.get("stream")
        return None

    def new_stream_state(self) -> BedrockStreamState:
        return BedrockStreamState()


class BedrockStreamState(StreamStateBase):
    """Content is ``contentBlockDelta.delta.text`` (or reasoning text); usage is the ``metadata`` event."""

    __slots__ = ("_metadata", "_stop")

    def __init__(self) -> None:
        self._metadata: Any = None
        self._stop: str | None = None

    def record_chunk(self, chunk: Any) -> bool:
        delta_event = chunk.get("contentBlockDelta") if type(chunk) is dict else None
        if delta_event is not None:
            delta = field_of(delta_event, "delta")
            if nonempty_text(field_of(delta, "text")):
                return True
            return nonempty_text(field_of(field_of(delta, "reasoningContent"), "text"))
        if type(chunk) is dict:
            if "metadata" in chunk:
                self._metadata = chunk["metadata"]
            elif "messageStop" in chunk:
                reason = field_of(chunk["messageStop"], "stopReason")
                if isinstance(reason, str):
                    self._stop = reason
        return False

    def usage(self) -> Usage:
        out = Usage()
        if self._stop is not None:
            out.finish_reasons.append(self._stop)
        metadata = self._metadata
        _read(field_of(metadata, "usage"), field_of(metadata, "metrics"), out)
        return out
