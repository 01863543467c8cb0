"""Start-up objects out of the garbage collector's reach, and every collection's pause measured."""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator

import pytest

from latencylens_collector.runtime import heap
from latencylens_collector.runtime.metrics import REGISTRY


@pytest.fixture
def settled() -> Iterator[None]:
    interval = sys.getswitchinterval()
    heap.settle()
    try:
        yield
    finally:
        heap.release()
    assert sys.getswitchinterval() == interval


def _pauses(generation: str) -> float:
    return REGISTRY.get_sample_value("latencylens_gc_pause_seconds_count", {"generation": generation}) or 0.0


def test_settle_freezes_what_start_up_left_and_release_hands_it_back(settled: None) -> None:
    assert gc.get_freeze_count() > 10_000  # modules, classes: all loaded by now
    assert sys.getswitchinterval() == heap.SWITCH_INTERVAL_S
    assert gc.get_threshold()[0] >= heap.YOUNG_THRESHOLD
    heap.release()
    assert gc.get_freeze_count() == 0
    heap.settle()  # the fixture releases it again


def test_a_full_collection_then_scans_only_what_was_made_since(settled: None) -> None:
    """Frozen objects are not tracked by any generation: a full collection sees only new ones."""
    made = [[n] for n in range(1_000)]  # lists are always tracked (small dicts of ints are not)
    tracked = len(gc.get_objects())
    assert tracked < gc.get_freeze_count()
    assert tracked >= len(made)


def test_each_collections_pause_is_observed_by_generation(settled: None) -> None:
    before = _pauses("2"), _pauses("0")
    gc.collect()
    gc.collect(0)
    assert (_pauses("2"), _pauses("0")) == (before[0] + 1, before[1] + 1)
