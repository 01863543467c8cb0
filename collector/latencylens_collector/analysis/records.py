"""Row shapes of the two tables, shared by the decoder, the store and the ingest step.

The per-component column names are generated from :data:`attribution.COMPONENTS`, so adding a
component needs a migration and nothing else here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

from latencylens_collector.analysis.attribution import COMPONENTS

DEFAULT_PROJECT: Final = "default"
NO_PARENT: Final = bytes(8)
"""``parent_span_id`` of a span without a parent."""

STATUS_UNSET: Final = 0
STATUS_OK: Final = 1
STATUS_ERROR: Final = 2
STATUS_NAMES: Final = {STATUS_UNSET: "unset", STATUS_OK: "ok", STATUS_ERROR: "error"}


class SpanEvent(NamedTuple):
    """One span event: its name, when it happened (integer ns since the epoch) and its attributes."""

    name: str
    time_ns: int
    attributes: dict[str, str]


@dataclass(slots=True, init=False)
class SpanRow:
    """One row of ``spans``. Ids are raw bytes; times are integer ns since the epoch.

    ``events`` may be given as a list of ``(name, time_ns, attributes)`` triples (a spool file or a
    query returns lists): it is kept as a tuple of :class:`SpanEvent`.

    Read-only by convention (:func:`dataclasses.replace` makes a changed copy), not frozen: a row
    is built for every span decoded or read back, and a frozen one costs 3.6 times as much to
    construct (≈ 2.0 µs against 0.55). Its own ``__init__``, which mypyc compiles (see
    :mod:`._compiled`), rather than the dataclass's."""

    trace_id: bytes
    span_id: bytes
    parent_span_id: bytes
    service: str
    name: str
    span_kind: str
    kind: str
    start_ns: int
    duration_ns: int
    status_code: int
    status_message: str
    attributes: dict[str, str]
    resource_attributes: dict[str, str]
    project: str
    events: tuple[SpanEvent, ...]
    dropped_events_count: int
    """Events the sender dropped (OTLP ``dropped_events_count``; SDKs keep the latest events)."""

    def __init__(
        self,
        trace_id: bytes,
        span_id: bytes,
        parent_span_id: bytes,
        service: str,
        name: str,
        span_kind: str,
        kind: str,
        start_ns: int,
        duration_ns: int,
        status_code: int = STATUS_UNSET,
        status_message: str = "",
        attributes: dict[str, str] | None = None,
        resource_attributes: dict[str, str] | None = None,
        project: str = DEFAULT_PROJECT,
        events: Sequence[Sequence[Any]] = (),
        dropped_events_count: int = 0,
    ) -> None:
        self.trace_id = trace_id
        self.span_id = span_id
        self.parent_span_id = parent_span_id
        self.service = service
        self.name = name
        self.span_kind = span_kind
        self.kind = kind
        self.start_ns = start_ns
        self.duration_ns = duration_ns
        self.status_code = status_code
        self.status_message = status_message
        self.attributes = {} if attributes is None else attributes
        self.resource_attributes = {} if resource_attributes is None else resource_attributes
        self.project = project
        # A list from a spool file or a query: one check per row.
        self.events = events if type(events) is tuple else tuple(SpanEvent(*event) for event in events)
        self.dropped_events_count = dropped_events_count

    def __reduce__(self) -> tuple[type[SpanRow], tuple[Any, ...]]:
        """Pickled as its constructor's arguments (to the row processes): a compiled class has no
        other way back."""
        return (
            SpanRow,
            (
                self.trace_id,
                self.span_id,
                self.parent_span_id,
                self.service,
                self.name,
                self.span_kind,
                self.kind,
                self.start_ns,
                self.duration_ns,
                self.status_code,
                self.status_message,
                self.attributes,
                self.resource_attributes,
                self.project,
                self.events,
                self.dropped_events_count,
            ),
        )

    @property
    def end_ns(self) -> int:
        return self.start_ns + self.duration_ns

    @property
    def has_parent(self) -> bool:
        return self.parent_span_id != NO_PARENT


SPAN_COLUMNS: Final = (
    "project",
    "trace_id",
    "span_id",
    "parent_span_id",
    "service",
    "name",
    "span_kind",
    "kind",
    "start_time",
    "duration_ns",
    "status_code",
    "status_message",
    "attributes",
    "resource_attributes",
    "events",
    "dropped_events_count",
)


PART_COLUMNS: Final = tuple(f"{name}_ns" for name in COMPONENTS)
"""Critical-path attribution, one column per component."""
BUSY_COLUMNS: Final = tuple(f"busy_{name}_ns" for name in COMPONENTS)
"""Busy (exclusive-time) view, one column per component."""

REQUEST_DIMENSIONS: Final = {"service": "service", "route": "name", "model": "model", "provider": "provider"}
"""A request's dimensions (API field → ``requests`` column): what queries filter and group by and
what the hourly rollup keeps."""

REQUEST_COLUMNS: Final = (
    "project",
    "trace_id",
    "start_time",
    "e2e_ns",
    "service",
    "name",
    "model",
    "provider",
    "status_error",
    *PART_COLUMNS,
    *BUSY_COLUMNS,
    "provenance",
    "inconsistent",
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "tokens_estimated",
    "ttft_ns",
    "itl_ns",
    "decode_tokens_per_second",
    "cost_nano_usd",
    "price_version",
    "model_calls",
    "span_count",
    "computed_at",
    "version",
    "is_deleted",
    "root_missing",
)
"""Columns of ``requests``; a request row is a dict with exactly these keys. ``version`` orders a
trace's computations by what they saw, ``computed_at`` is the latest insert stamp (store clock)
of the spans a row was computed from, ``is_deleted`` marks a tombstone, ``root_missing`` a row
rooted at its top-most received span (see :mod:`latencylens_collector.analysis.request_rows`).
``cost_nano_usd`` is what the request's model calls cost (None: some call has no price) and
``price_version`` the prices used (:mod:`latencylens_collector.analysis.costs`)."""
