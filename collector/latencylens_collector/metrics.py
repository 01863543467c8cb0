"""The service's Prometheus metrics: one registry, exposed at ``GET /metrics``.

Each part of the service defines its own metrics here or registers a collector on
:data:`REGISTRY`, so one scrape shows ingest health and SLO state together.
"""

from __future__ import annotations

from fastapi import APIRouter, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

REGISTRY = CollectorRegistry(auto_describe=True)
"""The service's registry (not the process-global default, so tests can build several apps)."""

router = APIRouter(tags=["health"])


@router.get(
    "/metrics",
    summary="Prometheus metrics",
    description="Prometheus text exposition of the service's metrics.",
    response_class=Response,
)
def metrics() -> Response:
    return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)
