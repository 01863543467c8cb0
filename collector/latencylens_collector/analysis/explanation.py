"""One request in one sentence: which component dominated its critical path, and how we know.

Pure functions over a request's critical-path parts, so the API, the CLI and tests share them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from latencylens_collector.analysis.attribution import (
    APP_OTHER,
    COMPONENTS,
    DECODE,
    DERIVED,
    INFERENCE,
    MEASURED,
    MODEL_UNATTRIBUTED,
    NETWORK,
    PREFILL,
    QUEUE,
    REPORTED,
    RETRIEVAL,
    SERVER_OTHER,
    TOOL,
)

_WHAT = {
    RETRIEVAL: "Retrieval",
    TOOL: "Tool calls",
    APP_OTHER: "The application's own work (outside retrieval, tools and model calls)",
    NETWORK: "Network and client overhead around the model call",
    QUEUE: "Waiting in the provider's queue",
    PREFILL: "Prompt processing (prefill)",
    DECODE: "Generating output tokens (decode)",
    INFERENCE: "Prefill + decode (not split by the provider)",
    SERVER_OTHER: "The provider's server time outside its queue and inference (validation, tokenization)",
    MODEL_UNATTRIBUTED: "Model time the provider did not break down",
}


@dataclass(frozen=True)
class Explanation:
    """The dominant component of a request's critical path."""

    dominant: str
    dominant_ns: int
    share: float
    """``dominant_ns / e2e_ns`` (0 when the request took no time)."""
    provenance: str
    sentence: str


def explain(
    parts: Mapping[str, int],
    provenance: Mapping[str, str],
    e2e_ns: int,
    provider: str = "",
    model: str = "",
    ttft_ns: int | None = None,
) -> Explanation:
    """The largest critical-path component (ties: the earlier in :data:`COMPONENTS`) and a sentence.

    ``ttft_ns`` (the primary call's time to first token) is named when the wait for the first token
    is what dominated: a call without server timing whose model-unattributed time is that wait, or
    any request whose TTFT is most of its end-to-end time."""
    dominant = max(COMPONENTS, key=lambda name: (parts.get(name, 0), -COMPONENTS.index(name)))
    ns = int(parts.get(dominant, 0))
    share = ns / e2e_ns if e2e_ns > 0 else 0.0
    source = provenance.get(dominant, DERIVED)
    waited = dominant == MODEL_UNATTRIBUTED and provenance.get(DECODE) == MEASURED and ttft_ns is not None
    what = (
        f"Waiting for the first token (TTFT {format_ns(ttft_ns)})"
        if waited and ttft_ns is not None
        else _WHAT[dominant]
    )
    how = (
        f"{provider or 'the provider'} reported no server timing, so the wait before the first content chunk "
        "(network, queue and prefill together) is not split"
        if waited
        else _how(dominant, source, provider, parts, provenance)
    )
    took = f"took {format_ns(ns)} of the request's {format_ns(e2e_ns)} ({share:.0%})"
    sentence = f"{what}{_on(dominant, provider, model)} {took}; {how}"
    if not waited and ttft_ns is not None and e2e_ns > 0 and ttft_ns * 2 > e2e_ns:
        sentence += f"; the first token came after {format_ns(ttft_ns)} (TTFT)"
    return Explanation(dominant, ns, share, source, sentence + ".")


def _on(component: str, provider: str, model: str) -> str:
    if component in (PREFILL, DECODE, INFERENCE, MODEL_UNATTRIBUTED) and model:
        return f" on {model}" + (f" ({provider})" if provider else "")
    if component in (QUEUE, SERVER_OTHER) and provider:
        return f" at {provider}"
    return ""


def _how(
    component: str, source: str, provider: str, parts: Mapping[str, int], provenance: Mapping[str, str]
) -> str:
    who = provider or "the provider"
    if component in (QUEUE, INFERENCE, SERVER_OTHER) and provenance.get(INFERENCE) == REPORTED:
        return _unsplit_report(who, parts, provenance)
    if component == NETWORK:
        return f"derived as the call's measured time minus the server time {who} reported"
    if component == MODEL_UNATTRIBUTED:
        return f"{who} reported no timing split for this time"
    if source == REPORTED:
        return f"as reported by {who}"
    if source == MEASURED:
        if component == DECODE:
            return "measured from the first to the last streamed chunk"
        return "measured by the application's spans"
    return "derived from the other measurements"


def _unsplit_report(who: str, parts: Mapping[str, int], provenance: Mapping[str, str]) -> str:
    """What a provider that does not split prefill from decode reported, and what its total left."""
    reported = []
    if provenance.get(QUEUE) == REPORTED:
        reported.append(f"queue {format_ns(parts.get(QUEUE, 0))}")
    reported.append(f"inference (prefill + decode, not split) {format_ns(parts.get(INFERENCE, 0))}")
    outside = "them" if len(reported) > 1 else "it"
    other = format_ns(parts.get(SERVER_OTHER, 0))
    return f"{who} reported {' and '.join(reported)}; {other} of server time outside {outside}"


def format_ns(ns: int) -> str:
    """A duration for people: ``850 ms``, ``1.25 s``, ``0.4 ms``."""
    ms = ns / 1e6
    if abs(ms) >= 1000:
        return f"{ms / 1000:.2f} s"
    if abs(ms) >= 10:
        return f"{ms:.0f} ms"
    return f"{ms:.1f} ms"
