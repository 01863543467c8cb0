"""``configure()``: settings precedence (ours, then the standard OTLP variables), real OTLP/HTTP export
to a local receiver, and a shutdown the collector being down cannot hold up.

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

import pytest
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


OUR_VARIABLES = (
    _config.ENDPOINT_ENV,
    _config.API_KEY_ENV,
    _config.SERVICE_NAME_ENV,
    _config.SHUTDOWN_TIMEOUT_ENV,
)


def run(code: str, env: dict[str, str] | None = None) -> str:
    """Run ``code`` in a fresh interpreter with only ``env`` of the variables configure() reads."""
    clean = {
        k: v
        for k, v in os.environ.items()
        if k not in OUR_VARIABLES and not k.startswith("OTEL_EXPORTER_OTLP")
    }
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env={**clean, **(env or {})},
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


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


def test_configure_attaches_to_the_provider_behind_logfires_proxy(serve: Serve) -> None:
    """``logfire.configure()`` makes its own proxy the global provider: our spans and Logfire's go
    through the SDK provider behind it, so that is the one configure() exports from."""
    pytest.importorskip("logfire")
    receiver = serve(accept)
    run(
        f"""
        import logfire, latencylens
        from opentelemetry import trace

        logfire.configure(
            send_to_logfire=False, console=False, service_name="logfire-app", inspect_arguments=False
        )
        provider = latencylens.configure(endpoint={receiver.url!r})
        assert provider is trace.get_tracer_provider().provider

        @latencylens.retrieval(data_source="idx")
        def search():
            return []

        with logfire.span("handle"):
            search()
        provider.force_flush()
        """
    )
    [(service, names)] = exported(receiver)
    assert service == "logfire-app"
    assert sorted(names) == ["handle", "retrieval idx"]


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


def test_standard_otlp_endpoint_variables_in_specification_order() -> None:
    generic = {_config.OTLP_ENDPOINT_ENV: "http://otel-collector:4318"}
    # The generic endpoint is a base URL: /v1/traces is appended (once, trailing slash or not).
    assert resolve_settings(environ=generic).traces_url == "http://otel-collector:4318/v1/traces"
    with_path = {_config.OTLP_ENDPOINT_ENV: "https://gateway.example/otlp/"}
    assert resolve_settings(environ=with_path).traces_url == "https://gateway.example/otlp/v1/traces"
    # The traces endpoint is the full URL, used as is, and beats the generic one.
    traces = {**generic, _config.OTLP_TRACES_ENDPOINT_ENV: "http://traces.example:9999/custom/path"}
    assert resolve_settings(environ=traces).traces_url == "http://traces.example:9999/custom/path"
    # Ours beats both; the argument beats everything.
    ours = {**traces, _config.ENDPOINT_ENV: "http://latencylens:4318"}
    assert resolve_settings(environ=ours).traces_url == "http://latencylens:4318/v1/traces"
    assert resolve_settings(endpoint="http://arg:1", environ=ours).traces_url == "http://arg:1/v1/traces"


def test_standard_otlp_header_variables_in_specification_order() -> None:
    generic = {_config.OTLP_HEADERS_ENV: "x-team=generic,authorization=Bearer%20generic-key"}
    # Values are URL-decoded, names lower-cased (the OTLP exporter specification's format).
    assert resolve_settings(environ=generic).headers == {
        "x-team": "generic",
        "authorization": "Bearer generic-key",
    }
    # The traces variable replaces the generic one rather than merging with it (as the exporter does).
    traces = {**generic, _config.OTLP_TRACES_HEADERS_ENV: "x-team=traces"}
    assert resolve_settings(environ=traces).headers == {"x-team": "traces"}
    # Our key beats a standard authorization header; argument headers, then the api_key argument,
    # beat what the environment gave, name by name.
    ours = {**generic, _config.API_KEY_ENV: "env-key"}
    assert resolve_settings(environ=ours).headers == {"x-team": "generic", "authorization": "Bearer env-key"}
    from_args = resolve_settings(headers={"x-team": "arg", "authorization": "Basic zz"}, environ=ours)
    assert from_args.headers == {"x-team": "arg", "authorization": "Basic zz"}
    assert resolve_settings(api_key="arg-key", headers={"x-team": "arg"}, environ=ours).headers == {
        "x-team": "arg",
        "authorization": "Bearer arg-key",
    }


def test_configure_exports_where_the_standard_variables_say(serve: Serve) -> None:
    receiver = serve(accept)
    env = {
        _config.OTLP_ENDPOINT_ENV: receiver.url,  # base URL: spans go to {url}/v1/traces
        _config.OTLP_HEADERS_ENV: "authorization=Bearer%20otel-key,x-tenant=blue",
        _config.SERVICE_NAME_ENV: "otel-env",
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
    assert exported(receiver) == [("otel-env", ["execute_tool t"])]
    assert receiver.requests[0]["headers"]["authorization"] == "Bearer otel-key"
    assert receiver.requests[0]["headers"]["x-tenant"] == "blue"


def test_bad_shutdown_timeout_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="LATENCYLENS_SHUTDOWN_TIMEOUT='soon': expected seconds"):
        resolve_settings(environ={_config.SHUTDOWN_TIMEOUT_ENV: "soon"})
    with pytest.raises(ValueError, match="0 or more seconds"):
        resolve_settings(shutdown_timeout_s=-1, environ={})
    assert resolve_settings(environ={_config.SHUTDOWN_TIMEOUT_ENV: "0.5"}).shutdown_timeout_s == 0.5
    assert resolve_settings(environ={}).shutdown_timeout_s == _config.DEFAULT_SHUTDOWN_TIMEOUT_S


SHUTDOWN_AGAINST_A_CLOSED_PORT = """
    import socket, time
    import latencylens

    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # nothing listens there now: every export is refused and would be retried
    provider = latencylens.configure(service_name="down", endpoint=f"http://127.0.0.1:{port}")

    @latencylens.tool(name="t")
    def work():
        return 1

    work()
    began = time.perf_counter()
    provider.shutdown()
    print(time.perf_counter() - began)
"""


@pytest.mark.parametrize("env", [{}, {_config.SHUTDOWN_TIMEOUT_ENV: "0.5"}], ids=["default", "0.5 s"])
def test_shutdown_with_the_collector_down_returns_within_the_bound(env: dict[str, str]) -> None:
    # Without the bound the exporter retries for 1 + 2 + 4 s of backoff before giving up.
    assert float(run(SHUTDOWN_AGAINST_A_CLOSED_PORT, env)) < 3.0


def test_shutdown_still_exports_what_is_queued(serve: Serve) -> None:
    receiver = serve(accept)
    run(
        f"""
        import latencylens

        provider = latencylens.configure(service_name="bye", endpoint={receiver.url!r})

        @latencylens.tool(name="last")
        def work():
            return 1

        work()
        provider.shutdown()  # no force_flush: shutdown itself exports the queue
        """
    )
    assert exported(receiver) == [("bye", ["execute_tool last"])]
