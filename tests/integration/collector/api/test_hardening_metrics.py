"""Issue 15, item 4: /metrics shows each project only to its own key, and stays bounded.

The reproduction: with API keys on, /metrics needed none and showed every project's service,
model and SLO names with their histograms; one export with 5,000 service names grew it from
0.5 MB to 18 MB. Here the same export goes to a real collector, and two projects with their keys.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import httpx
from otlp_builders import MS, new_span_id, new_trace_id, protobuf_body, recent_base_ns, span
from pipeline_helpers import wait_until
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from latencylens_collector.auth import KeyStore

SERVICES = 5000
BUSY = {f"busy-{i}": 3 + i for i in range(5)}  # requests per busy service: 3, 4, 5, 6, 7 (25)
LONG_NAME = "l" * 1000


def _roots(names: list[str]) -> list:
    """One single-span request per name (the span's service.name), 10 ms each."""
    base = recent_base_ns()
    return [
        span("GET /", new_trace_id(), new_span_id(), None, base, base + 10 * MS, service=name)
        for name in names
    ]


def _export(url: str, spans: list, key: str | None = None) -> httpx.Response:
    headers = {"Content-Type": "application/x-protobuf"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    return httpx.post(f"{url}/v1/traces", content=protobuf_body(spans), headers=headers, timeout=120)


def _samples(text: str, family: str) -> list[Sample]:
    return [sample for f in text_string_to_metric_families(text) if f.name == family for sample in f.samples]


def test_5000_service_names_keep_the_exposition_bounded(collector) -> None:
    names = [f"svc-{i:04d}" for i in range(SERVICES)] + [LONG_NAME]
    names += [name for name, count in BUSY.items() for _ in range(count)]
    # The registry is the process's: other tests' series may be in it already, so what is bounded
    # is what these requests add.
    before = len(httpx.get(f"{collector.url}/metrics").content)
    assert _export(collector.url, _roots(names)).status_code == 200
    total = SERVICES + 1 + sum(BUSY.values())  # 5,026 requests

    response = httpx.get(f"{collector.url}/metrics")
    assert response.status_code == 200
    counts = {
        sample.labels["service"]: sample.value
        for sample in _samples(response.text, "latencylens_e2e_seconds")
        if sample.name == "latencylens_e2e_seconds_count"
    }
    # 50 series of their own plus "other": the busiest 5 among them, the rest added up exactly.
    assert len(counts) == 51
    assert "other" in counts
    assert {name: counts[name] for name in BUSY} == {name: float(n) for name, n in BUSY.items()}
    assert sum(counts.values()) == total
    assert max(map(len, counts)) <= 100  # the 1,000-character name is cut (or folded into other)
    # 51 series × (15 buckets + +Inf + sum + count) per histogram, not 5,026: well under 100 KB.
    assert len(response.content) - before < 100_000


def test_many_slo_names_keep_their_gauges_bounded(collector) -> None:
    objective = {"type": "ratio", "target": 0.99, "threshold_ns": 1000 * MS}
    for i in range(60):
        created = httpx.post(
            f"{collector.url}/api/slos", json={"name": f"slo {i:02d}", "objective": objective}
        )
        assert created.status_code == 201
    firing = _samples(httpx.get(f"{collector.url}/metrics").text, "latencylens_slo_alert_firing")
    names = Counter(sample.labels["slo"] for sample in firing)
    assert len(names) == 51 and names["other"] == 1
    assert all(count == 1 for count in names.values())  # one series each, no duplicates


def test_with_keys_each_key_sees_its_project_only(start_collector: Callable) -> None:
    lens = start_collector()
    keys = KeyStore(lens.settings.metadata_url)
    _, alpha = keys.create("alpha")
    _, beta = keys.create("beta")
    keys.close()
    assert _export(lens.url, _roots(["alpha-checkout"]), alpha).status_code == 200
    assert _export(lens.url, _roots(["beta-search"]), beta).status_code == 200
    slo = {"name": "alpha latency", "objective": {"type": "ratio", "target": 0.9, "threshold_ns": 1000 * MS}}
    assert (
        httpx.post(f"{lens.url}/api/slos", json=slo, headers={"Authorization": f"Bearer {alpha}"}).status_code
        == 201
    )
    wait_until(lambda: "alpha-checkout" in _scrape(lens.url, alpha), what="alpha's request in /metrics")

    anonymous = httpx.get(f"{lens.url}/metrics")
    assert anonymous.status_code == 200
    assert "latencylens_spans_received_total" in anonymous.text  # the collector's own health, open
    for secret in ("alpha", "beta", "latencylens_e2e_seconds", "latencylens_slo_"):
        assert secret not in anonymous.text, secret

    seen_by_alpha = _scrape(lens.url, alpha)
    assert "alpha-checkout" in seen_by_alpha and 'slo="alpha latency"' in seen_by_alpha
    assert "beta" not in seen_by_alpha
    assert {s.labels["project"] for s in _samples(seen_by_alpha, "latencylens_e2e_seconds")} == {"alpha"}
    seen_by_beta = _scrape(lens.url, beta)
    assert "beta-search" in seen_by_beta and "alpha" not in seen_by_beta

    refused = httpx.get(f"{lens.url}/metrics", headers={"Authorization": "Bearer not-a-key"})
    assert refused.status_code == 401


def _scrape(url: str, key: str) -> str:
    response = httpx.get(f"{url}/metrics", headers={"Authorization": f"Bearer {key}"})
    assert response.status_code == 200
    return response.text
