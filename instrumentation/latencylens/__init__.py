"""LatencyLens: where did the time go in this LLM request?

Decorate the app's own functions (``request``, ``model_call``, ``retrieval``, ``tool``) and call
``configure`` once; spans go over OTLP to the LatencyLens collector. Importing this package pulls in
the OpenTelemetry API only: no provider SDK, no exporter, no service. ``instrument_<sdk>()`` patches
an installed provider SDK on demand; ``instrument_httpx()`` covers OpenAI-compatible servers.
"""

from latencylens import semconv
from latencylens._config import API_KEY_ENV, configure
from latencylens._instrument import (
    Instrumentation,
    MissingDependencyError,
    instrument_anthropic,
    instrument_cerebras,
    instrument_groq,
    instrument_httpx,
    instrument_ollama,
    instrument_openai,
)
from latencylens._version import __version__
from latencylens._wrap import model_call, request, retrieval, tool
from latencylens.providers._base import Usage

__all__ = [
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
