"""The SDK in a fresh Python process: what ``import latencylens`` loads, and strict mode (set by
environment before import) re-raising internal errors."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from latencylens import _config

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


def test_strict_mode_reraises_internal_errors() -> None:
    code = textwrap.dedent(
        """
        import latencylens
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider

        trace.set_tracer_provider(TracerProvider())

        class Hostile:
            @property
            def usage(self):
                raise RuntimeError("property bug")

        @latencylens.model_call(provider="groq", model="m")
        def call():
            return Hostile()

        try:
            call()
        except RuntimeError as exc:
            print("raised:", exc)
        """
    )
    env = {**os.environ, _config.STRICT_ENV: "1"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert result.stdout.strip() == "raised: property bug"
