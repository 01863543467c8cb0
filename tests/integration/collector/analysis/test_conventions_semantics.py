"""What each instrumentation's timing and token attributes mean, checked with the real packages.

OpenLLMetry, OpenInference, OpenLIT and Logfire each run alone (in a process of their own,
``semantics_producer.py``) around the real ``openai`` SDK, which talks to a loopback replay server
with known delays. Their OTLP export goes to a real collector; the API must show one model call per
call, the provider's token counts (or null when none were reported, or flagged when the
instrumentation estimated them), and for streams the TTFT and decode the server injected (never
earlier, at most :data:`LATE_NS` later). What each attribute measures is documented in
docs/conventions.md.

OpenLIT requires ``openai<3``: it runs from ``.venv-openlit`` (``make openlit-venv``).
"""

from __future__ import annotations

import base64
import functools
import importlib.util
import json
import math
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from pipeline_helpers import wait_until
from provider_payloads import openai_chat_completion, openai_chunk, openai_usage_chunk
from provider_replay import Recorded, ReplayServer, Reply, json_reply, sse_reply

from latencylens_collector.api.server import ServiceThread
from latencylens_collector.settings import Settings

REPO = Path(__file__).resolve().parents[4]
PRODUCER = Path(__file__).with_name("semantics_producer.py")
OPENLIT_PYTHON = REPO / ".venv-openlit" / "bin" / "python"
INSTRUMENTATIONS = ("openllmetry", "openinference", "openlit", "logfire")
MODES = ("plain", "stream", "stream-no-usage")
MODULES = {
    "openllmetry": "opentelemetry.instrumentation.openai",
    "openinference": "openinference.instrumentation.openai",
    "logfire": "logfire",
}

MS = 1_000_000
EARLY_NS = 5 * MS
"""A client cannot see a chunk before the server sent it: a derived time may be at most this much
earlier than the injected delay (clock reading granularity)."""
LATE_NS = 100 * MS
"""...and this much later: a loaded 2-core machine schedules the client late by tens of ms. The
delays below are large, so a wrong starting point (OpenLIT's stream object, Logfire's headers)
is still 150 ms or more off."""
PLAIN_S = 0.20
"""A non-streamed answer arrives 200 ms after the request."""
HEADERS_S = 0.25
"""A stream's headers arrive 250 ms after the request..."""
FIRST_CHUNK_S = 0.15
"""...its first chunk (role and first content together) 150 ms later: TTFT 400 ms..."""
GAP_S = 0.10
"""...then three more content chunks 100 ms apart: decode (first → last content) 300 ms."""
CONTENT = ["Hel", "lo", " the", "re"]
DECODE_S = GAP_S * (len(CONTENT) - 1)
# Usage of the documented OpenAI payloads (provider_payloads): 19 prompt, 10 completion, 0 cached.
USAGE = (19, 10, 0)
MODEL_PARTS = ("network", "queue", "prefill", "decode", "model_unattributed")


def reply(request: Recorded) -> Reply:
    body = request.json()
    if not body.get("stream"):
        return json_reply(openai_chat_completion(), delay_s=PLAIN_S)
    chunks = [(openai_chunk({"role": "assistant", "content": ""}), FIRST_CHUNK_S)]
    chunks += [(openai_chunk({"content": text}), 0.0 if i == 0 else GAP_S) for i, text in enumerate(CONTENT)]
    chunks.append((openai_chunk({}, "stop"), 0.0))
    if (body.get("stream_options") or {}).get("include_usage"):
        chunks.append((openai_usage_chunk(), 0.0))
    return sse_reply([c for c, _ in chunks], [d for _, d in chunks], header_delay_s=HEADERS_S)


@dataclass
class Produced:
    """One instrumentation's export of the three calls, and when the server had each request."""

    name: str
    export: bytes
    traces: dict[str, str]
    received_ns: dict[str, int]


def _python_for(name: str) -> str:
    if name == "openlit":
        if not OPENLIT_PYTHON.exists():
            pytest.skip(f"OpenLIT needs its own virtualenv: {OPENLIT_PYTHON} is missing (make openlit-venv)")
        return str(OPENLIT_PYTHON)
    if importlib.util.find_spec(MODULES[name]) is None:
        pytest.skip(f"{MODULES[name]} is not installed (pip install -e '.[test]')")
    return sys.executable


@functools.cache
def produce(name: str) -> Produced:
    """Run the producer for ``name`` once per session against a fresh replay server."""
    python = _python_for(name)
    server = ReplayServer().route("POST", "/v1/chat/completions", reply)
    try:
        done = subprocess.run(
            [python, str(PRODUCER), name, f"{server.url}/v1"],
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-4000:]
        out = json.loads(done.stdout.strip().splitlines()[-1])
        assert len(server.requests) == len(MODES)
        received = {mode: server.requests[i].received_ns for i, mode in enumerate(MODES)}
        return Produced(name, base64.b64decode(out["export"]), out["traces"], received)
    finally:
        server.close()


Detail = dict[str, Any]


class Collector:
    """One real collector for the module (each instrumentation's traces have their own ids) and
    the API's view of each instrumentation's calls, posted once."""

    def __init__(self, service: ServiceThread) -> None:
        self.service = service
        self._details: dict[str, dict[str, Detail]] = {}

    def details(self, name: str) -> dict[str, Detail]:
        """Per mode, ``GET /api/requests/<trace>`` after ``name``'s export went through the collector."""
        if name not in self._details:
            self._details[name] = self._post(produce(name))
        return self._details[name]

    def _post(self, produced: Produced) -> dict[str, Detail]:
        url = self.service.url
        response = httpx.post(
            f"{url}/v1/traces", content=produced.export, headers={"content-type": "application/x-protobuf"}
        )
        assert response.status_code == 200, response.text

        def fetch_all() -> dict[str, Detail] | None:
            found = {}
            for mode, trace_id in produced.traces.items():
                got = httpx.get(f"{url}/api/requests/{trace_id}")
                if got.status_code != 200:
                    return None
                found[mode] = got.json()
            return found

        found: dict[str, Detail] = wait_until(fetch_all, what=f"the requests of {produced.name} in the API")
        return found


@pytest.fixture(scope="module")
def collector(chdb_dsn: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Collector]:
    settings = Settings(
        clickhouse_dsn=chdb_dsn,
        database=f"semantics_{os.getpid()}",
        metadata_url=f"sqlite:///{tmp_path_factory.mktemp('semantics') / 'metadata.db'}",
        host="127.0.0.1",
        port=0,
        grpc_port=0,
        environ={},
    )
    service = ServiceThread(settings).start()
    yield Collector(service)
    service.stop()
    service.store.close()


@pytest.fixture(params=INSTRUMENTATIONS)
def produced(request: pytest.FixtureRequest) -> Produced:
    return produce(str(request.param))


@pytest.fixture
def details(produced: Produced, collector: Collector) -> dict[str, Detail]:
    return collector.details(produced.name)


def flatten(spans: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    out: list[Mapping[str, Any]] = []
    for span in spans:
        out.append(span)
        out.extend(flatten(span["children"]))
    return out


def model_span(detail: Detail) -> Mapping[str, Any]:
    """The one span counted as the model call."""
    models = [span for span in flatten(detail["spans"]) if span["kind"] == "model"]
    assert len(models) == 1, [(span["name"], span["kind"]) for span in flatten(detail["spans"])]
    return models[0]


def model_ns(detail: Detail) -> int:
    return sum(detail["parts"][part] for part in MODEL_PARTS)


def tokens(detail: Detail) -> tuple[int | None, int | None, int | None]:
    return (detail["input_tokens"], detail["output_tokens"], detail["cache_read_input_tokens"])


def expected_ttft_ns(produced: Produced, mode: str, detail: Detail) -> int:
    """Span start → the server had the request (the SDK's own work) + the injected delays."""
    offset = produced.received_ns[mode] - model_span(detail)["start_ns"]
    assert offset >= 0
    return offset + round((HEADERS_S + FIRST_CHUNK_S) * 1e9)


def assert_near(measured: int | None, expected: float, what: str, *, early_ns: int = EARLY_NS) -> None:
    """``measured`` within [expected − early_ns, expected + LATE_NS]."""
    assert measured is not None, f"{what} unknown"
    assert expected - early_ns <= measured <= expected + LATE_NS, (
        f"{what} {measured / MS:.1f} ms, expected {expected / MS:.1f} ms"
    )


def test_a_call_is_one_model_call_with_the_providers_tokens(
    produced: Produced, details: dict[str, Detail]
) -> None:
    for mode in ("plain", "stream"):
        detail = details[mode]
        assert detail["model_calls"] == 1, (produced.name, mode)
        model_span(detail)
        assert tokens(detail) == USAGE, (produced.name, mode)
        assert detail["tokens_estimated"] is False
        assert detail["model"] == "gpt-4.1-2025-04-14"  # the payload's response model
        assert sum(detail["parts"].values()) == detail["e2e_ns"]
    plain = details["plain"]
    assert plain["ttft_ns"] is None
    # The answer came PLAIN_S after the request: all of that is the model call's, none app time.
    assert model_ns(plain) == model_span(plain)["duration_ns"] >= PLAIN_S * 1e9


def test_a_stream_without_usage_has_unknown_or_estimated_tokens(
    produced: Produced, details: dict[str, Detail]
) -> None:
    detail = details["stream-no-usage"]
    assert detail["model_calls"] == 1
    if produced.name == "openlit":
        # OpenLIT writes ceil(characters / 2) when no usage came: "Hello there" is 11 characters → 6.
        assert detail["tokens_estimated"] is True
        assert detail["output_tokens"] == math.ceil(len("".join(CONTENT)) / 2) == 6
        assert detail["input_tokens"] is not None
        assert detail["cache_read_input_tokens"] is None
        assert detail["itl_ns"] is None  # never derived from an estimate
        assert detail["decode_tokens_per_second"] is None
    else:
        assert tokens(detail) == (None, None, None)
        assert detail["tokens_estimated"] is False


def test_a_stream_has_the_injected_ttft_and_decode(produced: Produced, details: dict[str, Detail]) -> None:
    for mode in ("stream", "stream-no-usage"):
        detail = details[mode]
        span = model_span(detail)
        end_of_stream = expected_ttft_ns(produced, mode, detail) + DECODE_S * 1e9
        if produced.name == "logfire":
            # Logfire records no first-chunk time: TTFT is unknown, not its headers time. Its model
            # span ends at the headers; the stream-end log extends the call to the last chunk.
            assert detail["ttft_ns"] is None
            assert_near(model_ns(detail), end_of_stream, f"{mode} model call")
            assert span["duration_ns"] < (HEADERS_S + FIRST_CHUNK_S) * 1e9
            continue
        assert_near(detail["ttft_ns"], expected_ttft_ns(produced, mode, detail), f"{mode} TTFT")
        # Both ends of decode may be late, so it may also come out short.
        assert_near(detail["parts"]["decode"], DECODE_S * 1e9, f"{mode} decode", early_ns=LATE_NS)
        assert detail["provenance"]["decode"] == "measured"
        assert_near(model_ns(detail), end_of_stream, f"{mode} model call")
        if mode == "stream":
            # 10 output tokens over the measured decode: ITL = decode // 9.
            assert detail["itl_ns"] is not None
            assert_near(detail["itl_ns"] * 9, DECODE_S * 1e9, "ITL × 9", early_ns=LATE_NS)


def test_logfire_records_are_shown_by_their_message_and_own_no_time(collector: Collector) -> None:
    detail = collector.details("logfire")["stream"]
    spans = flatten(detail["spans"])
    assert not [span["name"] for span in spans if "{" in span["name"]]
    assert model_span(detail)["name"] == "Chat Completion with 'gpt-4.1'"
    [record] = [span for span in spans if span["attributes"].get("logfire.span_type") == "log"]
    assert record["name"].startswith("streaming response from 'gpt-4.1' took ")
    assert record["kind"] == "other"
    assert record["critical_ns"] == 0
    # The stream (first chunk and decode, 220 ms) is the model call's time, not the application's.
    assert detail["parts"]["app_other"] < (FIRST_CHUNK_S + DECODE_S) * 1e9
