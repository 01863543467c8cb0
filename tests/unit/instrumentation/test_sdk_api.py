"""The public surface: what ``import latencylens`` gives and what it must not drag in."""

from __future__ import annotations

import latencylens
from latencylens import semconv


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


def test_own_attribute_names_live_under_latencylens_namespace() -> None:
    assert all(name.startswith("latencylens.") for name in semconv.ALL_OWN_ATTRIBUTES)
    assert len(set(semconv.ALL_OWN_ATTRIBUTES)) == len(semconv.ALL_OWN_ATTRIBUTES)
