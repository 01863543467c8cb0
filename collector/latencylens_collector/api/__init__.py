"""HTTP API: OTLP/HTTP trace intake and the request query API."""

from latencylens_collector.api.app import create_app

__all__ = ["create_app"]
