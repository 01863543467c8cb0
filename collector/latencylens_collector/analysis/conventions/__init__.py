"""What a span means, whichever instrumentation produced it.

The collector reads spans from our SDK and from any OpenTelemetry source. This package is the one
place that maps attribute names onto our span kinds, model-call timing and token counts, so a new
convention (another instrumentation's names, a server's own span) is taught here only:

* :mod:`.genai` — OpenTelemetry GenAI semantic conventions, current and deprecated names;
* :mod:`.openllmetry` — Traceloop's OpenLLMetry (``traceloop.span.kind``, ``llm.*``);
* :mod:`.openinference` — Arize's OpenInference (``openinference.span.kind``, ``llm.token_count.*``);
* :mod:`.openlit` — OpenLIT's own timing and usage names;
* :mod:`.logfire` — Logfire's log records, stream-end records and message templates, pydantic-ai's
  time-to-first-chunk name;
* :mod:`.vllm` — vLLM's ``llm_request`` server span; :mod:`.sglang` — SGLang's ``Req`` span, which
  reuses vLLM's latency names with other boundaries;
* :mod:`.aisdk` — Vercel's AI SDK (TypeScript): its legacy ``ai.*`` spans and the names of its own;
* :mod:`.reading` — one span's facts under our names; :mod:`.trace` — facts that need the trace.
* :mod:`.same_call` — spans of one model call counted once; :mod:`.lineage` — ancestors in one pass.

A span no convention recognises is application work (``other``), or the request when it is a root.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from latencylens import semconv
from latencylens_collector.analysis._compiled import use as _use_compiled

_use_compiled(__path__, "conventions")  # before any module of this package is imported

from latencylens_collector.analysis.conventions import (  # noqa: E402
    aisdk,
    genai,
    logfire,
    openinference,
    openlit,
    openllmetry,
    vllm,
)
from latencylens_collector.analysis.conventions.reading import (  # noqa: E402
    TOKEN_KEYS,
    canonical_attributes,
    model_name,
    model_timing,
    provider_name,
    token_counts,
    usage_estimated,
)
from latencylens_collector.analysis.conventions.trace import KIND_MODEL_SERVER, resolve_trace  # noqa: E402
from latencylens_collector.analysis.conventions.values import first_int, parse_int  # noqa: E402

KIND_OTHER: Final = "other"
KNOWN_KINDS: Final = frozenset(
    {semconv.KIND_REQUEST, semconv.KIND_MODEL, semconv.KIND_RETRIEVAL, semconv.KIND_TOOL, KIND_OTHER}
)
MODEL_OPERATIONS: Final = frozenset(
    operation for operation, kind in genai.KIND_BY_OPERATION.items() if kind == semconv.KIND_MODEL
)
"""``gen_ai.operation.name`` values that are a model call."""


def classify(attributes: Mapping[str, str], has_parent: bool) -> str:
    """Our span kind, from the most specific convention the span speaks.

    Order: our explicit ``latencylens.span.kind``; a Logfire log record, which is never a call nor
    a request (it says something about one: :mod:`.logfire`); a vLLM server span (a model call);
    OpenInference's declared kind; the GenAI operation name (with OpenLIT's extra values);
    OpenLLMetry's request type and span kind; the AI SDK's operation. Otherwise application work,
    or the request itself when it has no parent.
    """
    explicit = attributes.get(semconv.SPAN_KIND)
    if explicit in KNOWN_KINDS:
        return explicit
    if logfire.is_record(attributes):
        return KIND_OTHER
    if vllm.is_server_span(attributes):
        return semconv.KIND_MODEL
    if openinference.declares_kind(attributes):
        declared = openinference.kind(attributes)
        if declared is not None:
            return declared
    else:
        for convention in (genai, openlit, openllmetry, aisdk):
            found = convention.kind(attributes)
            if found is not None:
                return found
    return KIND_OTHER if has_parent else semconv.KIND_REQUEST


def display_name(name: str, attributes: Mapping[str, str]) -> str:
    """How a span is shown: Logfire's rendered message rather than its template, else its name."""
    return logfire.display_name(name, attributes)


__all__ = [
    "KIND_MODEL_SERVER",
    "KIND_OTHER",
    "KNOWN_KINDS",
    "MODEL_OPERATIONS",
    "TOKEN_KEYS",
    "canonical_attributes",
    "classify",
    "display_name",
    "first_int",
    "model_name",
    "model_timing",
    "parse_int",
    "provider_name",
    "resolve_trace",
    "token_counts",
    "usage_estimated",
]
