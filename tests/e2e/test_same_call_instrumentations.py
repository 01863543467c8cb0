"""Two real instrumentations on one call, through a real collector: one model call, tokens once.

The app runs in its own process (``same_call_producer.py``) with LatencyLens and either the real
anthropic SDK's own tracing or the real OpenLLMetry / OpenInference / OpenLIT / Logfire OpenAI
instrumentation, calls a loopback replay server that answers with the documented payloads, and
exports over OTLP/HTTP to a collector started by the test. The request rows and span trees are read
back from the API. OpenLIT requires ``openai<3``: its app runs from ``.venv-openlit`` (``make
openlit-venv``) with our SDK from ``instrumentation/``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from test_pipeline import fetch_request, walk

from latencylens import semconv
from latencylens_collector.analysis.attribution import APPLICATION_COMPONENTS, COMPONENTS

REPO = Path(__file__).resolve().parents[2]
PRODUCER = Path(__file__).with_name("same_call_producer.py")
OPENLIT_PYTHON = REPO / ".venv-openlit" / "bin" / "python"
MODEL_PARTS = tuple(name for name in COMPONENTS if name not in APPLICATION_COMPONENTS)

# Documented payloads (tests/support/provider_payloads.py):
# anthropic_message(): input 21 + cache creation 188 086 + cache read 0 = 188 107 GenAI input
# tokens, 393 output; anthropic_stream_events(): message_start input 25, message_delta output 15;
# openai_chat_completion() and openai_usage_chunk(): prompt 19, completion 10. A stream without
# usage has no counts: unknown (None), except under OpenLIT, which estimates them (below).
TOKENS = {
    "anthropic": {"plain": (188_107, 393), "stream": (25, 15)},
    "openai": {"plain": (19, 10), "stream": (19, 10), "stream-no-usage": (None, None)},
}
OPENLIT_ESTIMATED_OUTPUT = 3
"""OpenLIT's estimate without usage, ceil(characters / 2): "Hel" + "lo" is 5 characters → 3."""
OTHERS = ("openllmetry", "openinference", "openlit", "logfire")
SCENARIOS = ("anthropic", *(f"{other}-ours-{order}" for other in OTHERS for order in ("first", "last")))
MODULES = {
    "openllmetry": "opentelemetry.instrumentation.openai",
    "openinference": "openinference.instrumentation.openai",
    "logfire": "logfire",
}
FIRST_CONTENT_PART = 1
"""Parts of the replayed OpenAI stream: role chunk, "Hel" (first content), "lo", finish chunk, the
usage chunk when asked for, then ``[DONE]``: the last chunk is the part before it."""


def python_for(scenario: str) -> tuple[str, dict[str, str]]:
    """The interpreter that runs the scenario's app, and its environment."""
    other = scenario.split("-", 1)[0]
    if other == "openlit":
        if not OPENLIT_PYTHON.exists():
            pytest.skip(f"OpenLIT needs its own virtualenv: {OPENLIT_PYTHON} is missing (make openlit-venv)")
        path = os.pathsep.join(filter(None, [str(REPO / "instrumentation"), os.environ.get("PYTHONPATH")]))
        return str(OPENLIT_PYTHON), {**os.environ, "PYTHONPATH": path}
    if other in MODULES and importlib.util.find_spec(MODULES[other]) is None:
        pytest.skip(f"{MODULES[other]} is not installed (pip install -e '.[test]')")
    return sys.executable, dict(os.environ)


def produce(scenario: str, collector_url: str) -> dict[str, Any]:
    python, env = python_for(scenario)
    done = subprocess.run(
        [python, str(PRODUCER), scenario, collector_url],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def check_openai_stream(
    call: dict[str, Any], detail: dict[str, Any], ours: dict[str, Any], context: Any
) -> None:
    """TTFT and decode by ordering, which no load can upset (tests/support/provider_replay.py
    anchors on the same send times): the first content and the last chunk were seen by the model
    call after the server sent them and before the app got them from the instrumentations (one
    clock, ``time.time_ns``, in one process); TTFT is no less than the request's arrival plus the
    injected delay, so a span that missed the stream cannot pass."""
    ttft = detail["ttft_ns"]
    assert ttft is not None, context
    assert ttft >= call["received_ns"] - ours["start_ns"] + call["ttft_s"] * 1e9, context
    assert detail["provenance"]["decode"] == "measured", context
    first = ours["start_ns"] + ttft
    last = first + detail["parts"]["decode"]
    sent, (seen_first, seen_last) = call["sent_ns"], call["seen_ns"]
    assert sent[FIRST_CONTENT_PART] <= first <= seen_first, (context, "first content", sent, seen_first)
    assert sent[-2] <= last <= seen_last, (context, "last chunk", sent, seen_last)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_one_model_call_per_call(scenario: str, collector: Any) -> None:
    calls = produce(scenario, collector.url)
    family = "anthropic" if scenario == "anthropic" else "openai"
    other = scenario.split("-", 1)[0]
    for mode in TOKENS[family]:
        call = calls[mode]
        detail = fetch_request(collector.url, call["trace_id"])
        spans = [span for root in detail["spans"] for span in walk(root)]
        models = [span for span in spans if span["kind"] == "model"]
        (ours,) = [span for span in models if semconv.SPAN_KIND in span["attributes"]]
        others = [span for span in models if span is not ours]
        assert others, f"{scenario} {mode}: the other instrumentation made no model span"
        context = (
            scenario,
            mode,
            [(span["name"], span["attributes"].get(semconv.SAME_CALL_AS)) for span in models],
        )

        assert detail["model_calls"] == 1, context
        tokens = (detail["input_tokens"], detail["output_tokens"])
        if other == "openlit" and mode == "stream-no-usage":
            # Ours saw no usage; OpenLIT's estimate fills the gap and stays marked an estimate.
            assert tokens[0] is not None and tokens[1] == OPENLIT_ESTIMATED_OUTPUT, context
            assert detail["tokens_estimated"] is True, context
            assert detail["decode_tokens_per_second"] is None, context  # never from an estimate
        else:
            assert tokens == TOKENS[family][mode], context
            assert detail["tokens_estimated"] is False, context
        # Every other span of the call is marked as ours' call and owns no time; ours owns its whole
        # duration, even where the other span ended before it (OpenLLMetry outside ours, streaming;
        # Logfire's span, which ends at the response headers).
        for span in others:
            assert span["attributes"].get(semconv.SAME_CALL_AS) == ours["span_id"], context
            assert span["critical_ns"] == 0, context
        assert sum(detail["parts"][name] for name in MODEL_PARTS) == ours["duration_ns"], context
        assert ours["critical_ns"] == ours["duration_ns"], context
        assert sum(detail["parts"].values()) == detail["e2e_ns"]
        if mode == "plain":
            assert detail["ttft_ns"] is None, context
        elif family == "openai":
            # TTFT is ours, exactly as our span measured it, whatever the other span says.
            assert detail["ttft_ns"] == int(ours["attributes"][semconv.STREAM_FIRST_CONTENT_NS]), context
            check_openai_stream(call, detail, ours, context)
        else:
            # TTFT is ours, exactly as our span measured it; it cannot precede the server's receipt
            # of the request plus the delay it injected before the first content.
            measured = int(ours["attributes"][semconv.STREAM_FIRST_CONTENT_NS])
            assert detail["ttft_ns"] == measured, context
            assert measured >= call["received_ns"] - ours["start_ns"] + call["ttft_s"] * 1e9, context
    if scenario == "anthropic":
        names = {span["name"] for root in detail["spans"] for span in walk(root)}
        assert "anthropic.messages.create" in names  # the SDK's own span was there and merged
    if other == "logfire":
        # Logfire's stream-end record is a record, not a second call: it owns no time.
        records = [span for span in spans if span["attributes"].get("logfire.span_type") == "log"]
        assert records and all(span["kind"] == "other" and span["critical_ns"] == 0 for span in records)
