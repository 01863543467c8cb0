"""Pure summaries of one stream's timing: inter-chunk gap percentiles, ITL and output rate.

The stream proxy only appends one integer per content chunk; everything here runs once, when the
stream ends, on plain integers, so it is tested without clocks or servers. Public: the collector
derives a request's ITL with the same function, so SDK and collector cannot disagree on it.
Definitions follow NVIDIA's LLM benchmarking guide: TTFT is call start → first non-empty content;
ITL = (t_last − t_first) / (output tokens − 1); per-request output rate = output tokens / e2e.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "GapSummary",
    "inter_token_latency_ns",
    "nearest_rank",
    "output_tokens_per_second",
    "sorted_gap_stats",
    "summarize_gaps",
]


@dataclass(frozen=True, slots=True)
class GapSummary:
    """Integer-ns summary of the gaps between consecutive content chunks."""

    mean_ns: int
    p50_ns: int
    p90_ns: int
    p99_ns: int
    max_ns: int


def nearest_rank(sorted_values: list[int], percent: int) -> int:
    """The nearest-rank percentile: the smallest value with at least ``percent``% of values ≤ it.

    Always an observed gap (no interpolation), so a p99 stall is one the user actually saw.
    """
    count = len(sorted_values)
    rank = -(-percent * count // 100)  # ceil(percent * count / 100), in integers
    return sorted_values[max(rank, 1) - 1]


def summarize_gaps(gaps: list[int]) -> GapSummary | None:
    """Mean (floored), p50, p90, p99 and max of ``gaps``; ``None`` when there are none."""
    if not gaps:
        return None
    return GapSummary(*sorted_gap_stats(sorted(gaps)))


def sorted_gap_stats(ordered: list[int]) -> tuple[int, int, int, int, int]:
    """``(mean, p50, p90, p99, max)`` of a non-empty ascending list, as :func:`summarize_gaps` gives
    them: the stream proxy calls this once per stream, so :func:`nearest_rank` is written out
    (``ceil(percent * count / 100) - 1``, never below 0 for a non-empty list)."""
    count = len(ordered)
    return (
        sum(ordered) // count,
        ordered[-(-50 * count // 100) - 1],
        ordered[-(-90 * count // 100) - 1],
        ordered[-(-99 * count // 100) - 1],
        ordered[-1],
    )


def inter_token_latency_ns(first_ns: int, last_ns: int, output_tokens: int) -> int | None:
    """(last − first) // (tokens − 1), integer ns; ``None`` for fewer than two tokens or last < first."""
    if output_tokens < 2 or last_ns < first_ns:
        return None
    return (last_ns - first_ns) // (output_tokens - 1)


def output_tokens_per_second(output_tokens: int, e2e_ns: int) -> float | None:
    """Output tokens over the request's end-to-end time (NVIDIA's "TPS per user")."""
    if output_tokens <= 0 or e2e_ns <= 0:
        return None
    return output_tokens * 1e9 / e2e_ns
