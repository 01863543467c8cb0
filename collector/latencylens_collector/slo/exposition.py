"""Prometheus exposition of SLO state and of latency histograms, computed at scrape time.

The histograms are not counters kept in memory: each scrape counts the stored requests per bucket
in ClickHouse. A request row is recomputed whenever late spans arrive, so counting at ingest
would count it twice; counting what is stored is exact, survives restarts and gives every
collector replica the same answer. The cost is one scan of ``requests`` per scrape, so keep the
scrape interval at 15 s or more on large tables. Burn rates and budgets come from the latest
evaluation stored in the metadata database.

One collector object per process, which ``GET /metrics`` collects for each caller's project
(:mod:`latencylens_collector.api.routes.metrics`); each running SLO service adds itself as a source
while it runs. A source is anything with a store and an SLO repository (:class:`SloSource`), so
this module needs nothing from the service that feeds it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Sequence
from typing import Final, Protocol

from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily, Metric

from latencylens_collector.slo.measure import histograms
from latencylens_collector.slo.repository import SloRepository
from latencylens_collector.storage.store import StorageError, Store

_log = logging.getLogger(__name__)

BUCKET_SECONDS: Final = (0.05, 0.1, 0.2, 0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 3.0, 5.0, 8.0, 13.0, 30.0, 60.0)
"""Upper bounds of the TTFT and end-to-end buckets (seconds); 0.8 and 1.0 match common SLOs."""
BUCKET_NS: Final = tuple(round(b * 1e9) for b in BUCKET_SECONDS)
HISTOGRAM_LABELS: Final = ("project", "service", "model")


class SloSource(Protocol):
    """What a scrape reads from a running SLO service: stored requests and SLO state."""

    @property
    def store(self) -> Store: ...

    @property
    def repository(self) -> SloRepository: ...


class SloCollector:
    """A prometheus_client custom collector over the running SLO services."""

    def __init__(self) -> None:
        self._sources: list[SloSource] = []
        self._lock = threading.Lock()

    def add_source(self, service: SloSource) -> None:
        with self._lock:
            self._sources.append(service)

    def remove_source(self, service: SloSource) -> None:
        with self._lock:
            self._sources = [s for s in self._sources if s is not service]

    def describe(self) -> Iterator[Metric]:
        """The metric names, without querying anything (registration calls this)."""
        yield from self._families()

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            sources = list(self._sources)
        ttft, e2e, burn, budget, firing = self._families()
        for source in sources:
            self._add_histograms(source, ttft, e2e)
            self._add_slo_state(source, burn, budget, firing)
        yield from (ttft, e2e, burn, budget, firing)

    @staticmethod
    def _families() -> tuple[
        HistogramMetricFamily, HistogramMetricFamily, GaugeMetricFamily, GaugeMetricFamily, GaugeMetricFamily
    ]:
        return (
            HistogramMetricFamily(
                "latencylens_ttft_seconds",
                "Time to first token of stored requests (primary model call), by project, service and model.",
                labels=HISTOGRAM_LABELS,
            ),
            HistogramMetricFamily(
                "latencylens_e2e_seconds",
                "End-to-end latency of stored requests, by project, service and model.",
                labels=HISTOGRAM_LABELS,
            ),
            GaugeMetricFamily(
                "latencylens_slo_burn_rate",
                "Error-budget burn rate of a ratio SLO over a window, at the latest evaluation.",
                labels=("project", "slo", "window"),
            ),
            GaugeMetricFamily(
                "latencylens_slo_error_budget_remaining",
                "Share of the SLO's error budget left (1 untouched, 0 spent, negative overspent).",
                labels=("project", "slo"),
            ),
            GaugeMetricFamily(
                "latencylens_slo_alert_firing",
                "1 while the SLO has a firing alert.",
                labels=("project", "slo"),
            ),
        )

    @staticmethod
    def _add_histograms(source: SloSource, ttft: HistogramMetricFamily, e2e: HistogramMetricFamily) -> None:
        try:
            rows = histograms(source.store, BUCKET_NS)
        except StorageError as exc:
            _log.warning("latency histograms not exported: %s", exc)
            return
        for row in rows:
            labels = [row.project, row.service, row.model]
            if row.ttft_count:
                ttft.add_metric(labels, _buckets(row.ttft_buckets, row.ttft_count), row.ttft_sum_ns / 1e9)
            e2e.add_metric(labels, _buckets(row.e2e_buckets, row.e2e_count), row.e2e_sum_ns / 1e9)

    @staticmethod
    def _add_slo_state(
        source: SloSource, burn: GaugeMetricFamily, budget: GaugeMetricFamily, firing: GaugeMetricFamily
    ) -> None:
        try:
            slos = source.repository.slos(None)
            statuses = source.repository.statuses([slo.id for slo in slos])
            firing_ids = source.repository.firing_slo_ids()
        except Exception as exc:  # a metadata outage must not break the scrape
            _log.warning("SLO metrics not exported: %s", exc)
            return
        for slo in slos:
            status = statuses.get(slo.id)
            firing.add_metric([slo.project, slo.name], 1.0 if slo.id in firing_ids else 0.0)
            if status is None:
                continue
            for window, rate in status.burn_rates.items():
                burn.add_metric([slo.project, slo.name, window], rate)
            if status.budget_remaining is not None:
                budget.add_metric([slo.project, slo.name], status.budget_remaining)


def _buckets(cumulative: Sequence[int], count: int) -> list[tuple[str, float]]:
    """(le, cumulative count) pairs in the order prometheus_client expects, ending with +Inf."""
    pairs = [(repr(bound), float(value)) for bound, value in zip(BUCKET_SECONDS, cumulative, strict=True)]
    return [*pairs, ("+Inf", float(count))]


SLO_COLLECTOR: Final = SloCollector()
"""The process's collector; the ``/metrics`` route collects it for the caller's project."""
