"""What keeps the decorators cheap: nothing heavy imported, no environment read per call, static
attributes built once per decorated function, and nothing written to the span per stream chunk."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from provider_payloads import GROQ_USAGE

import latencylens
from latencylens import _lifecycle, semconv


def groq_chunk(text: str, final: bool = False) -> dict[str, Any]:
    chunk: dict[str, Any] = {
        "id": "chatcmpl-1",
        "model": "llama-3.3-70b-versatile",
        "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": "stop" if final else None}],
    }
    if final:
        chunk["x_groq"] = {"usage": dict(GROQ_USAGE)}
    return chunk


def test_perf_import_loads_no_service_sdk_or_arrow() -> None:
    """The app pays for the OpenTelemetry API only; the SDK arrives with ``configure()``."""
    heavy = ("chdb", "clickhouse_connect", "fastapi", "pyarrow", "latencylens_collector", "opentelemetry.sdk")
    code = "import sys, latencylens; print('\\n'.join(sorted(sys.modules)))"
    loaded = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    found = [m for m in loaded.split() if any(m == h or m.startswith(h + ".") for h in heavy)]
    assert found == []


class _CountingEnviron(dict[str, str]):
    """``os.environ`` stand-in that counts every read."""

    reads = 0

    def __getitem__(self, key: str) -> str:
        type(self).reads += 1
        return super().__getitem__(key)

    def get(self, key: str, default: Any = None) -> Any:
        type(self).reads += 1
        return super().get(key, default)

    def __contains__(self, key: object) -> bool:
        type(self).reads += 1
        return super().__contains__(key)


def test_perf_no_environment_read_per_call(
    spans: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    @latencylens.model_call(provider="groq", model="llama-3.3-70b-versatile")
    def chat() -> dict[str, Any]:
        return {"id": "chatcmpl-1", "model": "llama-3.3-70b-versatile", "choices": [], "usage": GROQ_USAGE}

    @latencylens.model_call(provider="groq")
    def stream() -> Iterator[dict[str, Any]]:
        return iter([groq_chunk("a"), groq_chunk("b", final=True)])

    @latencylens.tool(name="lookup")
    def lookup() -> int:
        return 1

    chat(), list(stream()), lookup()  # first calls may warm caches
    environ = _CountingEnviron(os.environ)
    monkeypatch.setattr(os, "environ", environ)
    for _ in range(3):
        chat()
        list(stream())
        lookup()
    assert _CountingEnviron.reads == 0
    assert len(spans.get_finished_spans()) == 4 * 3  # 3 warm-up + 9 measured calls: every call traced


def test_perf_static_attributes_built_once_per_function(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every call hands the span the same prebuilt attributes mapping: no per-call dict building."""
    seen: list[Mapping[str, Any]] = []
    real_tracer = _lifecycle._tracer

    class RecordingTracer:
        def start_span(self, name: str, **kwargs: Any) -> Any:
            seen.append(kwargs["attributes"])
            return real_tracer.start_span(name, **kwargs)

    monkeypatch.setattr(_lifecycle, "_tracer", RecordingTracer())

    @latencylens.retrieval(data_source="docs")
    def search() -> int:
        return 1

    search(), search(), search()
    assert len(seen) == 3
    assert seen[0] is seen[1] is seen[2]
    assert seen[0][semconv.GEN_AI_DATA_SOURCE_ID] == "docs"


def test_perf_stream_chunks_set_no_span_attributes(spans: InMemorySpanExporter) -> None:
    """Per chunk the proxy only counts and timestamps; attributes are written once, at the end."""

    @latencylens.model_call(provider="groq", model="llama-3.3-70b-versatile")
    def stream() -> Iterator[dict[str, Any]]:
        return iter([groq_chunk("a"), groq_chunk("b"), groq_chunk("c"), groq_chunk("", final=True)])

    proxy: Any = stream()
    span = proxy._ll_span
    at_start = dict(span.attributes)
    for _ in range(4):
        next(proxy)
        assert dict(span.attributes) == at_start  # nothing added or changed while chunks flow
    with pytest.raises(StopIteration):
        next(proxy)
    [finished] = spans.get_finished_spans()
    attributes = dict(finished.attributes or {})
    assert attributes[semconv.STREAM_CHUNKS] == 4
    assert attributes[semconv.STREAM_CONTENT_CHUNKS] == 3  # the final chunk's text is empty
