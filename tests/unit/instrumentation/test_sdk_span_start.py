"""A decorated call's span starts the same whether its attributes are cleaned or stored directly.

``CallShape.start`` skips the SDK's cleaning of a decorator's static attributes when no sampler or
span processor can see a span before it is returned (``_spanstart``). These tests hold that path to
``start_span(attributes=...)`` on real SDK providers: the same attributes in the same order under
any limits, and the SDK's path whenever a sampler or processor would look (it then sees them).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from opentelemetry.context import Context
from opentelemetry.sdk.trace import Span, SpanLimits, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import (
    ALWAYS_ON,
    ParentBased,
    Sampler,
    SamplingResult,
    TraceIdRatioBased,
)
from opentelemetry.trace import Link, SpanKind
from opentelemetry.util.types import Attributes

import latencylens
from latencylens import _lifecycle
from latencylens._export import BoundedShutdownSpanProcessor
from latencylens._spanstart import plain_attributes, quiet_start, store_static


class _SeesStart(SpanProcessor):
    """A processor that reads each span's attributes when it starts (as some instrumentations do)."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self.seen.append(dict(span.attributes or {}))


class _SeesAttributes(Sampler):
    """A sampler that keeps every span and notes the attributes it was asked about."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    def should_sample(
        self,
        parent_context: Context | None,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        trace_state: Any = None,
    ) -> SamplingResult:
        self.seen.append(dict(attributes or {}))
        return ALWAYS_ON.should_sample(parent_context, trace_id, name, kind, attributes, links)

    def get_description(self) -> str:
        return "SeesAttributes"


class _LooksAtNothing(SpanProcessor):
    """Overrides ``on_start`` (doing nothing): enough for a span to take the SDK's path."""

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        return None


def _provider(
    limits: SpanLimits | None = None, sampler: Sampler | None = None, *, quiet: bool = True
) -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(span_limits=limits or SpanLimits(), sampler=sampler)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    if not quiet:
        provider.add_span_processor(_LooksAtNothing())
    return provider, exporter


def _decorated_spans(
    provider: TracerProvider, exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> list[list[tuple[str, Any]]]:
    """One call of each decorator, made on ``provider``'s tracer: each span's name and attributes,
    in order, by start time."""
    monkeypatch.setattr(_lifecycle, "_tracer", provider.get_tracer("latencylens"))

    @latencylens.tool(name="lookup_orders")
    def lookup() -> int:
        return 1

    @latencylens.retrieval(data_source="docs")
    def search() -> int:
        return 2

    @latencylens.model_call(provider="groq", model="llama-3.3-70b-versatile")
    def complete() -> dict[str, Any]:
        return {"id": "chatcmpl-1", "model": "llama-3.3-70b-versatile", "choices": []}

    @latencylens.request(name="POST /chat")
    def answer() -> int:
        return lookup() + search() + len(complete())

    assert answer() == 6
    spans = sorted(exporter.get_finished_spans(), key=lambda span: span.start_time or 0)
    return [[("name", span.name), *(span.attributes or {}).items()] for span in spans]


def test_the_sdk_providers_usual_setups_start_spans_quietly() -> None:
    # The SDK's default sampler (ParentBased(ALWAYS_ON)), ratio samplers, and the SDK's batch,
    # simple and our own processors: none looks at a span before start_span returns it.
    for sampler in (None, TraceIdRatioBased(0.5), ParentBased(TraceIdRatioBased(0.25))):
        provider = TracerProvider(sampler=sampler)
        provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
        provider.add_span_processor(BatchSpanProcessor(InMemorySpanExporter()))
        provider.add_span_processor(BoundedShutdownSpanProcessor(InMemorySpanExporter(), 1.0))
        assert quiet_start(provider.get_tracer("t")), sampler
        provider.shutdown()


def test_a_sampler_or_processor_that_could_look_takes_the_sdk_path() -> None:
    assert not quiet_start(TracerProvider(sampler=_SeesAttributes()).get_tracer("t"))
    assert not quiet_start(TracerProvider(sampler=ParentBased(_SeesAttributes())).get_tracer("t"))
    provider, _ = _provider()
    tracer = provider.get_tracer("t")
    assert quiet_start(tracer)
    provider.add_span_processor(_SeesStart())  # added later: the cached answer must not stand
    assert not quiet_start(tracer)
    assert not quiet_start(object())  # not the SDK's tracer


@pytest.mark.parametrize(
    "limits",
    [SpanLimits(), SpanLimits(max_span_attribute_length=5), SpanLimits(max_span_attributes=2)],
    ids=["no limits", "value length", "attribute count"],
)
def test_decorated_spans_are_the_same_on_either_path(
    limits: SpanLimits, monkeypatch: pytest.MonkeyPatch
) -> None:
    quiet_provider, quiet_exporter = _provider(limits)
    sdk_provider, sdk_exporter = _provider(limits, quiet=False)
    assert quiet_start(quiet_provider.get_tracer("latencylens"))
    assert not quiet_start(sdk_provider.get_tracer("latencylens"))
    quiet = _decorated_spans(quiet_provider, quiet_exporter, monkeypatch)
    assert quiet == _decorated_spans(sdk_provider, sdk_exporter, monkeypatch)
    tool = quiet[1]
    if limits.max_span_attribute_length == 5:  # cut as the SDK cuts: "lookup_orders" -> "looku"
        assert ("gen_ai.tool.name", "looku") in tool
    elif limits.max_span_attributes == 2:  # the oldest go first: two left of the three
        assert tool == [
            ("name", "execute_tool lookup_orders"),
            ("gen_ai.operation.name", "execute_tool"),
            ("gen_ai.tool.name", "lookup_orders"),
        ]
    else:  # worked by hand: the tool decorator's three, first and in its order
        assert tool[:4] == [
            ("name", "execute_tool lookup_orders"),
            ("latencylens.span.kind", "tool"),
            ("gen_ai.operation.name", "execute_tool"),
            ("gen_ai.tool.name", "lookup_orders"),
        ]


def test_a_looking_sampler_and_processor_see_the_attributes_and_the_spans_are_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    quiet_provider, quiet_exporter = _provider()
    quiet = _decorated_spans(quiet_provider, quiet_exporter, monkeypatch)
    sampler = _SeesAttributes()
    provider, exporter = _provider(sampler=sampler)
    processor = _SeesStart()
    provider.add_span_processor(processor)
    assert _decorated_spans(provider, exporter, monkeypatch) == quiet
    tool_static = {
        "latencylens.span.kind": "tool",
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "lookup_orders",
    }
    assert tool_static in sampler.seen
    assert tool_static in processor.seen


def test_only_plain_values_skip_cleaning() -> None:
    assert plain_attributes({"a": "x", "b": 1, "c": 1.5, "d": True})
    assert not plain_attributes({"a": ["x"]})  # cleaning makes lists tuples
    assert not plain_attributes({"a": None})
    assert not plain_attributes({"": "x"})
    shape = _lifecycle.CallShape("odd", SpanKind.INTERNAL, {"tags": ["a", "b"]})
    assert not shape.plain


def test_store_static_leaves_a_span_that_already_has_attributes_to_the_sdk() -> None:
    provider, _ = _provider()
    span = provider.get_tracer("t").start_span("s", attributes={"first": "x"})
    assert not store_static(span, {"second": "y"})
    assert dict(span.attributes or {}) == {"first": "x"}
    span.end()


@pytest.mark.parametrize(
    "attributes",
    [
        {"gen_ai.provider.name": "openai", "server.address": "127.0.0.1", "server.port": 8080},
        {"gen_ai.provider.name": "openai", "tags": ["a", "b"]},  # a list: cleaned by the SDK
    ],
    ids=["plain", "with a list"],
)
def test_an_sdk_patch_or_http_route_span_is_the_same_on_either_path(
    attributes: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The span an instrument_*() patch or an HTTP hook route starts per call, from attributes
    # built for that call (checked then, not when decorating).
    started = []
    for quiet in (True, False):
        provider, exporter = _provider(quiet=quiet)
        monkeypatch.setattr(_lifecycle, "_tracer", provider.get_tracer("latencylens"))
        span, _ = _lifecycle.start_span("chat gpt-4.1", SpanKind.CLIENT, dict(attributes))
        span.end()
        (finished,) = exporter.get_finished_spans()
        started.append(list((finished.attributes or {}).items()))
    assert started[0] == started[1]
    # worked by hand: the given attributes in their order, a list stored as the SDK stores it
    assert started[0] == [
        (key, tuple(value) if type(value) is list else value) for key, value in attributes.items()
    ]
