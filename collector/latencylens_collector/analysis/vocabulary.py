"""One vocabulary for every surface: each part of a request's time and each headline number, with
its stable key, its human label, its unit and what it means.

The keys are the API's identifiers (``parts``, ``busy``, ``/api/stats``) and the ``requests``
table's column stems; they never change. The labels are what people read: the web UI, the CLI's
tables, the Grafana dashboards' legends and the glossary in ``docs/glossary.md`` all take them from
here (the UI through ``/ui/vocabulary.js``; tests check the dashboards and the glossary against
this module). Times are shown in UTC with the zone written out on every surface
(:data:`TIME_ZONE`), and the percentiles shown side by side are :data:`PERCENTILES`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from latencylens import semconv
from latencylens_collector.analysis.attribution import (
    APP_OTHER,
    COMPONENTS,
    DECODE,
    INFERENCE,
    MODEL_UNATTRIBUTED,
    NETWORK,
    PREFILL,
    QUEUE,
    RETRIEVAL,
    SERVER_OTHER,
    TOOL,
)


@dataclass(frozen=True)
class Term:
    """A named quantity: ``key`` for machines, ``label`` for people."""

    key: str
    label: str
    unit: str
    meaning: str


NS: Final = "ns"
"""Durations travel as integer nanoseconds (shown as ms or s)."""

PARTS: Final[tuple[Term, ...]] = (
    Term(RETRIEVAL, "retrieval", NS, "retrieval spans (vector search, database lookups)"),
    Term(TOOL, "tool", NS, "tool calls"),
    Term(APP_OTHER, "app, other", NS, "the application's own code between and around calls"),
    Term(
        NETWORK,
        "network",
        NS,
        "model call time the client measured beyond the server time the provider reported",
    ),
    Term(QUEUE, "queue", NS, "waiting in the provider's queue"),
    Term(PREFILL, "prefill", NS, "processing the prompt"),
    Term(
        DECODE,
        "decode",
        NS,
        "generating output tokens (reported, or measured from the first to the last chunk)",
    ),
    Term(INFERENCE, "inference", NS, "prefill + decode, not split by the provider"),
    Term(
        SERVER_OTHER,
        "server, other",
        NS,
        "provider server time outside queue and inference (validation, tokenization)",
    ),
    Term(
        MODEL_UNATTRIBUTED,
        "model, unattributed",
        NS,
        "model call time the provider's numbers do not split; without server timing, the wait for the "
        "first token",
    ),
)
"""The parts of a request's time, in display order (the order of ``COMPONENTS``)."""

APPLICATION: Final = Term(
    "application", "app", NS, "retrieval + tool + app, other: the application's side of the request"
)
"""The application parts summed (one column where a table has no room for three)."""

METRICS: Final[tuple[Term, ...]] = (
    Term("e2e_ns", "end-to-end", NS, "duration of the request's root span"),
    Term(
        "ttft_ns", "TTFT", NS, "time to first token: from the model call's start to its first content chunk"
    ),
    Term("itl_ns", "ITL", NS, "inter-token latency: (last chunk − first content) / (output tokens − 1)"),
    Term(
        "decode_tokens_per_second",
        "decode rate",
        "tok/s",
        "output tokens / decode time (the decode part); /api/stats gives its mean as "
        "output_tokens_per_second",
    ),
    Term(
        semconv.STREAM_OUTPUT_TOKENS_PER_SECOND,
        "output rate, whole call",
        "tok/s",
        "a span's output tokens / (last chunk − call start): waiting for the first token included, so "
        "below the decode rate",
    ),
    Term(
        "critical_ns",
        "critical path",
        NS,
        "the time a part or span decided the request's end (parts sum to end-to-end)",
    ),
    Term("busy_ns", "busy", NS, "exclusive time summed over all spans; parallel work counts in full"),
)
"""Headline numbers of a request."""

PERCENTILES: Final[tuple[str, ...]] = ("p50", "p95", "p99")
"""The percentiles shown side by side (UI charts, Grafana, the CLI's stats); the API also has p90."""

TIME_ZONE: Final = "UTC"
"""Every surface shows times in UTC and writes the zone out."""

PART_LABELS: Final[dict[str, str]] = {term.key: term.label for term in PARTS}
PART_MEANINGS: Final[dict[str, str]] = {term.key: term.meaning for term in PARTS}

assert tuple(term.key for term in PARTS) == COMPONENTS, "one term per component, in display order"


def label(key: str) -> str:
    """The human label of a part, the application group or a metric (the key itself if unknown)."""
    for term in (*PARTS, APPLICATION, *METRICS):
        if term.key == key:
            return term.label
    return key


def parts_description() -> str:
    """The parts for an API schema description: ``key ("label": meaning); ...``."""
    return "; ".join(f'{term.key} ("{term.label}": {term.meaning})' for term in PARTS)


def glossary_rows() -> list[tuple[str, str, str, str]]:
    """(key, label, unit, meaning) for every term: the table ``docs/glossary.md`` holds."""
    return [(term.key, term.label, term.unit, term.meaning) for term in (*PARTS, APPLICATION, *METRICS)]


def as_json() -> dict[str, object]:
    """What the web UI reads (``/ui/vocabulary.js``)."""
    return {
        "parts": [{"key": t.key, "label": t.label, "unit": t.unit, "meaning": t.meaning} for t in PARTS],
        "application": {"key": APPLICATION.key, "label": APPLICATION.label, "meaning": APPLICATION.meaning},
        "metrics": {t.key: {"label": t.label, "unit": t.unit, "meaning": t.meaning} for t in METRICS},
        "percentiles": list(PERCENTILES),
        "time_zone": TIME_ZONE,
    }
