"""``configure()``: settings precedence and real OTLP/HTTP export to a local receiver.

Creating or replacing the global provider happens in subprocesses, since OpenTelemetry allows one
global provider per process and this test session already has one.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider

import latencylens
from latencylens import _config
from latencylens._config import resolve_settings

Serve = Callable[..., Any]


def accept(path: str, headers: dict[str, str], body: bytes) -> tuple[int, dict[str, str], list[bytes]]:
    return 200, {"content-type": "application/x-protobuf", "content-length": "0"}, []


def exported(captured: Any) -> list[tuple[str, list[str]]]:
    """(service.name, span names) for every resource in every POST the receiver got."""
    found = []
    for request in captured.requests:
        assert request["path"] == "/v1/traces"
        assert request["headers"]["content-type"] == "application/x-protobuf"
        message = ExportTraceServiceRequest.FromString(request["body"])
        for resource_spans in message.resource_spans:
            attributes = {kv.key: kv.value.string_value for kv in resource_spans.resource.attributes}
            names = [span.name for scope in resource_spans.scope_spans for span in scope.spans]
            found.append((attributes.get("service.name", ""), names))
    return found


def run(code: str, env: dict[str, str] | None = None) -> None:
    clean = {k: v for k, v in os.environ.items() if k not in (_config.ENDPOINT_ENV, _config.API_KEY_ENV)}
    clean.pop(_config.SERVICE_NAME_ENV, None)
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env={**clean, **(env or {})},
        timeout=60,
    )
    assert result.returncode == 0, result.stderr


def test_argument_beats_environment_beats_default() -> None:
    env = {
        _config.ENDPOINT_ENV: "http://collector.env:4318/",
        _config.API_KEY_ENV: "env-key",
        _config.SERVICE_NAME_ENV: "env-service",
    }
    from_env = resolve_settings(environ=env)
    assert from_env.traces_url == "http://collector.env:4318/v1/traces"
    assert from_env.headers == {"authorization": "Bearer env-key"}
    assert from_env.service_name == "env-service"

    from_args = resolve_settings("arg-service", "http://arg:1", "arg-key", {"x-team": "a"}, environ=env)
    assert from_args.traces_url == "http://arg:1/v1/traces"
    assert from_args.headers == {"x-team": "a", "authorization": "Bearer arg-key"}
    assert from_args.service_name == "arg-service"

    defaults = resolve_settings(environ={})
    assert defaults.traces_url == "http://127.0.0.1:4318/v1/traces"
    assert defaults.headers == {}
    assert defaults.service_name is None


def test_configure_creates_a_global_provider_and_exports(serve: Serve) -> None:
    receiver = serve(accept)
    run(
        f"""
        import latencylens
        from opentelemetry import trace

        provider = latencylens.configure(service_name="checkout", endpoint={receiver.url!r}, api_key="k1")
        assert trace.get_tracer_provider() is provider
        assert latencylens.configure(service_name="checkout", endpoint={receiver.url!r}) is provider

        @latencylens.request(name="root")
        def handle():
            return 1

        handle()
        provider.force_flush()
        """
    )
    assert exported(receiver) == [("checkout", ["root"])]
    assert receiver.requests[0]["headers"]["authorization"] == "Bearer k1"


def test_configure_reads_the_environment_at_configure_time(serve: Serve) -> None:
    receiver = serve(accept)
    env = {
        _config.ENDPOINT_ENV: receiver.url,
        _config.API_KEY_ENV: "env-key",
        _config.SERVICE_NAME_ENV: "env-svc",
    }
    run(
        """
        import latencylens

        provider = latencylens.configure()

        @latencylens.tool(name="t")
        def work():
            return 1

        work()
        provider.force_flush()
        """,
        env,
    )
    assert exported(receiver) == [("env-svc", ["execute_tool t"])]
    assert receiver.requests[0]["headers"]["authorization"] == "Bearer env-key"


def test_configure_attaches_to_the_apps_global_provider_once(serve: Serve) -> None:
    receiver = serve(accept)
    run(
        f"""
        import latencylens
        from opentelemetry import trace
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider

        app_provider = TracerProvider(resource=Resource.create({{"service.name": "app-owned"}}))
        trace.set_tracer_provider(app_provider)
        assert latencylens.configure(service_name="ignored", endpoint={receiver.url!r}) is app_provider
        assert latencylens.configure(endpoint={receiver.url!r}) is app_provider

        @latencylens.retrieval(data_source="idx")
        def search():
            return []

        search()
        app_provider.force_flush()
        """
    )
    assert exported(receiver) == [("app-owned", ["retrieval idx"])]


def test_configure_with_an_explicit_provider_adds_one_processor(serve: Serve) -> None:
    receiver = serve(accept)
    provider = TracerProvider(resource=Resource.create({"service.name": "explicit"}))
    try:
        assert latencylens.configure(endpoint=receiver.url, tracer_provider=provider) is provider
        assert latencylens.configure(endpoint=receiver.url, tracer_provider=provider) is provider
        with provider.get_tracer("test").start_as_current_span("once"):
            pass
        provider.force_flush()
        assert exported(receiver) == [("explicit", ["once"])]
    finally:
        provider.shutdown()
