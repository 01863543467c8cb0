"""LatencyLens: where did the time go in this LLM request?

Decorate the app's own functions (``request``, ``model_call``, ``retrieval``, ``tool``) and call
``configure`` once; spans go over OTLP to the LatencyLens collector. Importing this package pulls in
the OpenTelemetry API only: no provider SDK, no exporter, no service.
"""

from latencylens import semconv
from latencylens._config import configure
from latencylens._version import __version__
from latencylens._wrap import model_call, request, retrieval, tool
from latencylens.providers._base import Usage

__all__ = [
    "Usage",
    "__version__",
    "configure",
    "model_call",
    "request",
    "retrieval",
    "semconv",
    "tool",
]
