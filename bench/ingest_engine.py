"""Ingest by the engine (``ingest_path = engine``) against the Python path and an engine floor.

Three measurements in one run, ratios between them (issue 18):

* **Python path**: ``latencylens serve`` (subprocess, fresh chdb, spool on, default settings)
  with :data:`SENDERS` then :data:`FEW_SENDERS` httpx senders posting the ingest benchmark's
  bodies (500 LLM spans each, :mod:`bench._payloads`), each waiting for its answer;
* **engine path**: the same with ``LATENCYLENS_INGEST_PATH=engine``;
* **auto path**: the same with ``LATENCYLENS_INGEST_PATH=auto`` (the engine while enough exports
  wait to fill an INSERT, else Python);
* **engine floor**: :mod:`bench._engine_floor`, one process inserting the same bodies through
  the same SQL, :data:`FLOOR_BATCH_BODIES` per INSERT, with no HTTP, queue or Python per span.

Per path: spans/s acknowledged, request p50/p99, the collector's CPU per span (its process, chdb's
threads included, over the window) and its RSS at the end. After the runs, the request rows the
collectors stored are compared (:mod:`bench._request_rows`): every path is sent copies of the same
800 template traces, so every copy must have the same row on all. Short windows by default
(:data:`SECONDS`): the machine is shared, so read the ratios, which are taken in the same run.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from typing import Any

import httpx

from bench import _collector, _payloads, _request_rows
from bench.ingest import MIB, _Load, _throughput

SECONDS = float(os.environ.get("LATENCYLENS_BENCH_ENGINE_SECONDS") or 20.0)
SENDERS, FEW_SENDERS = (
    int(n) for n in (os.environ.get("LATENCYLENS_BENCH_ENGINE_SENDERS") or "32,8").split(",")
)
"""The two loads, many senders then few (``LATENCYLENS_BENCH_ENGINE_SENDERS=4,2`` for others)."""
WARMUP_S = 4.0
SETTLE_S = 2.0
PATHS = {"python": "Python path", "engine": "engine path", "auto": "auto path"}
FLOOR_BATCH_BODIES = 16
"""Bodies per floor INSERT: about what the writer gathers from 32 senders of one body each."""
DIRECTORY = _collector.ROOT / ".latencylens" / "bench-ingest-engine"


def floor() -> dict[str, float]:
    command = [
        sys.executable,
        "-m",
        "bench._engine_floor",
        str(DIRECTORY / "floor"),
        str(SECONDS),
        str(FLOOR_BATCH_BODIES),
    ]
    out = subprocess.run(command, cwd=_collector.ROOT, check=True, capture_output=True, text=True).stdout
    result: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return result


def path(name: str, templates: list[bytes]) -> dict[str, Any]:
    """Both sender counts against one collector on ``ingest_path = name``."""
    collector = _collector.start(DIRECTORY / name, env={"LATENCYLENS_INGEST_PATH": name})
    out: dict[str, Any] = {}
    try:
        load = _Load(collector.url, templates, SENDERS)
        load.start()
        time.sleep(WARMUP_S)
        for senders in (SENDERS, FEW_SENDERS):
            if senders != load.active:
                load.active = senders
                time.sleep(SETTLE_S)
            cpu, bodies = collector.cpu_seconds(), engine_bodies(collector.url)
            latencies, spans, elapsed = load.window(SECONDS)
            figures = _throughput(latencies, spans, elapsed)
            figures["cpu_us_per_span"] = (collector.cpu_seconds() - cpu) / max(1, spans) * 1e6
            after = engine_bodies(collector.url)
            figures["engine_bodies"] = {k: n - bodies.get(k, 0) for k, n in after.items()}
            figures["rss_mib"] = collector.rss_bytes() / MIB
            out[f"senders_{senders}"] = figures
        load.stop()
        out["refused"] = load.refused
    finally:
        collector.stop()
    return out


def engine_bodies(url: str) -> dict[str, int]:
    """``latencylens_engine_bodies_total`` by outcome, from the collector's ``/metrics``."""
    text = httpx.get(f"{url}/metrics", timeout=10).text
    found = re.findall(r'^latencylens_engine_bodies_total\{outcome="(\w+)"\} (\S+)$', text, re.MULTILINE)
    return {outcome: int(float(value)) for outcome, value in found}


def run(report: Any) -> None:
    engine_floor = floor()
    report.add(
        "engine floor: same bodies, same SQL, one process",
        engine_floor["spans_per_s"],
        "spans/s",
        f"{int(engine_floor['spans']):,} spans in {engine_floor['seconds']:.0f} s, "
        f"{FLOOR_BATCH_BODIES} bodies per INSERT; "
        f"{engine_floor['cpu_s'] / engine_floor['spans'] * 1e6:.1f} µs CPU per span",
    )
    templates = _payloads.templates(8)  # one set for every path: same traces, same rows
    results = {name: path(name, templates) for name in PATHS}
    for senders in (SENDERS, FEW_SENDERS):
        key = f"senders_{senders}"
        python = results["python"][key]
        for name, label in PATHS.items():
            figures = results[name][key]
            ratio = figures["spans_per_s"] / python["spans_per_s"]
            report.add(
                f"{label}, {senders} senders",
                figures["spans_per_s"],
                "spans/s",
                f"p50 / p99 {figures['p50_ms']:.0f} / {figures['p99_ms']:.0f} ms; "
                f"{figures['cpu_us_per_span']:.1f} µs collector CPU per span; "
                f"RSS {figures['rss_mib']:.0f} MiB; "
                f"{ratio:.2f}× the Python path, "
                f"{figures['spans_per_s'] / engine_floor['spans_per_s']:.0%} of the engine floor"
                + _bodies_note(figures["engine_bodies"]),
                ratio=ratio,
            )
    rows, templates_seen, differing = _request_rows.differing([DIRECTORY / name for name in results])
    counts = " and ".join(f"{n:,} ({label})" for n, label in zip(rows.values(), PATHS.values(), strict=True))
    verdict = "identical" if not differing else f"DIFFERENT for {len(differing)}: {', '.join(differing[:5])}"
    report.add(
        "request rows, engine and auto paths against Python path",
        len(differing),
        "template traces whose rows differ",
        f"rows {counts} of {templates_seen} "
        f"template traces sent again and again with new ids; every column but the id and when it "
        f"was written, after the collectors stopped: {verdict}",
    )
    for name, result in results.items():
        if result["refused"]:
            report.note(f"{name}: refused answers (status: count): {result['refused']}")


def _bodies_note(outcomes: dict[str, int]) -> str:
    """Where the window's exports went on a path that hands them to the engine."""
    if not any(outcomes.values()):
        return ""
    shown = ", ".join(f"{outcome} {count:,}" for outcome, count in sorted(outcomes.items()) if count)
    return f"; bodies handed to the engine: {shown}"
