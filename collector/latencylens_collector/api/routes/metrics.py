"""``GET /metrics``: the collector's health for anyone, each project's latency for its own key.

Two kinds of metrics, served apart:

- *process health* (:mod:`latencylens_collector.runtime.metrics`): spans received, refused,
  spooled, queue and spool depth; labelled with fixed words only, no project or user-chosen name;
- *project data* (:mod:`latencylens_collector.slo.exposition`): TTFT and end-to-end histograms by
  service and model, SLO burn rates, budgets and alerts by SLO name.

Without API keys (local mode, one project) a scrape gets both. With keys, a scrape without a key
gets process health, and a scrape with a project's key gets that project's data and nothing of
any other project. Project data is bounded whoever asks (:mod:`latencylens_collector.runtime.
series`): ``metrics_top_series`` label sets per project and family, the rest as ``other``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Final

from fastapi import APIRouter, HTTPException, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import Metric

from latencylens_collector.api.deps import app_key_store
from latencylens_collector.auth import presented_key
from latencylens_collector.runtime import series
from latencylens_collector.runtime.metrics import REGISTRY
from latencylens_collector.settings import Settings
from latencylens_collector.slo.exposition import SLO_COLLECTOR

router = APIRouter(tags=["health"])

PROJECT_RULES: Final = {
    "latencylens_ttft_seconds": series.Rule(("service", "model")),
    "latencylens_e2e_seconds": series.Rule(("service", "model")),
    "latencylens_slo_burn_rate": series.Rule(("slo",), max, highest_first=True),
    "latencylens_slo_error_budget_remaining": series.Rule(("slo",), min, highest_first=False),
    "latencylens_slo_alert_firing": series.Rule(("slo",), max, highest_first=True),
}
"""How each family of project data is bounded: histograms keep the busiest (service, model) pairs,
SLO gauges the highest burn rates, the lowest budgets and the firing alerts; the rest is ``other``."""


@router.get(
    "/metrics",
    summary="Prometheus metrics",
    description="Prometheus text exposition. Without API keys: process health and every project's "
    "latency histograms and SLO state. With keys: process health without a key; with a project's "
    "key, that project's histograms and SLO state only. Per project at most `metrics_top_series` "
    "label sets per family, the rest summed up as `other`.",
    response_class=Response,
    responses={401: {"description": "The API key presented is invalid or revoked."}},
)
def metrics(request: Request) -> Response:
    settings: Settings = request.app.state.settings
    keys = app_key_store(request.app)
    headers = request.headers
    raw_key = presented_key(headers.get("authorization"), headers.get("x-api-key"))
    if not keys.enabled():
        body = generate_latest(REGISTRY) + _exposition(project_data(None, settings.metrics_top_series))
    elif raw_key is None:
        body = generate_latest(REGISTRY)
    else:
        project = keys.authenticate(raw_key)
        if project is None:
            raise HTTPException(401, "invalid or revoked API key", headers={"WWW-Authenticate": "Bearer"})
        body = _exposition(project_data(project, settings.metrics_top_series))
    return Response(body, media_type=CONTENT_TYPE_LATEST)


def project_data(project: str | None, top: int) -> list[Metric]:
    """Latency histograms and SLO state, of one project (None: all), bounded."""
    families: list[Metric] = list(SLO_COLLECTOR.collect())
    if project is not None:
        families = series.for_project(families, project)
    return series.bounded(families, PROJECT_RULES, top)


class _Families:
    """Families already computed, in the shape a registry collects from."""

    def __init__(self, families: Iterable[Metric]) -> None:
        self._families = list(families)

    def collect(self) -> Iterator[Metric]:
        return iter(self._families)


def _exposition(families: Iterable[Metric]) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Families(families))
    return generate_latest(registry)
