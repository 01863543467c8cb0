"""Spans from the real OpenLLMetry and OpenInference OpenAI instrumentations, read by the collector.

A real ``openai`` client talks to the local provider simulator; the instrumentation under test
records its spans with the real OpenTelemetry SDK; the spans go through the OTLP encoder, the
collector's decoder and the request-row builder, exactly as they would over the wire.
"""

from __future__ import annotations

import base64
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from latencylens_collector.analysis.attribution import COMPONENTS
from latencylens_collector.analysis.records import SpanRow
from latencylens_collector.analysis.request_rows import build_request_row
from latencylens_collector.demo.provider_sim import ProviderSimulator, Timing
from latencylens_collector.intake import otlp

pytest.importorskip("opentelemetry.instrumentation.openai")
pytest.importorskip("openinference.instrumentation.openai")

MODEL = "llama-3.3-70b-versatile"
PROMPT_TOKENS, COMPLETION_TOKENS = 37, 12
TIMING = Timing(queue_s=0.002, prefill_s=0.001, decode_s=0.01, prompt_tokens=37, completion_tokens=12)
MODEL_PARTS = ("network", "queue", "prefill", "decode", "model_unattributed")


INSTRUMENTATIONS = ("openinference", "openllmetry")
PRODUCER = Path(__file__).with_name("conventions_producer.py")


@pytest.fixture(scope="module")
def provider_url() -> Iterator[str]:
    with ProviderSimulator(lambda body: TIMING) as sim:
        yield sim.base_url


@pytest.fixture(params=INSTRUMENTATIONS)
def traced(request: pytest.FixtureRequest) -> str:
    """The name of one instrumentation installed around ``openai`` (in a process of its own)."""
    return str(request.param)


def _rows(name: str, url: str, stream: bool) -> list[SpanRow]:
    done = subprocess.run(
        [sys.executable, str(PRODUCER), name, url, "stream" if stream else "plain"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    export = ExportTraceServiceRequest.FromString(base64.b64decode(done.stdout.strip().splitlines()[-1]))
    batch = otlp.flatten(export)
    assert batch.rejected == 0
    return batch.spans


def _model_row(rows: list[SpanRow]) -> SpanRow:
    models = [row for row in rows if row.kind == "model"]
    assert len(models) == 1, [(row.name, row.kind) for row in rows]
    return models[0]


def test_a_non_streamed_call_is_one_model_call_with_tokens_provider_and_model(
    traced: str, provider_url: str
) -> None:
    name = traced
    rows = _rows(name, provider_url, stream=False)
    model = _model_row(rows)
    root = next(row for row in rows if not row.has_parent)
    assert root.kind == "request"
    assert {row.name: row.kind for row in rows}["build prompt"] == "other"

    request = build_request_row(rows, computed_at_us=0)
    assert request is not None, name
    assert request["model_calls"] == 1
    assert request["model"] == MODEL  # the simulator answers with the model asked for
    assert request["provider"] == "openai"
    assert (request["input_tokens"], request["output_tokens"]) == (PROMPT_TOKENS, COMPLETION_TOKENS)
    # The model call is the only thing running during its span, so all of it is model time and the
    # rest of the root is application time: if the span were not recognised as a model call, its
    # time would land in app_other instead.
    assert sum(request[f"{part}_ns"] for part in MODEL_PARTS) == model.duration_ns
    assert request["app_other_ns"] == root.duration_ns - model.duration_ns
    assert sum(request[f"{part}_ns"] for part in COMPONENTS) == request["e2e_ns"]


def test_a_streamed_call_is_one_model_call(traced: str, provider_url: str) -> None:
    name = traced
    rows = _rows(name, provider_url, stream=True)
    model = _model_row(rows)
    request = build_request_row(rows, computed_at_us=0)
    assert request is not None, name
    assert request["model_calls"] == 1
    assert request["model"] == MODEL
    assert request["provider"] == "openai"
    assert sum(request[f"{part}_ns"] for part in MODEL_PARTS) == model.duration_ns
