"""The comparison's statistics: quantiles, the KS distance and its 5 % threshold, goodput, findings."""

from __future__ import annotations

from typing import Any

import pytest

from latencylens_collector.analysis.attribution import COMPONENTS
from latencylens_collector.traffic.compare import comparison, ks_critical, ks_statistic, quantile
from latencylens_collector.traffic.responses import Slo

MS = 1_000_000


def row(
    n: int, ttft_ms: float, queue_ms: float, *, itl_ms: float = 5.0, start_ms: int = 0, error: bool = False
) -> dict[str, Any]:
    parts = {f"{name}_ns": 0 for name in COMPONENTS}
    parts["queue_ns"] = round(queue_ms * MS)
    parts["decode_ns"] = 100 * MS
    e2e = round((ttft_ms + 100) * MS)
    return {
        "trace_hex": f"{n:032x}",
        "start_ns": start_ms * MS,
        "e2e_ns": e2e,
        "ttft_ns": round(ttft_ms * MS),
        "itl_ns": round(itl_ms * MS),
        "status_error": error,
        "input_tokens": 100,
        "output_tokens": 20,
        "decode_tokens_per_second": 200.0,
        **parts,
    }


def test_quantile_interpolates_like_numpy() -> None:
    assert quantile([1, 2, 3, 4], 0.5) == 2.5  # numpy.quantile([1,2,3,4], 0.5) = 2.5
    assert quantile([10, 20, 30, 40, 50], 0.95) == pytest.approx(48.0)  # 40 + 0.8 * 10
    assert quantile([], 0.5) is None


def test_ks_statistic() -> None:
    assert ks_statistic([1, 2, 3], [1, 2, 3]) == 0
    assert ks_statistic([1, 2, 3], [10, 20, 30]) == 1
    assert ks_statistic([1, 2, 3, 4], [3, 4, 5, 6]) == 0.5  # at 2: F_a = 2/4, F_b = 0
    assert ks_critical(40, 40) == pytest.approx(0.3037, abs=1e-4)  # 1.358 * sqrt(80 / 1600)


def test_same_distribution_matches_and_a_grown_queue_is_named() -> None:
    production = [row(i, 100 + i, queue_ms=5, start_ms=i * 100) for i in range(40)]
    same = [row(100 + i, 101 + i, queue_ms=5, start_ms=i * 100) for i in range(40)]
    found = comparison("r1", production, same, Slo(ttft_ns=130 * MS))
    assert found.ttft.matches and found.itl.matches
    assert not any("queue" in line for line in found.findings)
    # Every TTFT of production is 100 + i ms; the SLO keeps i <= 30: 31 of 40 good.
    assert found.production.good == 31 and found.production.good_share == pytest.approx(31 / 40)

    loaded = [row(200 + i, 300 + 3 * i, queue_ms=200, start_ms=i * 33) for i in range(40)]
    found = comparison("r3", production, loaded, Slo(ttft_ns=130 * MS))
    assert not found.ttft.matches
    assert found.production.parts_mean_ns["queue"] == 5 * MS
    assert found.replay.parts_mean_ns["queue"] == 200 * MS
    assert "queue grew: mean 5.0 ms → 200.0 ms per request" in found.findings
    assert found.replay.good == 0 and found.replay.goodput_per_s == 0


def test_failed_requests_are_never_good_and_wall_span_sets_the_rates() -> None:
    rows = [row(1, 50, 0, start_ms=0), row(2, 50, 0, start_ms=850, error=True)]
    found = comparison("r", rows, rows, Slo())
    # Wall span: first start 0 to last end 850 + 150 ms = 1.0 s; 40 output tokens over it.
    assert found.production.wall_s == pytest.approx(1.0)
    assert found.production.output_tokens_per_s == pytest.approx(40.0)
    assert found.production.failed == 1 and found.production.good == 1


def test_cost_of_each_side_at_its_own_prices() -> None:
    production = [
        {**row(i, 100, 5), "provider": "openai", "model": "gpt-4o", "cache_read_input_tokens": 0}
        for i in range(4)
    ]
    replay = [
        {**row(i, 100, 5), "provider": "vllm", "model": "llama-local", "cache_read_input_tokens": 0}
        for i in range(4)
    ]
    found = comparison("r", production, replay, Slo())
    # gpt-4o in genai-prices: $2.50 per million input and $10 per million output tokens; each
    # request has 100 in and 20 out: 100 * 2.5e-6 + 20 * 10e-6 = $0.00045, four of them $0.0018.
    assert found.production.cost_usd == pytest.approx(0.0018)
    assert found.production.priced == 4
    assert found.replay.cost_usd is None and found.replay.priced == 0  # a self-hosted model has no price
