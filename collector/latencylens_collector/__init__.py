"""LatencyLens service: OTLP collector, ClickHouse storage, attribution and the query API."""

__version__ = "0.1.0"
