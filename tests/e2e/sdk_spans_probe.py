"""Run by ``test_python_versions.py`` under each interpreter: one request through every decorator
(retrieval, an async tool, a model call, a sync and an async stream), its spans printed as JSON
without the clock readings, so two interpreters' outputs can be compared whole. Only the SDK and
the standard library: it runs where nothing but ``pip install latencylens`` was done."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import latencylens

# The tests' payloads need only the standard library, so they load where only the SDK is installed.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
from provider_payloads import GROQ_USAGE

# Groq's documented chat completion usage, and an OpenAI-style stream: two content chunks, then usage.
GROQ = {"model": "llama-3.3-70b-versatile", "usage": dict(GROQ_USAGE)}
CHUNKS = [
    {"choices": [{"delta": {"content": "Hel"}}]},
    {"choices": [{"delta": {"content": "lo"}}]},
    {"choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 2}},
]


@latencylens.retrieval(data_source="docs")
def search(query: str) -> list[str]:
    return [query]


@latencylens.tool(name="lookup")
async def lookup(order: int) -> int:
    return order


@latencylens.model_call(provider="groq", model="llama-3.3-70b-versatile")
def answer() -> dict[str, Any]:
    return GROQ


@latencylens.model_call(provider="openai", model="gpt-4o-mini")
def stream() -> Iterator[dict[str, Any]]:
    return iter(CHUNKS)


@latencylens.model_call(provider="openai", model="gpt-4o-mini")
async def stream_async() -> AsyncIterator[dict[str, Any]]:
    async def chunks() -> AsyncIterator[dict[str, Any]]:
        for chunk in CHUNKS:
            yield chunk

    return chunks()


@latencylens.request(name="POST /chat")
async def chat() -> str:
    search("where is my order")
    await lookup(7)
    answer()
    text = "".join(chunk["choices"][0]["delta"]["content"] for chunk in stream() if chunk["choices"])
    async for _ in await stream_async():
        pass
    return text


def measured(key: str) -> bool:
    """A clock reading: different every run."""
    return key.startswith(("latencylens.stream.", "gen_ai.response.")) and key.endswith(
        ("_ns", "time_to_first_chunk", "per_second")
    )


def main() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    assert asyncio.run(chat()) == "Hello"
    spans = exporter.get_finished_spans()
    names = {span.context.span_id: span.name for span in spans}
    printed = [
        [
            span.name,
            span.kind.name,
            names.get(span.parent.span_id) if span.parent else None,
            {
                key: list(value) if isinstance(value, tuple) else value
                for key, value in (span.attributes or {}).items()
                if not measured(key)
            },
        ]
        for span in spans
    ]
    print(json.dumps(sorted(printed, key=json.dumps), sort_keys=True))


if __name__ == "__main__":
    main()
