"""Where did the time go: pure functions over plain data, no I/O.

Two steps:

1. :func:`model_call_parts` splits one model call's client-measured duration into network, queue,
   prefill, decode and model-unattributed time, using what the provider reported. A provider that
   reports prefill and decode only together (TGI's ``x-inference-time``) gets that time as its own
   part, ``inference``, and the rest of its reported server time (validation, tokenization) as
   ``server_other``: a total is never split into parts the provider did not measure.
2. :func:`attribute_request` walks a request's span tree along its **critical path**: every instant
   of the root span is given to exactly one span, the innermost one on the chain of work that
   decided when the request ended. Parallel work that finished early gets nothing, gaps where no
   child ran are the parent's own application time, and the parts sum to the end-to-end time
   exactly. The plain per-component sum of exclusive ("busy") time is kept as a second view.

Children are clipped to their parent's window, so a child that outlives its parent, or starts
before it because two services' clocks disagree, never yields negative or double-counted time.

Invariants (tests/attribution checks each):

* a model call's parts, and a request's, are non-negative integers that sum to its duration exactly;
* a part the provider reported is never larger than reported, and is cut only when the reports
  exceed the client's measured duration (the call is then flagged ``inconsistent``);
* every part says where it came from: ``reported``, ``measured`` or ``derived``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

# Components, in display order. "application" is retrieval + tool + app_other.
RETRIEVAL = "retrieval"
TOOL = "tool"
APP_OTHER = "app_other"
NETWORK = "network"
QUEUE = "queue"
PREFILL = "prefill"
DECODE = "decode"
INFERENCE = "inference"
"""Prefill + decode as one reported number, for providers that do not split them."""
SERVER_OTHER = "server_other"
"""Server time a provider reported as a total outside its queue and inference (validation,
tokenization): total − queue − inference."""
MODEL_UNATTRIBUTED = "model_unattributed"
COMPONENTS: tuple[str, ...] = (
    RETRIEVAL,
    TOOL,
    APP_OTHER,
    NETWORK,
    QUEUE,
    PREFILL,
    DECODE,
    INFERENCE,
    SERVER_OTHER,
    MODEL_UNATTRIBUTED,
)
APPLICATION_COMPONENTS: tuple[str, ...] = (RETRIEVAL, TOOL, APP_OTHER)

# Where a number came from.
REPORTED = "reported"
MEASURED = "measured"
DERIVED = "derived"

# Span kinds the walk distinguishes (values of latencylens.span.kind, plus "other").
KIND_MODEL = "model"
KIND_RETRIEVAL = "retrieval"
KIND_TOOL = "tool"
_SELF_COMPONENT = {KIND_RETRIEVAL: RETRIEVAL, KIND_TOOL: TOOL}


# The classes below, built per span, per call or per request, write their own ``__init__``: mypyc
# compiles it, while the one a dataclass generates runs as Python (see :mod:`._compiled`).


@dataclass(slots=True, init=False)
class ModelTiming:
    """What is known about one model call beyond its duration. All values integer ns or None.
    Read-only by convention, not frozen: one is built per model span of every trace, and a frozen
    dataclass costs twice as much to construct.

    ``first_content_ns`` / ``last_chunk_ns`` are offsets from the call's start (client-measured).
    ``server_total_ns`` includes queue; when only the parts are reported it is their sum.
    ``inference_ns`` is prefill + decode where the provider reports only their sum; it is used only
    when neither ``prefill_ns`` nor ``decode_ns`` is known (the finer split wins).
    """

    queue_ns: int | None
    prefill_ns: int | None
    decode_ns: int | None
    server_total_ns: int | None
    inference_ns: int | None
    first_content_ns: int | None
    last_chunk_ns: int | None

    def __init__(
        self,
        queue_ns: int | None = None,
        prefill_ns: int | None = None,
        decode_ns: int | None = None,
        server_total_ns: int | None = None,
        inference_ns: int | None = None,
        first_content_ns: int | None = None,
        last_chunk_ns: int | None = None,
    ) -> None:
        self.queue_ns = queue_ns
        self.prefill_ns = prefill_ns
        self.decode_ns = decode_ns
        self.server_total_ns = server_total_ns
        self.inference_ns = inference_ns
        self.first_content_ns = first_content_ns
        self.last_chunk_ns = last_chunk_ns


@dataclass(init=False)
class ModelCallParts:
    """One model call's duration split into parts that sum to it exactly."""

    parts: dict[str, int]
    provenance: dict[str, str]
    inconsistent: bool

    def __init__(self, parts: dict[str, int], provenance: dict[str, str], inconsistent: bool = False) -> None:
        self.parts = parts
        self.provenance = provenance
        self.inconsistent = inconsistent


@dataclass(slots=True, init=False)
class SpanNode:
    """The little a span needs for attribution. Times are absolute integer ns. Read-only by
    convention, not frozen, as :class:`ModelTiming` (one per span of every trace)."""

    span_id: str
    parent_id: str | None
    start_ns: int
    end_ns: int
    kind: str
    timing: ModelTiming | None

    def __init__(
        self,
        span_id: str,
        parent_id: str | None,
        start_ns: int,
        end_ns: int,
        kind: str = "other",
        timing: ModelTiming | None = None,
    ) -> None:
        self.span_id = span_id
        self.parent_id = parent_id
        self.start_ns = start_ns
        self.end_ns = end_ns
        self.kind = kind
        self.timing = timing


@dataclass(init=False)
class RequestBreakdown:
    """A request's end-to-end time, attributed."""

    root_span_id: str
    e2e_ns: int
    parts: dict[str, int]
    """Critical-path attribution per component; sums to ``e2e_ns`` exactly."""
    busy: dict[str, int]
    """Exclusive time per component summed over all spans; parallel work counts in full."""
    provenance: dict[str, str]
    inconsistent: bool
    span_critical_ns: dict[str, int]
    """Per span: ns of the critical path it owns (its share of the request)."""
    span_self_ns: dict[str, int]
    """Per span: its exclusive time (duration minus the union of its clipped children)."""

    def __init__(
        self,
        root_span_id: str,
        e2e_ns: int,
        parts: dict[str, int],
        busy: dict[str, int],
        provenance: dict[str, str],
        inconsistent: bool,
        span_critical_ns: dict[str, int] | None = None,
        span_self_ns: dict[str, int] | None = None,
    ) -> None:
        self.root_span_id = root_span_id
        self.e2e_ns = e2e_ns
        self.parts = parts
        self.busy = busy
        self.provenance = provenance
        self.inconsistent = inconsistent
        self.span_critical_ns = {} if span_critical_ns is None else span_critical_ns
        self.span_self_ns = {} if span_self_ns is None else span_self_ns


def model_call_parts(duration_ns: int, timing: ModelTiming | None) -> ModelCallParts:
    """Split a model call's client-measured duration using the provider's reported server time.

    With server timing: network = duration − server total (derived); the server parts as reported
    (queue, prefill, decode; or queue and inference when prefill and decode come only as their
    sum); the server time they leave uncovered (derived) is ``server_other`` beside an unsplit
    inference, where the total is known to hold the server's own work (validation, tokenization),
    and model-unattributed otherwise. A total below the sum of its parts is raised to that sum and
    the call flagged inconsistent. When the provider reports more server time than the client
    measured, network is 0, the reported parts are clipped in order (queue first), what is left of
    the duration goes to the uncovered part, and the call is flagged inconsistent: no part goes
    negative and the sum stays exact. Without server timing, a stream still gives decode as last
    chunk − first content (measured); the rest (network + queue + prefill, inseparable) is
    model-unattributed.
    """
    duration_ns = max(0, duration_ns)
    t = timing or ModelTiming()
    known = _reported_server_parts(t)
    server_total = t.server_total_ns
    if server_total is None and known:
        server_total = sum(known.values())
    if server_total is None:
        return _unreported_parts(duration_ns, t)

    remainder = SERVER_OTHER if INFERENCE in known else MODEL_UNATTRIBUTED
    provenance = {name: REPORTED for name in known}
    provenance[NETWORK] = DERIVED
    provenance[remainder] = DERIVED
    reported_sum = sum(known.values())
    inconsistent = reported_sum > server_total
    server_total = max(server_total, reported_sum)
    if server_total <= duration_ns:
        parts = dict(known)
        parts[NETWORK] = duration_ns - server_total
        parts[remainder] = server_total - reported_sum
        return ModelCallParts(_complete(parts), provenance, inconsistent=inconsistent)

    remaining = duration_ns
    parts = {NETWORK: 0}
    for name, value in known.items():
        parts[name] = min(value, remaining)
        remaining -= parts[name]
    parts[remainder] = remaining
    return ModelCallParts(_complete(parts), provenance, inconsistent=True)


def _reported_server_parts(t: ModelTiming) -> dict[str, int]:
    """The server parts the provider reported, in the order they happen, negatives read as 0.

    Prefill and decode, when either is reported, make an unsplit inference redundant."""
    reported: dict[str, int | None] = {QUEUE: t.queue_ns}
    if t.prefill_ns is not None or t.decode_ns is not None:
        reported.update({PREFILL: t.prefill_ns, DECODE: t.decode_ns})
    else:
        reported[INFERENCE] = t.inference_ns
    return {name: max(0, value) for name, value in reported.items() if value is not None}


def _unreported_parts(duration_ns: int, t: ModelTiming) -> ModelCallParts:
    if t.first_content_ns is not None and t.last_chunk_ns is not None:
        first = min(max(t.first_content_ns, 0), duration_ns)
        last = min(max(t.last_chunk_ns, first), duration_ns)
        decode = last - first
        parts = {DECODE: decode, MODEL_UNATTRIBUTED: duration_ns - decode}
        return ModelCallParts(_complete(parts), {DECODE: MEASURED, MODEL_UNATTRIBUTED: DERIVED})
    return ModelCallParts(_complete({MODEL_UNATTRIBUTED: duration_ns}), {MODEL_UNATTRIBUTED: DERIVED})


def _complete(parts: Mapping[str, int]) -> dict[str, int]:
    """Every component, in display order, 0 where ``parts`` has none."""
    complete = dict.fromkeys(COMPONENTS, 0)
    complete.update(parts)
    return complete


def scale_parts(parts: Mapping[str, int], total: int) -> dict[str, int]:
    """Scale integer parts to sum to ``total`` exactly (largest-remainder rounding).

    Used when only a slice of a model call lies on the critical path: the slice is split in the
    same proportions as the whole call.
    """
    whole = sum(parts.values())
    if whole <= 0 or total <= 0:
        return {name: 0 for name in parts}
    if whole == total:
        return dict(parts)
    scaled = {name: value * total // whole for name, value in parts.items()}
    remainders = sorted(parts, key=lambda name: (parts[name] * total) % whole, reverse=True)
    short = total - sum(scaled.values())
    for name in remainders[:short]:
        scaled[name] += 1
    return scaled


def find_root(spans: Sequence[SpanNode]) -> SpanNode | None:
    """The request's root: the longest span without a parent (None when none has arrived)."""
    roots = [span for span in spans if not span.parent_id]
    if not roots:
        return None
    return max(roots, key=lambda span: (span.end_ns - span.start_ns, -span.start_ns))


def attribute_request(spans: Sequence[SpanNode]) -> RequestBreakdown | None:
    """Attribute a request's end-to-end time (its root span) along the critical path.

    Spans whose parent is not in the set (the parent was never exported) hang under the root.
    Returns None when no root span is present yet.
    """
    root = find_root(spans)
    if root is None:
        return None
    by_id = {span.span_id: span for span in spans}
    children: dict[str, list[SpanNode]] = {}
    for span in spans:
        if span.span_id == root.span_id:
            continue
        parent = span.parent_id if span.parent_id in by_id else root.span_id
        if parent == span.span_id:
            parent = root.span_id
        children.setdefault(parent, []).append(span)

    walk = _Walk(children)
    walk.critical(root, root.start_ns, max(root.end_ns, root.start_ns))
    walk.busy_time(root)
    e2e = max(0, root.end_ns - root.start_ns)
    provenance = {name: MEASURED for name in APPLICATION_COMPONENTS}
    for name, source in walk.model_provenance.items():
        provenance.setdefault(name, source)
    return RequestBreakdown(
        root_span_id=root.span_id,
        e2e_ns=e2e,
        parts=_complete(walk.parts),
        busy=_complete(walk.busy),
        provenance=provenance,
        inconsistent=walk.inconsistent,
        span_critical_ns=walk.span_critical,
        span_self_ns=walk.span_self,
    )


class _Frame:
    """A span of the critical walk whose children are being given its window, latest first."""

    def __init__(self, span: SpanNode, lo: int, cursor: int, own: str, children: Iterator[SpanNode]) -> None:
        self.span = span
        self.lo = lo
        self.cursor = cursor
        self.own = own
        self.children = children


class _Walk:
    """State of one request's walk; kept private so the public surface stays functions."""

    def __init__(self, children: Mapping[str, list[SpanNode]]) -> None:
        self.children = children
        self.parts: dict[str, int] = {}
        self.busy: dict[str, int] = {}
        self.span_critical: dict[str, int] = {}
        self.span_self: dict[str, int] = {}
        self.model_provenance: dict[str, str] = {}
        self.inconsistent = False
        self._model_cache: dict[str, ModelCallParts] = {}
        self._seen: set[str] = set()
        self._walked: set[str] = set()

    def _model(self, span: SpanNode) -> ModelCallParts:
        cached = self._model_cache.get(span.span_id)
        if cached is None:
            cached = model_call_parts(span.end_ns - span.start_ns, span.timing)
            self._model_cache[span.span_id] = cached
            self.inconsistent |= cached.inconsistent
            for name, source in cached.provenance.items():
                self.model_provenance.setdefault(name, source)
        return cached

    def _give(self, span: SpanNode, component: str, ns: int) -> None:
        if ns <= 0:
            return
        self.parts[component] = self.parts.get(component, 0) + ns
        self.span_critical[span.span_id] = self.span_critical.get(span.span_id, 0) + ns

    def critical(self, root: SpanNode, lo: int, hi: int) -> None:
        """Give [lo, hi] of ``root``'s window to it and, where they decide the end, its children.

        Depth first with an explicit stack, so a chain of any depth is walked whole (no recursion
        limit, no depth cut), each span id once, so repeated ids cannot make it loop. A span's
        children are taken latest end first: each gets the part of its window before where the
        later ones began; the gaps are the span's own time."""
        frames: list[_Frame] = []
        self._enter(root, lo, hi, frames)
        while frames:
            frame = frames[-1]
            child = next(frame.children, None) if frame.cursor > frame.lo else None
            if child is None:
                self._give(frame.span, frame.own, frame.cursor - frame.lo)
                frames.pop()
                continue
            start = max(child.start_ns, frame.lo)
            end = min(child.end_ns, frame.cursor)
            if start >= frame.cursor or end <= start:
                continue
            self._give(frame.span, frame.own, frame.cursor - end)
            frame.cursor = start
            self._enter(child, start, end, frames)

    def _enter(self, span: SpanNode, lo: int, hi: int, frames: list[_Frame]) -> None:
        """Start ``span``'s slice [lo, hi]: a model call takes it whole, other spans get a frame."""
        if hi <= lo or span.span_id in self._walked:
            return
        self._walked.add(span.span_id)
        if span.kind == KIND_MODEL:
            # A model call is a leaf: its inside (HTTP client spans, a server's span) is already
            # summarised in its parts, and only a slice of it may lie on the path.
            parts, given = self.parts, 0
            for name, ns in scale_parts(self._model(span).parts, hi - lo).items():
                if ns > 0:
                    parts[name] = parts.get(name, 0) + ns
                    given += ns
            if given:
                self.span_critical[span.span_id] = self.span_critical.get(span.span_id, 0) + given
            return
        own = _SELF_COMPONENT.get(span.kind, APP_OTHER)
        kids = self.children.get(span.span_id)
        if not kids:  # a leaf's slice is all its own: no frame
            self._give(span, own, hi - lo)
            return
        kids = sorted(kids, key=_latest_end_first, reverse=True)
        frames.append(_Frame(span, lo, hi, own, iter(kids)))

    def busy_time(self, root: SpanNode) -> None:
        """Exclusive time of every span (children clipped to it), summed per component."""
        stack: list[tuple[SpanNode, int, int]] = [(root, root.start_ns, root.end_ns)]
        while stack:
            span, lo, hi = stack.pop()
            if span.span_id in self._seen or hi <= lo:
                continue
            self._seen.add(span.span_id)
            if span.kind == KIND_MODEL:
                busy = self.busy
                for name, ns in scale_parts(self._model(span).parts, hi - lo).items():
                    if ns:
                        busy[name] = busy.get(name, 0) + ns
                self.span_self[span.span_id] = hi - lo
                continue
            windows = []
            for child in self.children.get(span.span_id, []):
                start, end = max(child.start_ns, lo), min(child.end_ns, hi)
                if end > start:
                    windows.append((start, end))
                    stack.append((child, start, end))
            own = (hi - lo) - _union_length(windows)
            self.span_self[span.span_id] = own
            component = _SELF_COMPONENT.get(span.kind, APP_OTHER)
            self.busy[component] = self.busy.get(component, 0) + own


def _latest_end_first(span: SpanNode) -> tuple[int, int]:
    return span.end_ns, span.start_ns


def _union_length(windows: Iterable[tuple[int, int]]) -> int:
    total = 0
    current_start = current_end = None
    for start, end in sorted(windows):
        if current_end is None or start > current_end:
            if current_end is not None and current_start is not None:
                total += current_end - current_start
            current_start, current_end = start, end
        else:
            current_end = max(current_end, end)
    if current_end is not None and current_start is not None:
        total += current_end - current_start
    return total
