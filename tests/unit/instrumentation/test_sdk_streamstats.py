"""The pure stream summaries: nearest-rank gap percentiles, ITL and per-request output rate."""

from __future__ import annotations

import pytest

from latencylens.streamstats import (
    GapSummary,
    inter_token_latency_ns,
    nearest_rank,
    output_tokens_per_second,
    sorted_gap_stats,
    summarize_gaps,
)


def test_no_gaps_no_summary() -> None:
    assert summarize_gaps([]) is None


def test_one_gap_is_every_statistic() -> None:
    assert summarize_gaps([7]) == GapSummary(7, 7, 7, 7, 7)


def test_hundred_gaps_nearest_rank() -> None:
    gaps = list(range(100, 0, -1))  # 1..100 in reverse: summarising sorts
    # mean = 5050 // 100 = 50; nearest rank: p50 → ceil(50) = 50th value = 50; p90 → 90; p99 → 99.
    assert summarize_gaps(gaps) == GapSummary(mean_ns=50, p50_ns=50, p90_ns=90, p99_ns=99, max_ns=100)


def test_a_single_stall_shows_in_p99_and_max_only() -> None:
    gaps = [20_000_000] * 9 + [500_000_000]
    # 10 gaps: p50 rank ceil(5) = 5 → 20 ms; p90 rank 9 → 20 ms; p99 rank ceil(9.9) = 10 → 500 ms;
    # mean = (9 × 20 + 500) ms / 10 = 68 ms.
    assert summarize_gaps(gaps) == GapSummary(68_000_000, 20_000_000, 20_000_000, 500_000_000, 500_000_000)


@pytest.mark.parametrize(("percent", "expected"), [(1, 10), (34, 20), (66, 20), (67, 30), (100, 30)])
def test_nearest_rank_edges(percent: int, expected: int) -> None:
    assert nearest_rank([10, 20, 30], percent) == expected


def test_itl_is_nvidia_definition() -> None:
    # first content at 50 ms, last chunk at 110 ms, 13 tokens → 60 ms / 12 = 5 ms.
    assert inter_token_latency_ns(50_000_000, 110_000_000, 13) == 5_000_000
    assert inter_token_latency_ns(50, 110, 1) is None  # one token: no gaps between tokens
    assert inter_token_latency_ns(110, 50, 5) is None


def test_output_rate_per_request() -> None:
    # 100 tokens over an e2e of 2 s → 50 tokens/s.
    assert output_tokens_per_second(100, 2_000_000_000) == 50.0
    assert output_tokens_per_second(0, 1) is None
    assert output_tokens_per_second(5, 0) is None


@pytest.mark.parametrize("count", [*range(1, 130), 240, 1001])
def test_written_out_ranks_are_nearest_rank(count: int) -> None:
    ordered = [value * value for value in range(count)]  # distinct values: a wrong rank shows
    mean, p50, p90, p99, top = sorted_gap_stats(ordered)
    assert (p50, p90, p99) == tuple(nearest_rank(ordered, percent) for percent in (50, 90, 99))
    assert (mean, top) == (sum(ordered) // count, ordered[-1])
