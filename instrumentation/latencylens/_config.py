"""``configure()``: send spans to a LatencyLens collector over OTLP/HTTP.

Precedence for every setting: argument, then ``LATENCYLENS_*`` variable, then the standard
OpenTelemetry variable for traces (``OTEL_EXPORTER_OTLP_TRACES_*``), then the generic one
(``OTEL_EXPORTER_OTLP_*``), then the default; the order the OpenTelemetry specification gives, with
our own names first. The environment is read when ``configure()`` runs, never per call. The SDK and
exporter are imported here lazily so that ``import latencylens`` stays cheap.
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
SHUTDOWN_TIMEOUT_ENV = "LATENCYLENS_SHUTDOWN_TIMEOUT"
"""Seconds the app's exit may wait for the last spans to be exported (see ``_export``)."""
OTLP_TRACES_ENDPOINT_ENV = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
"""Standard: the full URL spans are POSTed to, used as is."""
OTLP_ENDPOINT_ENV = "OTEL_EXPORTER_OTLP_ENDPOINT"
"""Standard: the base URL of every signal; spans go to ``{endpoint}/v1/traces``."""
OTLP_TRACES_HEADERS_ENV = "OTEL_EXPORTER_OTLP_TRACES_HEADERS"
"""Standard: ``key=value`` pairs, comma-separated, values URL-encoded, sent with every export."""
OTLP_HEADERS_ENV = "OTEL_EXPORTER_OTLP_HEADERS"
"""Standard: the same for every signal; used when the traces variable is not set."""
SERVICE_NAME_ENV = "OTEL_SERVICE_NAME"
"""The standard OpenTelemetry variable; used only when LatencyLens creates the provider."""
STRICT_ENV = "LATENCYLENS_STRICT"
"""``1`` re-raises LatencyLens's internal errors instead of swallowing them (for test suites)."""

DEFAULT_ENDPOINT = "http://127.0.0.1:4318"
TRACES_PATH = "/v1/traces"
DEFAULT_SHUTDOWN_TIMEOUT_S = 2.0

# Providers we already export from, so a second configure() does not double every span.
_attached: weakref.WeakKeyDictionary[TracerProvider, SpanProcessor] = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class Settings:
    """Resolved configuration; built by :func:`resolve_settings`."""

    service_name: str | None
    traces_url: str
    headers: dict[str, str]
    shutdown_timeout_s: float = DEFAULT_SHUTDOWN_TIMEOUT_S


def resolve_settings(
    service_name: str | None = None,
    endpoint: str | None = None,
    api_key: str | None = None,
    headers: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
    shutdown_timeout_s: float | None = None,
) -> Settings:
    """Apply argument > ``LATENCYLENS_*`` > ``OTEL_EXPORTER_OTLP_TRACES_*`` > ``OTEL_EXPORTER_OTLP_*`` >
    default; ``environ`` is injectable for tests. Headers are merged name by name in that order."""
    env = os.environ if environ is None else environ
    return Settings(
        service_name=service_name or env.get(SERVICE_NAME_ENV) or None,
        traces_url=_traces_url(endpoint, env),
        headers=_headers(api_key, headers, env),
        shutdown_timeout_s=_shutdown_timeout(shutdown_timeout_s, env),
    )


def _traces_url(endpoint: str | None, env: Mapping[str, str]) -> str:
    """Our endpoint (argument or variable) is a base URL, unless it already ends in ``/v1/traces``;
    the standard traces endpoint is used as is; the standard generic one gets ``/v1/traces``."""
    ours = endpoint or env.get(ENDPOINT_ENV)
    if ours:
        base = ours.rstrip("/")
        return base if base.endswith(TRACES_PATH) else base + TRACES_PATH
    traces_url = env.get(OTLP_TRACES_ENDPOINT_ENV, "").strip()
    if traces_url:
        return traces_url
    base = env.get(OTLP_ENDPOINT_ENV, "").strip() or DEFAULT_ENDPOINT
    return base.rstrip("/") + TRACES_PATH


def _headers(
    api_key: str | None, headers: Mapping[str, str] | None, env: Mapping[str, str]
) -> dict[str, str]:
    from opentelemetry.util.re import parse_env_headers

    standard = env.get(OTLP_TRACES_HEADERS_ENV) or env.get(OTLP_HEADERS_ENV) or ""
    merged = dict(parse_env_headers(standard, liberal=True)) if standard else {}
    env_key = env.get(API_KEY_ENV)
    if env_key:
        merged["authorization"] = f"Bearer {env_key}"
    merged.update(headers or {})
    if api_key:
        merged["authorization"] = f"Bearer {api_key}"
    return merged


def _shutdown_timeout(argument: float | None, env: Mapping[str, str]) -> float:
    if argument is not None:
        value, source = float(argument), "shutdown_timeout_s"
    else:
        raw = env.get(SHUTDOWN_TIMEOUT_ENV, "").strip()
        if not raw:
            return DEFAULT_SHUTDOWN_TIMEOUT_S
        source = SHUTDOWN_TIMEOUT_ENV
        try:
            value = float(raw)
        except ValueError:
            raise ValueError(f"{SHUTDOWN_TIMEOUT_ENV}={raw!r}: expected seconds, e.g. 2 or 0.5") from None
    if not value >= 0:
        raise ValueError(f"{source} must be 0 or more seconds, got {value}")
    return value


def configure(
    service_name: str | None = None,
    endpoint: str | None = None,
    api_key: str | None = None,
    tracer_provider: TracerProvider | None = None,
    headers: Mapping[str, str] | None = None,
    shutdown_timeout_s: float | None = None,
) -> TracerProvider:
    """Export spans to LatencyLens in the background and return the provider doing it.

    Attaches to ``tracer_provider`` if given, else to a global SDK provider the app already has
    (also behind Logfire's proxy); only when there is none does it create one (with
    ``service.name``) and make it global.
    Calling it again for the same provider adds nothing. At shutdown, queued spans are flushed for
    at most ``shutdown_timeout_s`` seconds (default 2): a collector that is down cannot hold the
    app's exit.
    """
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider

    from latencylens._export import BoundedShutdownSpanProcessor

    settings = resolve_settings(
        service_name, endpoint, api_key, headers, shutdown_timeout_s=shutdown_timeout_s
    )
    provider = tracer_provider
    if provider is None:
        current = trace.get_tracer_provider()
        # Logfire makes its own proxy global; the SDK provider it delegates to is the app's.
        current = getattr(current, "provider", current)
        if isinstance(current, TracerProvider):
            provider = current
        else:
            attributes = {SERVICE_NAME: settings.service_name} if settings.service_name else {}
            provider = TracerProvider(resource=Resource.create(attributes))
            trace.set_tracer_provider(provider)
    if provider in _attached:
        return provider
    exporter = OTLPSpanExporter(endpoint=settings.traces_url, headers=settings.headers)
    processor = BoundedShutdownSpanProcessor(exporter, settings.shutdown_timeout_s)
    provider.add_span_processor(processor)
    _attached[provider] = processor
    return provider
