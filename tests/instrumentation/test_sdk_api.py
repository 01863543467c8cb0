"""The public surface: what ``import latencylens`` gives and what it must not drag in."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import latencylens
from latencylens import semconv

HEAVY_MODULES = (
    "fastapi",
    "clickhouse_connect",
    "chdb",
    "latencylens_collector",
    "openai",
    "groq",
    "anthropic",
    "cerebras",
    "ollama",
    "boto3",
    "google.genai",
    "httpx",
    "httpx2",
    "opentelemetry.sdk.trace",
    "opentelemetry.exporter.otlp.proto.http",
)


def test_public_api_is_pinned() -> None:
    assert latencylens.__all__ == [
        "API_KEY_ENV",
        "Instrumentation",
        "MissingDependencyError",
        "Usage",
        "__version__",
        "configure",
        "instrument_anthropic",
        "instrument_cerebras",
        "instrument_groq",
        "instrument_httpx",
        "instrument_ollama",
        "instrument_openai",
        "model_call",
        "request",
        "retrieval",
        "semconv",
        "tool",
    ]
    for name in latencylens.__all__:
        assert getattr(latencylens, name) is not None
    assert latencylens.__version__ == "0.1.0"
    assert latencylens.semconv is semconv


def test_import_leaves_service_and_provider_sdks_unloaded() -> None:
    code = textwrap.dedent(
        f"""
        import sys
        import latencylens

        @latencylens.model_call(provider="groq", model="m")
        def call():
            return {{}}

        heavy = [name for name in {HEAVY_MODULES!r} if name in sys.modules]
        print(",".join(heavy))
        """
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "", f"imported by latencylens: {result.stdout.strip()}"


def test_own_attribute_names_live_under_latencylens_namespace() -> None:
    assert all(name.startswith("latencylens.") for name in semconv.ALL_OWN_ATTRIBUTES)
    assert len(set(semconv.ALL_OWN_ATTRIBUTES)) == len(semconv.ALL_OWN_ATTRIBUTES)
