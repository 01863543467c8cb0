"""``GET /api/stats/components``: each part's share, mean and p95 per time bucket, on the advisor's
seeded workload (tests/support/advice_workload.py), numbers worked out by hand."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from advice_service import SeededAdvice, seeded_collector
from advice_workload import HOUR_NS
from queries_data import MS

from latencylens_collector.analysis.attribution import COMPONENTS
from latencylens_collector.queries.times import from_ns


@pytest.fixture(scope="module")
def seeded(chdb_dsn: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeededAdvice]:
    with seeded_collector(
        chdb_dsn, Path(tmp_path_factory.mktemp("components_api")), "components_api"
    ) as running:
        yield running


def _get(seeded: SeededAdvice, **params: str) -> dict:
    response = httpx.get(f"{seeded.url}/api/stats/components", params=params, timeout=60)
    assert response.status_code == 200, response.text
    return response.json()


def test_each_parts_share_mean_and_p95_per_bucket_for_a_route(seeded) -> None:
    body = _get(seeded, route="POST /story", bucket="1h")
    # /story: 40 requests, two in each of 20 hours (i and i + 20 share hour i mod 20 and their
    # length: 1000 output tokens when i mod 4 = 3, else 200). Network 50 + queue 25 + prefill 40 +
    # decode (outputs − 1) × 10 ms: e2e 2105 ms (decode 1990) or 10 105 ms (decode 9990).
    buckets = body["buckets"]
    assert len(buckets) == 20 and all(b["count"] == 2 for b in buckets)
    first, fourth = buckets[0], buckets[3]
    assert first["bucket_start"].startswith(from_ns(seeded.t0).isoformat()[:19])
    assert first["e2e_mean_ns"] == 2105 * MS
    assert {k: v["mean_ns"] for k, v in first["parts"].items() if v["mean_ns"]} == {
        "network": 50 * MS,
        "queue": 25 * MS,
        "prefill": 40 * MS,
        "decode": 1990 * MS,
    }
    assert first["parts"]["decode"]["share"] == pytest.approx(1990 / 2105)
    assert fourth["parts"]["decode"]["mean_ns"] == 9990 * MS  # hour 3: outputs of 1000 tokens
    assert fourth["parts"]["decode"]["share"] == pytest.approx(9990 / 10105)
    # p95 from the percentile states (bfloat16: 8 significant bits, at most 0.8 % low)
    assert fourth["parts"]["decode"]["p95_ns"] == pytest.approx(9990 * MS, rel=0.008)
    assert fourth["parts"]["network"]["p95_ns"] == pytest.approx(50 * MS, rel=0.008)
    # the means add up to the mean end-to-end time in every bucket
    for bucket in buckets:
        assert sum(bucket["parts"][name]["mean_ns"] for name in COMPONENTS) == pytest.approx(
            bucket["e2e_mean_ns"], abs=len(COMPONENTS)
        )


def test_filters_by_model_and_provider(seeded) -> None:
    # /answer: gpt-4o (30 requests, i < 30) and gpt-4o-mini (20) at openai, bucketed by day so the
    # window's 20 hours fall in one or two buckets.
    fast = _get(seeded, model="gpt-4o-mini", provider="openai", bucket="1d")
    assert sum(b["count"] for b in fast["buckets"]) == 20
    assert _get(seeded, provider="nobody", bucket="1h")["buckets"] == []
    far = _get(seeded, provider="p-far", bucket="1h")
    # /lookup at p-far: 30 requests with network 400 ms on i mod 10 in (1, 4, 7), else 60 ms; hour 1
    # holds i = 1 and 21 (both 400 ms)
    hour1 = [
        b
        for b in far["buckets"]
        if b["bucket_start"].startswith(from_ns(seeded.t0 + HOUR_NS).isoformat()[:19])
    ]
    assert hour1[0]["parts"]["network"]["mean_ns"] == 400 * MS


def test_unknown_bucket_is_422(seeded) -> None:
    response = httpx.get(f"{seeded.url}/api/stats/components", params={"bucket": "2h"}, timeout=60)
    assert response.status_code in (400, 422) and "unknown bucket" in response.text
