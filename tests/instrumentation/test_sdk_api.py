"""The public surface: what ``import latencylens`` gives and what it must not drag in."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import latencylens
from latencylens import _cli, semconv

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


def test_cli_without_the_service_says_which_extra_to_install() -> None:
    code = (
        "import sys; sys.modules['latencylens_collector'] = None; from latencylens._cli import main; main()"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == _cli.MISSING_SERVER_EXIT_CODE
    assert result.stderr.strip() == _cli.MISSING_SERVER_MESSAGE


def test_cli_runs_the_service_command_when_installed() -> None:
    code = textwrap.dedent(
        """
        import sys, types
        package = types.ModuleType("latencylens_collector")
        package.__path__ = []
        cli = types.ModuleType("latencylens_collector.cli.main")
        cli.main = lambda: print("service main ran") or 7
        sys.modules.update({"latencylens_collector": package, "latencylens_collector.cli.main": cli})
        from latencylens._cli import main
        sys.exit(main())
        """
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 7
    assert result.stdout.strip() == "service main ran"
