"""Service-level objectives on request latency: definitions, evaluation, alerts, notifications.

Layout: ``definitions`` (what an SLO says), ``burn`` and ``lifecycle`` (pure arithmetic and alert
states), ``measure`` (ClickHouse reads), ``models``/``repository``/``db`` + ``migrations``
(metadata database via SQLAlchemy and Alembic), ``evaluator``, ``notifier``, ``scheduler``,
``exposition`` (Prometheus), ``service`` (wiring into the collector), ``views`` (API shapes).
"""

from latencylens_collector.slo.definitions import (
    PercentileObjective,
    RatioObjective,
    SloDefinition,
    SloFilter,
)

__all__ = ["PercentileObjective", "RatioObjective", "SloDefinition", "SloFilter"]
