"""``GET /api/stats/cache`` and ``latencylens stats --cache``: cached and uncached requests apart,
on the advisor's seeded workload (tests/support/advice_workload.py), numbers worked out by hand."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from advice_service import SeededAdvice, seeded_collector
from queries_data import MS, S, request_row

from latencylens_collector.cli.main import main


@pytest.fixture(scope="module")
def seeded(chdb_dsn: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeededAdvice]:
    with seeded_collector(chdb_dsn, Path(tmp_path_factory.mktemp("cache_api")), "cache_api") as running:
        yield running


def test_cached_and_uncached_apart_with_prefill_per_1k_uncached_tokens(seeded) -> None:
    response = httpx.get(f"{seeded.url}/api/stats/cache", params={"by": "route"}, timeout=60)
    assert response.status_code == 200, response.text
    groups = {g["key"]["route"]: g for g in response.json()["groups"]}
    # /summarize: 12 requests read 3000 of 4000 input tokens from the cache (prefill 50 ms: network
    # 40 + queue 30 + prefill 50 = TTFT 120, + decode 95 = e2e 215); 28 read none (prefill 200 ms,
    # TTFT 270, e2e 365). Prefill per 1k uncached tokens: 12 × 50 ms / 12 × 1000 tokens = 50 ms, and
    # 28 × 200 ms / 28 × 4000 tokens = 50 ms: the cache cuts prefill in proportion to what it serves.
    summarize = groups["POST /summarize"]
    assert (summarize["count"], summarize["unknown"]) == (40, 0)
    cached, uncached = summarize["cached"], summarize["uncached"]
    assert (cached["count"], cached["share_of_requests"], cached["cached_input_share"]) == (12, 0.3, 0.75)
    assert (uncached["count"], uncached["share_of_requests"], uncached["cached_input_share"]) == (28, 0.7, 0)
    assert cached["ttft_ns"] == {"p50": 120 * MS, "p95": 120 * MS}
    assert uncached["ttft_ns"] == {"p50": 270 * MS, "p95": 270 * MS}
    assert (cached["prefill_ns"]["p50"], uncached["prefill_ns"]["p50"]) == (50 * MS, 200 * MS)
    assert (cached["e2e_ns"]["p95"], uncached["e2e_ns"]["p95"]) == (215 * MS, 365 * MS)
    assert cached["prefill_per_1k_uncached_tokens_ns"] == 50 * MS
    assert uncached["prefill_per_1k_uncached_tokens_ns"] == 50 * MS
    assert (cached["prefill_requests"], uncached["prefill_requests"]) == (12, 28)
    # /story: 500 uncached input tokens and 40 ms of prefill each → 80 ms per 1k; nothing cached
    story = groups["POST /story"]
    assert story["cached"]["count"] == 0 and story["cached"]["ttft_ns"] == {"p50": None, "p95": None}
    assert story["cached"]["prefill_per_1k_uncached_tokens_ns"] is None
    assert story["uncached"]["prefill_per_1k_uncached_tokens_ns"] == 80 * MS


def test_requests_without_counts_are_counted_apart(collector) -> None:
    start = (time.time_ns() // S - 600) * S
    collector.store.upsert_requests(
        [
            request_row(1, start, {"prefill": 100}, input_tokens=1000, cached=0),
            request_row(2, start + S, {"prefill": 20}, input_tokens=1000, cached=800),
            request_row(3, start + 2 * S, {"prefill": 60}, input_tokens=None, cached=None),
        ]
    )
    body = httpx.get(f"{collector.url}/api/stats/cache", timeout=60).json()
    (whole,) = body["groups"]
    assert (whole["count"], whole["unknown"], whole["cached"]["count"], whole["uncached"]["count"]) == (
        3,
        1,
        1,
        1,
    )
    # 20 ms over the 200 uncached tokens of the cached request: 100 ms per 1k; 100 ms / 1000: 100 ms
    assert whole["cached"]["prefill_per_1k_uncached_tokens_ns"] == 100 * MS
    assert whole["uncached"]["prefill_per_1k_uncached_tokens_ns"] == 100 * MS


def test_stats_cache_at_80_columns(seeded, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    args = ["stats", "--cache", "--url", seeded.url, "--by", "route", "--route", "POST /summarize"]
    assert main(args) == 0
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in lines) <= 80
    rows = {line.split()[2]: line.split()[3:] for line in lines if line.startswith("POST /summarize")}
    # n, cached share of input, ttft p50, ttft p95, prefill p50, prefill per 1k uncached tokens
    assert rows["cached"] == ["12", "75%", "120.0", "120.0", "50.0", "50.0"]
    assert rows["uncached"] == ["28", "0%", "270.0", "270.0", "200.0", "50.0"]
