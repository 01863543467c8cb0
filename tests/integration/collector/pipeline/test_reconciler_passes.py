"""How often the reconciler looks at a trace: exactly twice, one settle delay apart, however often
its passes run. Passes closer together than the settle delay used to look at every trace once per
pass in the delay (three times with the service's 5 s interval and 10 s settle delay), a cost paid
on every trace under sustained ingest.

The store's clock is the only clock the reconciler reads; here it is set by hand (a store whose
``now_ns`` returns the test's time), so every pass is at a known time after the trace's insert."""

from __future__ import annotations

import random
import time
from collections.abc import Callable

from convergence_support import chat

from latencylens_collector.pipeline.ingest import Ingestor
from latencylens_collector.pipeline.reconciler import Reconciler
from latencylens_collector.settings import Settings
from latencylens_collector.storage.store import Store

S = 1_000_000_000
SETTLE_S = 10


class StoreAtTime(Store):
    """A real store whose clock reads ``at_ns`` (the reconciler's only clock)."""

    at_ns = 0

    def now_ns(self) -> int:
        return self.at_ns


def _inserted_ns(store: Store) -> int:
    rows = store.query(f"SELECT toUnixTimestamp64Nano(max(inserted_at)) AS t FROM {store.table('spans')}")
    return int(rows[0]["t"])


def _looks(make_settings: Callable[..., Settings], pass_every_s: int) -> list[int]:
    """Seconds after the trace's insert of each pass that looked at it (passes every
    ``pass_every_s`` seconds, from 5 s before the insert to 4 settle delays after it)."""
    store = StoreAtTime(make_settings())
    store.migrate()
    try:
        trace = chat(random.Random(7), time.time_ns() - 60 * S, "default")
        Ingestor(store).ingest(trace.spans)
        inserted = _inserted_ns(store)
        reconciler = Reconciler(store, settle_s=SETTLE_S, lookback_s=3600)
        looks = []
        for after_s in range(-5, 4 * SETTLE_S + 1, pass_every_s):
            store.at_ns = inserted + after_s * S
            if reconciler.run_once().checked:
                looks.append(after_s)
        return looks
    finally:
        store.close()


def test_passes_closer_than_the_settle_delay_look_at_a_trace_twice(
    make_settings: Callable[..., Settings],
) -> None:
    # Passes at -5, -3, ..., 39 s: the trace settles at 10 s (first pass at or after: 11 s) and its
    # second look is a settle delay later (first pass at or after 20 s: 21 s).
    assert _looks(make_settings, pass_every_s=2) == [11, 21]


def test_passes_further_apart_than_the_settle_delay_still_look_at_every_trace(
    make_settings: Callable[..., Settings],
) -> None:
    # Passes at -5, 20 and 45 s: at 20 s the insert is already two settle delays old, so both of its
    # looks fall in that one pass; the next pass has nothing new.
    assert _looks(make_settings, pass_every_s=25) == [20]


def test_a_store_clock_that_stepped_back_hides_no_later_insert(
    make_settings: Callable[..., Settings],
) -> None:
    """A pass reads the store's clock an hour ahead (before NTP stepped it back); then the trace
    is inserted, stamped by the corrected clock, an hour behind that pass. It is still looked at
    twice, as after any insert: the cursor went back with the clock. Had it stayed an hour ahead,
    no pass would look at the trace until the clock caught up with it."""
    store = StoreAtTime(make_settings())
    store.migrate()
    try:
        reconciler = Reconciler(store, settle_s=SETTLE_S, lookback_s=3600)
        store.at_ns = time.time_ns() + 3600 * S
        assert reconciler.run_once().checked == 0
        Ingestor(store).ingest(chat(random.Random(7), time.time_ns() - 60 * S, "default").spans)
        inserted = _inserted_ns(store)
        looks = []
        for after_s in range(-5, 4 * SETTLE_S + 1, 2):
            store.at_ns = inserted + after_s * S
            if reconciler.run_once().checked:
                looks.append(after_s)
        assert looks == [11, 21]
    finally:
        store.close()
