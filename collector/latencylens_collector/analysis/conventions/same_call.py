"""When two model spans describe one call, and how they are counted once.

Several instrumentations can see the same call: ours around the SDK, the SDK's own span (anthropic),
OpenLLMetry or OpenInference beside ours, a framework's span (LangChain, LlamaIndex, pydantic-ai)
around a provider's. Two client model spans describe **the same call** when

1. one is the nearest model span above the other, only application work (HTTP client spans,
   spans no convention recognises) lies between them, and their operations agree
   (``gen_ai.operation.name``, or OpenLLMetry's ``llm.request.type``; a span that names none, such
   as OpenInference's ``LLM`` span, agrees with any) — provided the outer one wraps exactly one
   call: a model span around **several** calls (an agent loop, a retrying framework) is not a
   model call but application work around them (:data:`KIND_MODEL_WRAPPER`); or
2. they carry the same ``gen_ai.response.id`` and their times overlap.

The relation is transitive, so each call is a group of spans. One span of the group, the
**owner**, counts the call: ours (the span our SDK wrote, with ``latencylens.span.kind``) when
present, since it holds the provider's timing, else the longest. The owner takes each field it
lacks from the others (tokens, model, provider, response id, provider timing, and the stream's
first and last chunk shifted onto its own start) and nothing is ever summed. The others become
:data:`KIND_SAME_CALL` and are marked :data:`~latencylens.semconv.SAME_CALL_AS`; for attribution
they are hung below the owner, and the owner takes the place of the outermost span of its chain,
so a span of the same call owns no time even where it ends before the owner does (OpenLLMetry ends
its span at once when ours wraps the stream it would measure). Time a framework span spends
before or after the owner is then its parent's application time.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from latencylens import semconv
from latencylens_collector.analysis.conventions import openllmetry, vllm
from latencylens_collector.analysis.conventions.lineage import Lineage
from latencylens_collector.analysis.conventions.reading import canonical_attributes, usage_estimated
from latencylens_collector.analysis.conventions.values import parse_int
from latencylens_collector.analysis.records import SpanRow

KIND_SAME_CALL: Final = "same_call"
"""In-memory kind of a span describing a call another span counts (see :data:`SAME_CALL_AS`)."""
KIND_MODEL_WRAPPER: Final = "model_wrapper"
"""In-memory kind of a model span around several model calls: application work around them."""

_WORK_KINDS: Final = frozenset(
    {semconv.KIND_MODEL, semconv.KIND_RETRIEVAL, semconv.KIND_TOOL, semconv.KIND_REQUEST, KIND_MODEL_WRAPPER}
)
_OPERATION_BY_REQUEST_TYPE: Final[Mapping[str, str]] = {
    "chat": semconv.OPERATION_CHAT,
    "completion": semconv.OPERATION_TEXT_COMPLETION,
}
_FILLED_KEYS: Final = (
    semconv.GEN_AI_USAGE_INPUT_TOKENS,
    semconv.GEN_AI_USAGE_OUTPUT_TOKENS,
    semconv.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
    semconv.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS,
    semconv.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS,
    semconv.GEN_AI_RESPONSE_MODEL,
    semconv.GEN_AI_PROVIDER_NAME,
    semconv.GEN_AI_RESPONSE_ID,
)
"""Facts about the call itself: whichever span has them, they are the same numbers."""
_TOKEN_KEYS: Final = frozenset(key for key in _FILLED_KEYS if key.startswith("gen_ai.usage."))
_PROVIDER_TIMING_KEYS: Final = (
    semconv.PROVIDER_QUEUE_NS,
    semconv.PROVIDER_PREFILL_NS,
    semconv.PROVIDER_DECODE_NS,
    semconv.PROVIDER_INFERENCE_NS,
    semconv.PROVIDER_SERVER_TOTAL_NS,
)
_PROVIDER_TIMING_SET: Final = (
    *_PROVIDER_TIMING_KEYS,
    semconv.PROVENANCE_QUEUE,
    semconv.PROVENANCE_PREFILL,
    semconv.PROVENANCE_DECODE,
    semconv.PROVENANCE_INFERENCE,
    semconv.PROVENANCE_SERVER_TOTAL,
)
"""Taken together from one span, never mixed: they are one provider report."""


def is_client_call(row: SpanRow) -> bool:
    """A model call seen by a client (not a server's own span of it)."""
    return row.kind == semconv.KIND_MODEL and not vllm.is_server_span(row.attributes)


def is_application_work(row: SpanRow) -> bool:
    """A span that may stand between a model call and a span of the same call inside it."""
    return row.kind not in _WORK_KINDS


def operation(attributes: Mapping[str, str]) -> str | None:
    """The model operation a span names (``chat``, ``text_completion``, ...), or None."""
    named = attributes.get(semconv.GEN_AI_OPERATION_NAME)
    if named:
        return named
    return _OPERATION_BY_REQUEST_TYPE.get(attributes.get(openllmetry.LLM_REQUEST_TYPE, ""))


def same_operation(outer: Mapping[str, str], inner: Mapping[str, str]) -> bool:
    """Whether two spans' operations agree (one that names none agrees with any)."""
    first, second = operation(outer), operation(inner)
    return first is None or second is None or first == second


def is_ours(row: SpanRow) -> bool:
    """Whether our SDK wrote the span: it always names the span's kind. Other ``latencylens.*``
    names say nothing here, since the collector adds some to any span (dropped content sizes)."""
    return semconv.SPAN_KIND in row.attributes


class SameCalls:
    """The result of :func:`find_same_calls` for one trace."""

    def __init__(self, wrapped: dict[bytes, int]) -> None:
        self.owner_of: dict[bytes, bytes] = {}
        """Span id → the id of the span that counts its call (owners themselves are absent)."""
        self.members: dict[bytes, list[SpanRow]] = {}
        """Owner id → the other spans of its call, most trusted first."""
        self.wrapped = wrapped
        """Id of a model span around several calls → how many calls it wraps."""
        self.parents: dict[bytes, bytes] = {}
        """Span id → the parent attribution should see (owners lifted, same-call spans below them)."""

    def owner(self, span_id: bytes) -> bytes:
        return self.owner_of.get(span_id, span_id)


def find_same_calls(lineage: Lineage) -> SameCalls:
    """Group the client model calls of one trace by the call they describe (linear in spans)."""
    by_id = lineage.by_id
    ordered = [span_id for span_id in lineage.order if is_client_call(by_id[span_id])]
    reached = set(ordered)
    ordered += [row.span_id for row in by_id.values() if row.span_id not in reached and is_client_call(row)]
    nested: dict[bytes, list[bytes]] = {}
    for span_id in ordered:
        outer = lineage.chain_call(span_id)
        if outer is not None and same_operation(by_id[outer].attributes, by_id[span_id].attributes):
            nested.setdefault(outer, []).append(span_id)

    calls_inside: dict[bytes, int] = {}
    for span_id in reversed(ordered):  # inner spans first
        calls_inside[span_id] = _distinct_calls(nested.get(span_id, []), calls_inside, by_id)
    found = SameCalls(wrapped={span_id: n for span_id, n in calls_inside.items() if n > 1})

    groups = _UnionFind()
    for outer, inner in nested.items():
        if outer not in found.wrapped:
            for span_id in inner:
                groups.union(span_id, outer)
    _join_by_response_id([by_id[s] for s in ordered if s not in found.wrapped], groups)

    for members in groups.groups():
        _settle(found, [by_id[span_id] for span_id in members], lineage, groups)
    return found


def _distinct_calls(
    inner: Sequence[bytes], calls_inside: Mapping[bytes, int], by_id: Mapping[bytes, SpanRow]
) -> int:
    """How many calls a span stands for: 1 alone, else the calls below it (one per response id)."""
    if not inner:
        return 1
    total = 0
    by_response: dict[str, int] = {}
    for span_id in inner:
        response = by_id[span_id].attributes.get(semconv.GEN_AI_RESPONSE_ID)
        if response:
            by_response[response] = max(by_response.get(response, 0), calls_inside[span_id])
        else:
            total += calls_inside[span_id]
    return total + sum(by_response.values())


def _join_by_response_id(calls: Iterable[SpanRow], groups: _UnionFind) -> None:
    """Join spans with the same response id whose times overlap (a replayed answer is another call)."""
    by_response: dict[str, list[SpanRow]] = {}
    for row in calls:
        response = row.attributes.get(semconv.GEN_AI_RESPONSE_ID)
        if response:
            by_response.setdefault(response, []).append(row)
    for rows in by_response.values():
        if len(rows) < 2:
            continue
        rows.sort(key=lambda row: (row.start_ns, row.span_id))
        anchor, end = rows[0], rows[0].end_ns
        for row in rows[1:]:
            if row.start_ns <= end:
                groups.union(row.span_id, anchor.span_id)
                end = max(end, row.end_ns)
            else:
                anchor, end = row, row.end_ns


def _trust(row: SpanRow) -> tuple[bool, int, int, bytes]:
    """Ours first, then the span that covers most of the call."""
    return is_ours(row), row.duration_ns, -row.start_ns, row.span_id


def _settle(found: SameCalls, rows: list[SpanRow], lineage: Lineage, groups: _UnionFind) -> None:
    """Choose the owner of one call's spans and where each of them goes."""
    rows.sort(key=_trust, reverse=True)
    owner, others = rows[0], rows[1:]
    found.members[owner.span_id] = others
    group = groups.find(owner.span_id)
    for row in others:
        found.owner_of[row.span_id] = owner.span_id

    def in_group(span_id: bytes | None) -> bool:
        return span_id is not None and groups.find(span_id) == group

    top = owner
    above = lineage.chain_call(owner.span_id)
    while above is not None and in_group(above):
        top = lineage.by_id[above]
        above = lineage.chain_call(above)
    if top is not owner and top.has_parent:
        found.parents[owner.span_id] = top.parent_span_id
        found.parents[top.span_id] = owner.span_id
    for row in others:
        if row is top or in_group(lineage.chain_call(row.span_id)) or not row.has_parent:
            continue
        if not lineage.is_ancestor(row.span_id, owner.span_id):
            found.parents[row.span_id] = owner.span_id


def merged_attributes(
    owner: SpanRow, attributes: Mapping[str, str], others: Sequence[SpanRow]
) -> dict[str, str]:
    """The owner's (canonical) attributes with each field it lacks taken from the other spans.

    Tokens, model, provider and response id come from the most trusted span that has them (token
    counts that span only estimated stay marked estimated); the provider's timing comes whole from
    one span; a stream's first and last chunk, which are offsets from a span's start, are moved
    onto the owner's start and kept within its duration."""
    merged = dict(attributes)
    for other in others:
        theirs = canonical_attributes(other.attributes, other.duration_ns)
        estimated = usage_estimated(theirs)
        for key in _FILLED_KEYS:
            if key not in merged and theirs.get(key):
                merged[key] = theirs[key]
                if estimated and key in _TOKEN_KEYS:
                    merged[semconv.PROVENANCE_USAGE] = semconv.SOURCE_ESTIMATED
        if not any(key in merged for key in _PROVIDER_TIMING_KEYS) and any(
            key in theirs for key in _PROVIDER_TIMING_KEYS
        ):
            merged.update({key: theirs[key] for key in _PROVIDER_TIMING_SET if key in theirs})
        if semconv.STREAM_FIRST_CONTENT_NS not in merged:
            merged.update(_shifted_stream(theirs, other.start_ns - owner.start_ns, owner.duration_ns))
    return merged


def _shifted_stream(attributes: Mapping[str, str], shift_ns: int, duration_ns: int) -> dict[str, str]:
    """First and last chunk offsets of another span, as offsets from the owner's start."""
    first = parse_int(attributes.get(semconv.STREAM_FIRST_CONTENT_NS))
    if first is None or not 0 <= first + shift_ns <= duration_ns:
        return {}
    first += shift_ns
    shifted = {semconv.STREAM_FIRST_CONTENT_NS: str(first)}
    last = parse_int(attributes.get(semconv.STREAM_LAST_CHUNK_NS))
    if last is not None:
        shifted[semconv.STREAM_LAST_CHUNK_NS] = str(min(max(last + shift_ns, first), duration_ns))
    return shifted


MARKS: Final[tuple[str, ...]] = (semconv.SAME_CALL_AS, semconv.WRAPS_MODEL_CALLS)
"""Attributes :func:`~.trace.resolve_trace` derives to say how a span's call was counted."""


def same_call_marks(resolved: Iterable[SpanRow]) -> dict[bytes, dict[str, str]]:
    """Per span id, the marks resolution gave it (shown in the span tree; never stored, since a
    late span can change them)."""
    marks: dict[bytes, dict[str, str]] = {}
    for row in resolved:
        found = {key: row.attributes[key] for key in MARKS if key in row.attributes}
        if found:
            marks[row.span_id] = found
    return marks


class _UnionFind:
    """Disjoint sets of span ids (path halving, so long chains stay cheap)."""

    def __init__(self) -> None:
        self._parent: dict[bytes, bytes] = {}

    def find(self, item: bytes) -> bytes:
        parent = self._parent
        parent.setdefault(item, item)
        while parent[item] != item:
            parent[item] = parent[parent[item]]
            item = parent[item]
        return item

    def union(self, first: bytes, second: bytes) -> None:
        a, b = self.find(first), self.find(second)
        if a != b:
            self._parent[a] = b

    def groups(self) -> list[list[bytes]]:
        """Sets of two or more ids."""
        sets: dict[bytes, list[bytes]] = {}
        for item in list(self._parent):
            sets.setdefault(self.find(item), []).append(item)
        return [members for members in sets.values() if len(members) > 1]
