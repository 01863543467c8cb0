"""pydantic-ai (as shown in Logfire): GenAI semconv names plus its own time-to-first-chunk name.

Names as in ``pydantic-ai-slim`` 2.68 (``_instrumentation.py``): model calls are ``chat {model}``
CLIENT spans with ``gen_ai.operation.name = chat``, tools ``execute_tool``, runs ``invoke_agent``.
"""

from __future__ import annotations

from typing import Final

GEN_AI_CLIENT_OPERATION_TIME_TO_FIRST_CHUNK: Final = "gen_ai.client.operation.time_to_first_chunk"
"""Seconds from request issue to the first chunk, on streamed calls (the GenAI metric's name)."""

FIRST_CHUNK_SECONDS: Final = (GEN_AI_CLIENT_OPERATION_TIME_TO_FIRST_CHUNK,)
