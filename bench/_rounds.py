"""Interleaved timing: baseline and candidate alternate in rounds and each side's median is kept.

The machine is shared and noisy (absolute numbers drift 2× within minutes), so a ratio is only
trusted when both sides ran under the same conditions: each round times a block of the baseline
then a block of the candidate (order alternating), and the medians of the per-call times are
compared. A single slow round moves neither median.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Paired:
    """Median per-call nanoseconds of both sides and the median of the per-round ratios."""

    baseline_ns: float
    candidate_ns: float
    ratio: float


def per_call_ns(block: Callable[[int], None], calls: int) -> float:
    """Nanoseconds per call of ``block(calls)``, which makes ``calls`` calls."""
    began = time.perf_counter_ns()
    block(calls)
    return (time.perf_counter_ns() - began) / calls


def paired(
    baseline: Callable[[int], None], candidate: Callable[[int], None], calls: int, rounds: int
) -> Paired:
    """Time ``rounds`` interleaved blocks of ``calls`` calls of each side (after one warm-up each).

    The garbage collector runs between blocks, not inside them, so neither side pays for the
    other's garbage.
    """
    baseline(calls // 10 or 1)
    candidate(calls // 10 or 1)
    base_times: list[float] = []
    cand_times: list[float] = []
    ratios: list[float] = []
    for index in range(rounds):
        order = (baseline, candidate) if index % 2 == 0 else (candidate, baseline)
        results = {}
        for side in order:
            gc.collect()
            results[side] = per_call_ns(side, calls)
        base_times.append(results[baseline])
        cand_times.append(results[candidate])
        ratios.append(results[candidate] / results[baseline])
    return Paired(statistics.median(base_times), statistics.median(cand_times), statistics.median(ratios))
