"""OpenAI Chat Completions, and the fallback for any OpenAI-compatible server.

OpenAI reports no server timing in the body, so this adapter gives token counts, response id, model
and finish reasons. When streaming, usage arrives only with ``stream_options.include_usage``, in an
extra final chunk whose ``choices`` is empty.
"""

from __future__ import annotations

from latencylens.providers._chat import ChatCompletionsAdapter


class OpenAIAdapter(ChatCompletionsAdapter):
    """Token counts from ``usage``; no server timing exists to read."""

    def __init__(self, name: str = "openai") -> None:
        super().__init__(name)
