"""The compiled request-row modules (``analysis._compiled``) build exactly the rows Python builds.

``make test`` compiles them before the tests run, so every other test of attribution, conventions
and request rows exercises the compiled build; these tests hold it to the Python modules on a
corpus built for it, and check when a build is used. The Python side runs in a subprocess with
``LATENCYLENS_PURE_PYTHON=1``: one process cannot hold both builds of a module.
"""

from __future__ import annotations

import json
import os
import pickle
import random
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from otlp_builders import chat_trace, protobuf_body

from latencylens import semconv
from latencylens_collector.analysis import _compiled
from latencylens_collector.analysis.conventions import (
    classify,
    genai,
    logfire,
    openinference,
    openlit,
    openllmetry,
    vllm,
)
from latencylens_collector.analysis.records import SpanRow
from latencylens_collector.analysis.request_rows import group_by_trace, trace_rows
from latencylens_collector.intake import otlp

TESTS = Path(__file__).resolve().parents[3]
NOW = 1_800_000_000_000_000_000


def _names() -> list[str]:
    """Every attribute name the conventions and our SDK define (module constants with a dot)."""
    names = set()
    for module in (semconv, genai, logfire, openinference, openlit, openllmetry, vllm):
        for key, value in vars(module).items():
            if key.isupper() and isinstance(value, str) and "." in value:
                names.add(value)
            elif key.isupper() and isinstance(value, tuple):
                names.update(item for item in value if isinstance(item, str) and "." in item)
    return sorted(names)


_VALUES = [
    "0", "1", "7", "45", "662", "1200", "-3", "41905864", "2652230333", "0.041", "2.65", "1e3", "",
    "true", "false", "model", "tool", "retrieval", "request", "chat", "text_completion", "embeddings",
    "LLM", "llm", "groq", "openai", "vllm", "gpt-4o-mini", "r1", "r2", "stop", "measured", "reported",
    "estimated", "[\"stop\"]", "x" * 40,
]  # fmt: skip


def _random_traces(seed: int, count: int) -> list[list[SpanRow]]:
    """Traces of 1–12 spans: parents among earlier spans (or missing, or none), attributes drawn
    from every name a convention reads, values of every shape those names take, kinds as the
    decoder classifies them."""
    rng = random.Random(seed)
    names = _names()
    traces = []
    for index in range(count):
        trace_id = index.to_bytes(16, "big")
        base = NOW - rng.randrange(10**12)
        spans: list[SpanRow] = []
        for position in range(rng.randint(1, 12)):
            span_id = (index * 100 + position + 1).to_bytes(8, "big")
            roll = rng.random()
            if position == 0 or roll < 0.1:
                parent = b""
            elif roll < 0.15:
                parent = b"\xff" * 8  # a parent never stored
            else:
                parent = rng.choice(spans).span_id
            attributes = {rng.choice(names): rng.choice(_VALUES) for _ in range(rng.randint(0, 14))}
            start = base + rng.randrange(10**9)
            spans.append(
                SpanRow(
                    trace_id,
                    span_id,
                    parent,
                    "svc",
                    rng.choice(["chat", "llm_request", "POST", "retrieve"]),
                    rng.choice(["SPAN_KIND_CLIENT", "SPAN_KIND_INTERNAL", "SPAN_KIND_SERVER"]),
                    classify(attributes, bool(parent)),
                    start,
                    rng.randrange(0, 3 * 10**9),
                    rng.choice([0, 1, 2]),
                    attributes=attributes,
                )
            )
        traces.append(spans)
    return traces


def _decoded_traces() -> list[list[SpanRow]]:
    """The fixtures, the benchmark's bodies and the SDK test builders' chat traces, decoded."""
    bodies = [
        otlp.parse_json(path.read_bytes()).SerializeToString()
        for path in sorted((TESTS / "fixtures").glob("*.otlp.json"))
    ]
    bodies += [protobuf_body(chat_trace(NOW - 3600 * 10**9 + i * 10**9)) for i in range(5)]
    sys.path.insert(0, str(TESTS.parent))
    try:
        from bench import _payloads
    finally:
        sys.path.remove(str(TESTS.parent))
    bodies += [_payloads.stamp(body) for body in _payloads.templates(2, base_ns=NOW - 7200 * 10**9)]
    limits = otlp.Limits(now_ns=NOW)
    spans = [span for body in bodies for span in otlp.decode(body, False, limits=limits).spans]
    return list(group_by_trace(spans).values())


def _rows(traces: list[list[SpanRow]]) -> list[Any]:
    return [
        trace_rows(spans, version=index, computed_at_us=5, settled=index % 2 == 0)
        for index, spans in enumerate(traces)
    ]


_PURE_SCRIPT = """
import pickle, sys
from latencylens_collector.analysis import _compiled
from latencylens_collector.analysis.request_rows import trace_rows
assert not _compiled.in_use()
traces = pickle.load(open(sys.argv[1], "rb"))
rows = [trace_rows(s, version=i, computed_at_us=5, settled=i % 2 == 0) for i, s in enumerate(traces)]
sys.stdout.write(repr(rows))
"""


def _pure_python_rows(traces: list[list[SpanRow]], tmp_path: Path) -> str:
    path = tmp_path / "traces.pickle"
    path.write_bytes(pickle.dumps(traces))
    env = {**os.environ, _compiled.PURE_ENV: "1"}
    done = subprocess.run(
        [sys.executable, "-c", _PURE_SCRIPT, str(path)], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_make_test_runs_the_compiled_modules() -> None:
    """Where a C compiler is, ``make test`` builds them first: the tests run what users run."""
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler here: the collector runs the Python modules")
    assert _compiled.in_use(), (
        "the compiled request-row modules are missing or older than their sources: run "
        "`make test` (or `make native`) to rebuild them"
    )
    from latencylens_collector.analysis import attribution, records, request_rows
    from latencylens_collector.analysis.conventions import reading

    for module in (attribution, records, request_rows, reading):
        assert not str(module.__file__).endswith(".py"), module.__file__


@pytest.mark.parametrize("corpus", ["decoded", "random"])
def test_compiled_and_python_modules_build_the_same_rows(corpus: str, tmp_path: Path) -> None:
    if not _compiled.in_use():
        pytest.skip("no compiled build in this process")
    traces = _decoded_traces() if corpus == "decoded" else _random_traces(seed=18, count=1500)
    rows = _rows(traces)
    assert sum(1 for written in rows if written) > len(traces) // 3  # most traces have a row
    assert repr(rows) == _pure_python_rows(traces, tmp_path)


def _manifest(native_dir: Path, **changes: Any) -> None:
    """A manifest as the build writes it, with ``changes``, and the one extension it lists."""
    native_dir.mkdir(parents=True, exist_ok=True)
    (native_dir / "rows.so").write_bytes(b"")
    manifest = {
        "python": _compiled._python_tag(),
        "sources": _compiled.source_hashes(),
        "files": ["rows.so"],
        **changes,
    }
    (native_dir / _compiled.MANIFEST).write_text(json.dumps(manifest))


def test_a_build_is_used_only_when_made_from_the_current_sources(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(_compiled.PURE_ENV, raising=False)
    assert not _compiled.usable(tmp_path / "none")  # no build
    _manifest(tmp_path / "current")
    assert _compiled.usable(tmp_path / "current")
    stale = dict(_compiled.source_hashes(), attribution="0" * 64)  # attribution.py edited since
    _manifest(tmp_path / "stale", sources=stale)
    assert not _compiled.usable(tmp_path / "stale")
    _manifest(tmp_path / "other", python=".cpython-39-aarch64-linux-gnu.so")  # another interpreter
    assert not _compiled.usable(tmp_path / "other")
    _manifest(tmp_path / "partial", files=["rows.so", "gone.so"])  # an extension deleted since
    assert not _compiled.usable(tmp_path / "partial")
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / _compiled.MANIFEST).write_text("{not json")
    assert not _compiled.usable(tmp_path / "broken")
    monkeypatch.setenv(_compiled.PURE_ENV, "1")
    assert not _compiled.usable(tmp_path / "current")


def test_without_a_c_compiler_the_build_says_so_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no cc, no gcc
    monkeypatch.setenv("CC", "cc")
    said = _compiled.build(tmp_path / "native")
    assert "no C compiler found" in said and "Python" in said
    assert not (tmp_path / "native").exists()
    assert not _compiled.usable(tmp_path / "native")
