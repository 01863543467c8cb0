"""Sends one replayed request through the real provider SDK, instrumented by LatencyLens's SDK.

Each request is a trace of its own: a root span (``latencylens.span.kind = request``, named after
the recorded route) and under it the model call that :func:`latencylens.model_call` times and reads
with the target's adapter, exactly as in an instrumented app. Both spans carry
``latencylens.replay.run_id`` and ``latencylens.replay.source_trace_id``, so the collector's
views can pick the run out and put it beside the requests it came from. Spans go to whatever
tracer provider the process has (``latencylens.configure``). The stream is read to its end; the
text is dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

import latencylens
from latencylens import semconv
from latencylens_collector.traffic.shape import RequestShape
from latencylens_collector.traffic.target import Target, anthropic_request, openai_request

DEFAULT_ROUTE = "replay"
"""Root span name for a shape without a recorded route."""
ModelCall = Callable[[dict[str, Any], RequestShape], Any]


class Sender:
    """Sends shapes to ``target`` and tags their spans with ``run_id`` (None: untagged, as an
    application's own traffic is). Safe to call from several threads."""

    def __init__(self, target: Target, run_id: str | None) -> None:
        self.target = target
        self.run_id = run_id
        self._tracer = trace.get_tracer("latencylens.replay")
        self._call = self._model_call(target)

    def _model_call(self, target: Target) -> ModelCall:
        tag = self.tag
        decorate = latencylens.model_call(provider=target.provider_name, model=target.model)
        if target.api == "anthropic":
            import anthropic

            anthropic_client = anthropic.Anthropic(
                base_url=target.base_url, api_key=target.api_key, max_retries=0, timeout=target.timeout_s
            )

            @decorate
            def call_anthropic(body: dict[str, Any], shape: RequestShape) -> Any:
                tag(trace.get_current_span(), shape)
                return anthropic_client.messages.create(**body)

            return call_anthropic

        import openai

        openai_client = openai.OpenAI(
            base_url=target.base_url, api_key=target.api_key, max_retries=0, timeout=target.timeout_s
        )

        _warm_openai(openai_client)

        @decorate
        def call_openai(body: dict[str, Any], shape: RequestShape) -> Any:
            tag(trace.get_current_span(), shape)
            return openai_client.chat.completions.create(**body)

        return call_openai

    def tag(self, span: trace.Span, shape: RequestShape) -> None:
        """Mark ``span`` as part of this run and name the request it copies."""
        if self.run_id is None:
            return
        span.set_attribute(semconv.REPLAY_RUN_ID, self.run_id)
        if shape.source_trace_id:
            span.set_attribute(semconv.REPLAY_SOURCE_TRACE_ID, shape.source_trace_id)

    def body(self, shape: RequestShape) -> dict[str, Any]:
        build = anthropic_request if self.target.api == "anthropic" else openai_request
        return build(shape, self.target)

    def send(self, shape: RequestShape) -> None:
        """One request, its stream read to the end; raises what the SDK raised (spans record it)."""
        body = self.body(shape)
        with self._tracer.start_as_current_span(
            shape.route or DEFAULT_ROUTE,
            kind=SpanKind.SERVER,
            attributes={semconv.SPAN_KIND: semconv.KIND_REQUEST},
        ) as root:
            self.tag(root, shape)
            try:
                _drain(self._call(body, shape))
            except Exception as exc:
                root.set_status(Status(StatusCode.ERROR, type(exc).__name__))
                raise


def _warm_openai(client: Any) -> None:
    """Load what the SDK loads lazily on a first streamed call (its resources, the chunk model's
    validator), so the first replayed request is not ~100 ms slower than the rest."""
    from openai.types.chat import ChatCompletionChunk

    _ = client.chat.completions
    ChatCompletionChunk.model_validate(
        {"id": "warm", "object": "chat.completion.chunk", "created": 0, "model": "m", "choices": []}
    )


def _drain(stream: Iterable[Any]) -> None:
    for _ in stream:
        pass


__all__ = ["DEFAULT_ROUTE", "ModelCall", "Sender"]
