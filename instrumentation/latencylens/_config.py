"""``configure()``: send spans to a LatencyLens collector over OTLP/HTTP.

Precedence for every setting: argument, then environment variable, then default. The environment is
read when ``configure()`` runs, never per call. The SDK and exporter are imported here lazily so that
``import latencylens`` stays cheap.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import SpanProcessor, TracerProvider

ENDPOINT_ENV = "LATENCYLENS_ENDPOINT"
"""Base URL of the collector's OTLP/HTTP receiver; spans are POSTed to ``{endpoint}/v1/traces``."""
API_KEY_ENV = "LATENCYLENS_API_KEY"
"""Sent as ``authorization: Bearer <key>``."""
SERVICE_NAME_ENV = "OTEL_SERVICE_NAME"
"""The standard OpenTelemetry variable; used only when LatencyLens creates the provider."""
STRICT_ENV = "LATENCYLENS_STRICT"
"""``1`` re-raises LatencyLens's internal errors instead of swallowing them (for test suites)."""

DEFAULT_ENDPOINT = "http://127.0.0.1:4318"
TRACES_PATH = "/v1/traces"

# Providers we already export from, so a second configure() does not double every span.
_attached: weakref.WeakKeyDictionary[TracerProvider, SpanProcessor] = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class Settings:
    """Resolved configuration; built by :func:`resolve_settings`."""

    service_name: str | None
    traces_url: str
    headers: dict[str, str]


def resolve_settings(
    service_name: str | None = None,
    endpoint: str | None = None,
    api_key: str | None = None,
    headers: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Settings:
    """Apply argument > environment > default; ``environ`` is injectable for tests."""
    env = os.environ if environ is None else environ
    base = (endpoint or env.get(ENDPOINT_ENV) or DEFAULT_ENDPOINT).rstrip("/")
    key = api_key or env.get(API_KEY_ENV)
    merged = dict(headers or {})
    if key:
        merged["authorization"] = f"Bearer {key}"
    return Settings(
        service_name=service_name or env.get(SERVICE_NAME_ENV) or None,
        traces_url=base if base.endswith(TRACES_PATH) else base + TRACES_PATH,
        headers=merged,
    )


def configure(
    service_name: str | None = None,
    endpoint: str | None = None,
    api_key: str | None = None,
    tracer_provider: TracerProvider | None = None,
    headers: Mapping[str, str] | None = None,
) -> TracerProvider:
    """Export spans to LatencyLens in the background and return the provider doing it.

    Attaches to ``tracer_provider`` if given, else to a global SDK provider the app already has;
    only when there is none does it create one (with ``service.name``) and make it global.
    Calling it again for the same provider adds nothing.
    """
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    settings = resolve_settings(service_name, endpoint, api_key, headers)
    provider = tracer_provider
    if provider is None:
        current = trace.get_tracer_provider()
        if isinstance(current, TracerProvider):
            provider = current
        else:
            attributes = {SERVICE_NAME: settings.service_name} if settings.service_name else {}
            provider = TracerProvider(resource=Resource.create(attributes))
            trace.set_tracer_provider(provider)
    if provider in _attached:
        return provider
    exporter = OTLPSpanExporter(endpoint=settings.traces_url, headers=settings.headers)
    processor = BatchSpanProcessor(exporter)
    provider.add_span_processor(processor)
    _attached[provider] = processor
    return provider
