"""Arrival schedules: as recorded (time-scaled), Poisson at a rate, closed loop; bounded by count
and duration."""

from __future__ import annotations

import itertools
import statistics

import pytest

from latencylens_collector.traffic.schedule import NS_PER_S, as_recorded, bounded, plan, poisson
from latencylens_collector.traffic.shape import RequestShape

MS = 1_000_000


def shapes(*offsets_ms: int) -> list[RequestShape]:
    return [RequestShape(offset_ns=o * MS, input_tokens=100, output_tokens=10) for o in offsets_ms]


def test_as_recorded_divides_offsets_by_the_speed() -> None:
    recorded = shapes(0, 300, 900)
    assert [a.at_ns for a in as_recorded(recorded, 1.0)] == [0, 300 * MS, 900 * MS]
    assert [a.at_ns for a in as_recorded(recorded, 3.0)] == [0, 100 * MS, 300 * MS]
    assert [a.at_ns for a in as_recorded(recorded, 0.5)] == [0, 600 * MS, 1800 * MS]


def test_poisson_gaps_have_the_rate_and_keep_the_recorded_order() -> None:
    recorded = [RequestShape(offset_ns=i, input_tokens=i, output_tokens=1) for i in range(4000)]
    arrivals = poisson(recorded, rate_per_s=20.0, seed=3)
    assert [a.shape.input_tokens for a in arrivals] == list(range(4000))
    gaps = [(b.at_ns - a.at_ns) / NS_PER_S for a, b in itertools.pairwise(arrivals)]
    # Exponential gaps of rate 20: mean 0.05 s and standard deviation 0.05 s; 3,999 of them put
    # the sample mean within 0.05 / sqrt(3999) * 4 = 0.0032 s of it.
    assert statistics.fmean(gaps) == pytest.approx(0.05, abs=0.0032)
    assert statistics.stdev(gaps) == pytest.approx(0.05, rel=0.1)
    assert poisson(recorded[:10], 20.0, seed=3) == arrivals[:10]  # the seed fixes the schedule


def test_bounded_by_count_and_duration() -> None:
    arrivals = as_recorded(shapes(0, 100, 200, 300, 400))
    assert len(bounded(arrivals, limit=2)) == 2
    assert [a.at_ns for a in bounded(arrivals, duration_ns=250 * MS)] == [0, 100 * MS, 200 * MS]
    assert [a.at_ns for a in bounded(arrivals, limit=1, duration_ns=250 * MS)] == [0]


def test_plan_closed_loop_sends_everything_at_once_up_to_the_concurrency() -> None:
    made = plan(shapes(0, 5000, 9000), concurrency=2, limit=2)
    assert made.closed_loop and made.concurrency == 2
    assert [a.at_ns for a in made.arrivals] == [0, 0]


def test_plan_defaults_to_as_recorded_and_refuses_two_schedules() -> None:
    assert [a.at_ns for a in plan(shapes(0, 100)).arrivals] == [0, 100 * MS]
    with pytest.raises(ValueError, match="choose one"):
        plan(shapes(0), speed=2, rate_per_s=3)
    for bad in ({"speed": 0.0}, {"rate_per_s": -1.0}, {"concurrency": 0}, {"duration_ns": 0}, {"limit": -1}):
        with pytest.raises(ValueError):
            plan(shapes(0), **bad)  # type: ignore[arg-type]
