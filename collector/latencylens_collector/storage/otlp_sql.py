"""OTLP/protobuf export bodies decoded and flattened by ClickHouse into ``spans`` rows.

The engine ingest path (``ingest_path = engine``) sends export bodies as they arrived, many per
INSERT, in ClickHouse's length-delimited ``Protobuf`` format, into ``otlp_landing`` (a ``Null``
table). Views cascade from it:

    otlp_landing ──otlp_flat_mv──▶ otlp_flat (Null: one row per span, ``plain`` flag)
                                     ├──otlp_spans_mv────▶ spans           (plain spans only)
                                     └──otlp_verdicts_mv─▶ otlp_verdicts   (per body: spans, traces)

Two such sets, one for bodies without span events and one whose SQL also stores events (which
costs every INSERT more planning, so only bodies that need it take it: :func:`has_span_events`).

The SQL computes the same row as :func:`latencylens_collector.intake.otlp.span_row` for each span
it calls **plain**: valid ids and times, every string valid UTF-8, every value within the size
limits, attribute values of the kinds mapped here (scalars; arrays of strings, integers and
booleans whose strings need no JSON escaping; doubles written the same by both), no duplicate keys,
keys in printable ASCII, within the per-span budget, and (in the set with events) events
without attributes, at most 128, names within the limit; their stream times are read by the
Python path's rules (:func:`latencylens_collector.analysis.conventions.events.stream_attributes`).
Content is dropped (or checked against its limit, when stored) and the span classified here,
from the same tables the Python path reads (:mod:`latencylens_collector.analysis.conventions`),
so both paths store one row. A span that is not plain is not stored by the engine: its body
takes the Python path, which answers the sender precisely (rejections, repairs) and stores the
body's rows (the plain ones again, identical, so they collapse in the ReplacingMergeTree).

Each body carries what the SQL needs beside it, appended to the message as fields the OTLP schema
does not use (:func:`envelope`; a receiver only admits bodies whose top level is OTLP's field 1,
so a sender cannot set them): its project, batch id and position, the collector's clock and the
limits. The views therefore hold no setting, and the schema is passed inline
(``format_schema_source = 'string'``), so a ClickHouse server needs no ``format_schema_path``;
the embedded engine reads it from a file in the data directory (:func:`insert_settings`).
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError, Message

from latencylens import semconv
from latencylens_collector.analysis.conventions import (
    KIND_OTHER,
    KNOWN_KINDS,
    aisdk,
    events,
    genai,
    logfire,
    openinference,
    openlit,
    openllmetry,
    vllm,
)
from latencylens_collector.analysis.conventions.content import (
    CONTENT_KEYS,
    DROPPED_ATTRIBUTES,
    DROPPED_BYTES,
    INDEXED_PATTERN,
)

LANDING: Final = "otlp_landing"
FLAT: Final = "otlp_flat"
VERDICTS: Final = "otlp_verdicts"
FUTURE_LIMIT_NS: Final = 24 * 3600 * 1_000_000_000
"""As :data:`latencylens_collector.intake.otlp.FUTURE_LIMIT_NS` (a lower layer cannot import it)."""
MAX_EVENTS_PER_SPAN: Final = 128
"""As :data:`latencylens_collector.intake.otlp.MAX_EVENTS_PER_SPAN`: a span with more takes the
Python path (which drops the surplus and says so in its answer)."""
UNKNOWN_SERVICE: Final = "unknown_service"
MAX_RESOURCE_BYTES: Final = 64 * 1024

# --- the reduced schema: official field numbers, only what is read -------------------------------
_VALUE_ONEOF: Final = """
    oneof value { string string_value = 1; bool bool_value = 2; int64 int_value = 3;
                  double double_value = 4; ArrayValue array_value = 5; KeyValueList kvlist_value = 6;
                  bytes bytes_value = 7; }"""
_PROTO: Final = """syntax = "proto3";
message ArrayItem {{{value_oneof} }}
message ArrayValue {{ repeated ArrayItem values = 1; }}
message KeyValueList {{ }}
message AnyValue {{{value_oneof} }}
message KeyValue {{ string key = 1; AnyValue value = 2; }}
message Resource {{ repeated KeyValue attributes = 1; }}
message Status {{ string message = 2; int32 code = 3; }}
{event}
message Span {{
    bytes trace_id = 1; bytes span_id = 2; bytes parent_span_id = 4; string name = 5; int32 kind = 6;
    fixed64 start_time_unix_nano = 7; fixed64 end_time_unix_nano = 8; repeated KeyValue attributes = 9;
    repeated Event events = 11; uint32 dropped_events_count = 12; Status status = 15; }}
message ScopeSpans {{ repeated Span spans = 2; }}
message ResourceSpans {{ Resource resource = 1; repeated ScopeSpans scope_spans = 2; }}
message Body {{
    repeated ResourceSpans resource_spans = 1;
    string ll_project = 1001; string ll_batch = 1002; uint32 ll_seq = 1003; uint64 ll_now_ns = 1004;
    uint32 ll_max_attribute_bytes = 1005; uint32 ll_max_span_bytes = 1006; bool ll_store_content = 1007;
    uint32 ll_content_max_bytes = 1008; }}
"""
PROTO: Final = _PROTO.format(
    value_oneof=_VALUE_ONEOF, event="message Event { fixed64 time_unix_nano = 1; string name = 2; }"
)
"""``ExportTraceServiceRequest`` as far as a span row needs it (protobuf is compatible by field
number), plus the envelope's fields (1001–1008)."""
EVENTS_PROTO: Final = _PROTO.format(
    value_oneof=_VALUE_ONEOF,
    event="message EventKey { string key = 1; }\n"
    "message Event { fixed64 time_unix_nano = 1; string name = 2; repeated EventKey attributes = 3; }",
)
""":data:`PROTO` whose events also bring their attribute keys (to tell events with attributes
apart), for the views that store spans with events (:func:`statements`)."""

_ONEOF: Final = (
    "value Enum8('none' = 0, 'string_value' = 1, 'bool_value' = 2, 'int_value' = 3, 'double_value' = 4, "
    "'array_value' = 5, 'kvlist_value' = 6, 'bytes_value' = 7), string_value String, bool_value Bool, "
    "int_value Int64, double_value Float64, bytes_value String"
)
_ANY: Final = f"Tuple({_ONEOF}, array_value Tuple(values Array(Tuple({_ONEOF}))))"
_KEY_VALUES: Final = f"Array(Tuple(key String, value {_ANY}))"


def _landing_columns(event: str) -> str:
    span = (
        "Tuple(trace_id String, span_id String, parent_span_id String, name String, kind Int32, "
        f"start_time_unix_nano UInt64, end_time_unix_nano UInt64, attributes {_KEY_VALUES}, "
        f"events Array({event}), dropped_events_count UInt32, status Tuple(message String, code Int32))"
    )
    return (
        f"resource_spans Array(Tuple(resource Tuple(attributes {_KEY_VALUES}), "
        f"scope_spans Array(Tuple(spans Array({span}))))), "
        "ll_project String, ll_batch String, ll_seq UInt32, ll_now_ns UInt64, ll_max_attribute_bytes UInt32, "
        "ll_max_span_bytes UInt32, ll_store_content Bool, ll_content_max_bytes UInt32"
    )


LANDING_COLUMNS: Final = _landing_columns("Tuple(time_unix_nano UInt64, name String)")
EVENTS_LANDING_COLUMNS: Final = _landing_columns(
    "Tuple(time_unix_nano UInt64, name String, attributes Array(Tuple(key String)))"
)
INSERT_SETTINGS: Final = {
    "format_schema": PROTO,
    "format_schema_source": "string",
    "format_schema_message_name": "Body",
    "input_format_protobuf_oneof_presence": 1,
    "deduplicate_blocks_in_dependent_materialized_views": 1,
    "short_circuit_function_evaluation": "disable",
    "query_plan_merge_expressions": 0,
    "optimize_and_compare_chain": 0,
    "optimize_on_insert": 0,
}
"""Settings of the INSERT (and so of its views). Short-circuit evaluation is off: it filters the
spans' nested columns again for each condition of ``plain``, which costs more (≈ a third of the
views' CPU) than evaluating every branch. Merging the stages' expression steps into one is off:
on these large expressions the merge costs each INSERT more planning (≈ 12 ms) than it saves.
Deriving comparisons from ``AND`` chains is off: it only adds conditions a filter could use, and
there is no filter to push them into here, yet on ``plain``'s long chains it was half of the
views' planning (≈ 45 ms of every INSERT, whatever its size). Collapsing a block's duplicate keys
as it is written to ``spans`` is off: every read of spans that must see each once does so with
``FINAL`` (or counts distinct ids), merges collapse them anyway, and copying every column of the
sorted block again cost ≈ 12 % of an INSERT of 16 bodies."""


def schema(with_events: bool = False) -> str:
    """The schema an INSERT into :func:`landing_table` reads its bodies with."""
    return EVENTS_PROTO if with_events else PROTO


def schema_file_name(with_events: bool = False) -> str:
    """The schema's file name where it is written to a file (the embedded engine), named by its
    content so a changed schema never meets an older compiled copy."""
    return f"otlp_body_{hashlib.sha256(schema(with_events).encode()).hexdigest()[:16]}.proto"


CLUSTER_INSERT_SETTINGS: Final = {"distributed_foreground_insert": 1}
"""On a cluster, the spans view's write to the ``Distributed`` front is part of the INSERT: when it
returns, the spans are on their shards, so the read-back for request rows finds them and an export
is answered only once its spans are stored (in the background, they would wait in the node's
queue)."""


def insert_settings(
    schema_file: str | None = None, cluster: str | None = None, with_events: bool = False
) -> dict[str, object]:
    """:data:`INSERT_SETTINGS` (and :data:`CLUSTER_INSERT_SETTINGS` on a cluster) for the views
    of spans without events, or ``with_events``, reading the schema from ``schema_file`` (an
    absolute path) when given: the embedded engine compiles an inline schema from a copy it writes
    under the working directory (``__cache__/``), so there the collector writes the file into its
    data directory."""
    settings: dict[str, object] = {**INSERT_SETTINGS, **(CLUSTER_INSERT_SETTINGS if cluster else {})}
    settings["format_schema"] = schema(with_events)
    if schema_file is not None:
        settings.update(format_schema=schema_file, format_schema_source="file")
    return settings


# --- the envelope ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class BodyLimits:
    """What the SQL checks a body against (from the collector's settings and clock)."""

    now_ns: int
    max_attribute_bytes: int
    max_span_bytes: int
    store_content: bool
    content_max_bytes: int


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _text_field(number: int, text: str) -> bytes:
    data = text.encode()
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def _int_field(number: int, value: int) -> bytes:
    return _varint(number << 3) + _varint(value)


def envelope(project: str, batch: str, seq: int, limits: BodyLimits) -> bytes:
    """The fields appended to one body (protobuf concatenation is a merge)."""
    return b"".join(
        (
            _text_field(1001, project),
            _text_field(1002, batch),
            _int_field(1003, seq),
            _int_field(1004, limits.now_ns),
            _int_field(1005, limits.max_attribute_bytes),
            _int_field(1006, limits.max_span_bytes),
            _int_field(1007, int(limits.store_content)),
            _int_field(1008, limits.content_max_bytes),
        )
    )


def otlp_frame_ok(body: bytes) -> bool:
    """Whether the body's top level is only OTLP's ``resource_spans`` (field 1, length-delimited)
    entries tiling it exactly: cheap (one varint pair per resource), and it keeps a sender from
    setting the envelope's fields. Anything else takes the Python path."""
    position, end = 0, len(body)
    while position < end:
        if body[position] != 0x0A:
            return False
        position += 1
        length = shift = 0
        while True:
            if position >= end or shift > 35:
                return False
            byte = body[position]
            position += 1
            length |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                break
        position += length
    return position == end


def _events_probe() -> type[Message]:
    """``ExportTraceServiceRequest`` reduced to the path to the spans' events (official field
    numbers; events without fields), in a pool of its own: parsing it skips everything else."""
    file = descriptor_pb2.FileDescriptorProto(name="latencylens_events_probe.proto", package="ll_probe")
    file.syntax = "proto3"
    for name, field_name, number, target in (
        ("Event", "", 0, ""),
        ("Span", "events", 11, "Event"),
        ("ScopeSpans", "spans", 2, "Span"),
        ("ResourceSpans", "scope_spans", 2, "ScopeSpans"),
        ("Request", "resource_spans", 1, "ResourceSpans"),
    ):
        message = file.message_type.add(name=name)
        if field_name:
            message.field.add(
                name=field_name,
                number=number,
                label=descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED,
                type=descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE,
                type_name=f".ll_probe.{target}",
            )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("ll_probe.Request"))


_EventsProbe: Final = _events_probe()
_EMPTY_EVENT: Final = b"\x5a\x00"
"""An event once its fields are discarded: tag 11 (length-delimited), length 0."""


def has_span_events(body: bytes) -> bool:
    """Whether a span of the body has an event: such a body goes to the views that store spans
    with events (:func:`statements`). False for a body that does not parse (its INSERT fails, and
    the Python path answers it).

    The body is parsed (in C) as a message that knows only the path to the events, every other
    field dropped, and written again: what is left is tags and lengths, where every event is the
    two bytes ``5a 00`` and nothing else can be (a zero byte is only ever the length of an empty
    message, right after its tag; a length byte 0x5a is followed by its message's first tag). About
    0.12 µs a span, against 1 µs for a full parse and a walk over the spans."""
    try:
        probe = _EventsProbe.FromString(body)
    except DecodeError:
        return False
    probe.DiscardUnknownFields()
    return _EMPTY_EVENT in probe.SerializeToString()


def framed(bodies: Iterable[tuple[bytes, bytes]]) -> bytes:
    """``(body, envelope)`` pairs as the length-delimited ``Protobuf`` format's input."""
    return b"".join(_varint(len(body) + len(extra)) + body + extra for body, extra in bodies)


# --- SQL pieces -----------------------------------------------------------------------------------
def _quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _array(texts: Iterable[str]) -> str:
    return "[" + ", ".join(_quote(text) for text in texts) + "]"


def _lookup(value: str, table: Mapping[str, str]) -> str:
    pairs = list(table.items())
    return f"transform({value}, {_array(k for k, _ in pairs)}, {_array(v for _, v in pairs)}, '')"


_PRINTABLE_NO_ESCAPE: Final = "'^[ !#-\\\\[\\\\]-~]*$'"
"""Printable ASCII but ``"`` and backslash: JSON writes such a string as it is."""
_PRINTABLE: Final = "'^[ -~]*$'"


def _double_ok(d: str) -> str:
    return f"(isFinite({d}) AND ({d} = 0 OR (abs({d}) >= 0.0001 AND abs({d}) < 1e16)))"


def _double_text(d: str) -> str:
    """``repr(float)`` for the doubles :func:`_double_ok` admits."""
    return f"if({d} = floor({d}), concat(toString({d}), '.0'), toString({d}))"


def _scalar_text(v: str, array_text: str) -> str:
    return (
        f"multiIf({v}.value = 'string_value', {v}.string_value, "
        f"{v}.value = 'int_value', toString({v}.int_value), "
        f"{v}.value = 'bool_value', if({v}.bool_value, 'true', 'false'), "
        f"{v}.value = 'double_value', {_double_text(f'{v}.double_value')}, "
        f"{v}.value = 'bytes_value', lower(hex({v}.bytes_value)), "
        f"{v}.value = 'array_value', {array_text}, '')"
    )


def _item_json(i: str) -> str:
    return (
        f"multiIf({i}.value = 'string_value', concat('\"', {i}.string_value, '\"'), "
        f"{i}.value = 'int_value', toString({i}.int_value), {i}.value = 'bool_value', "
        f"if({i}.bool_value, 'true', 'false'), '\"\"')"
    )


def _value_text(v: str) -> str:
    """An ``AnyValue`` as the Python path writes it (:func:`...intake.values.value_to_str`)."""
    array = (
        f"concat('[', arrayStringConcat(arrayMap(i -> {_item_json('i')}, {v}.array_value.values), ','), ']')"
    )
    return _scalar_text(v, array)


def _value_ok(v: str, text: str, limit: str) -> str:
    """Whether :func:`_value_text` writes this value exactly as Python does, within ``limit`` bytes
    (``text``: what it wrote, computed once for both)."""
    item_ok = (
        "i -> (i.value IN ('none', 'int_value', 'bool_value') "
        f"OR (i.value = 'string_value' AND match(i.string_value, {_PRINTABLE_NO_ESCAPE})))"
    )
    return (
        f"multiIf({v}.value = 'string_value', "
        f"isValidUTF8({v}.string_value) AND length({v}.string_value) <= {limit}, "
        f"{v}.value = 'double_value', {_double_ok(f'{v}.double_value')}, "
        f"{v}.value = 'array_value', arrayAll({item_ok}, {v}.array_value.values) "
        f"AND length({text}) <= {limit}, "
        f"{v}.value = 'bytes_value', length({v}.bytes_value) * 2 <= {limit}, "
        f"{v}.value != 'kvlist_value')"
    )


def _attributes_ok(attributes: str, texts: str, key_ok: str, limit: str) -> str:
    """Every key and value of a repeated ``KeyValue`` stored as Python would, in one pass (``texts``:
    the values' :func:`_value_text`, a column of the stage before)."""
    return (
        f"arrayAll((kv, t) -> {key_ok.format(k='kv.key')} AND length(kv.key) <= {limit} "
        f"AND {_value_ok('kv.value', 't', limit)}, {attributes}, {texts})"
    )


def _classify(attributes: str, has_parent: str) -> str:
    """:func:`latencylens_collector.analysis.conventions.classify`, from the same tables (each
    attribute looked up once, under an alias)."""
    a = attributes
    explicit = f"{a}[{_quote(semconv.SPAN_KIND)}] AS _explicit"
    operation = f"{a}[{_quote(semconv.GEN_AI_OPERATION_NAME)}] AS _operation"
    oi_kind = _lookup(
        f"upper({a}[{_quote(openinference.OPENINFERENCE_SPAN_KIND)}])", openinference.KIND_BY_SPAN_KIND
    )
    by_type = _lookup(f"{a}[{_quote(openllmetry.LLM_REQUEST_TYPE)}]", openllmetry.KIND_BY_REQUEST_TYPE)
    by_span_kind = _lookup(f"{a}[{_quote(openllmetry.TRACELOOP_SPAN_KIND)}]", openllmetry.KIND_BY_SPAN_KIND)
    by_aisdk = _lookup(f"{a}[{_quote(aisdk.OPERATION_ID)}]", aisdk.KIND_BY_OPERATION_ID)
    by_genai = _lookup(f"({operation})", genai.KIND_BY_OPERATION)
    by_openlit = _lookup("_operation", openlit.KIND_BY_OPERATION)
    default = f"if({has_parent}, {_quote(KIND_OTHER)}, {_quote(semconv.KIND_REQUEST)})"
    return (
        f"multiIf(({explicit}) IN {_array(sorted(KNOWN_KINDS))}, _explicit, "
        f"{a}[{_quote(logfire.LOGFIRE_SPAN_TYPE)}] IN {_array(sorted(logfire.NOT_CALLS))}, "
        f"{_quote(KIND_OTHER)}, "
        f"hasAny(mapKeys({a}), {_array(vllm.LATENCY_KEYS)}), {_quote(semconv.KIND_MODEL)}, "
        f"mapContains({a}, {_quote(openinference.OPENINFERENCE_SPAN_KIND)}), "
        f"if(({oi_kind} AS _oi) != '', _oi, {default}), "
        f"({by_genai} AS _genai) != '', _genai, ({by_openlit} AS _openlit) != '', _openlit, "
        f"({by_type} AS _by_type) != '', _by_type, ({by_span_kind} AS _by_span_kind) != '', _by_span_kind, "
        f"({by_aisdk} AS _by_aisdk) != '', _by_aisdk, {default})"
    )


_ZERO_TRACE: Final = "unhex('00000000000000000000000000000000')"
_ZERO_SPAN: Final = "unhex('0000000000000000')"
_EVENTS_TYPE: Final = (
    "Array(Tuple(name String, time DateTime64(9, 'UTC'), attributes Map(LowCardinality(String), String)))"
)
_SPAN_KINDS: Final = ("unspecified", "internal", "server", "client", "producer", "consumer")
_NO_TEXTS: Final = "CAST([], 'Array(String)')"
_NEVER: Final = "toUInt64(18446744073709551615)"


def _stream_time(span: str, names: Iterable[str], earliest: bool) -> str:
    """The earliest (or latest) time of the span's events named in ``names`` within its window, as
    :func:`latencylens_collector.analysis.conventions.events.stream_attributes` reads it; 0 when
    there is none (a time in the window is never 0: a plain span does not start at 0). One lambda
    each: planning, not the rows, is most of a small INSERT's cost."""
    outside = _NEVER if earliest else "0"
    return (
        f"{'arrayMin' if earliest else 'arrayMax'}(arrayMap(e -> if(has({_array(sorted(names))}, e.name) "
        f"AND e.time_unix_nano >= {span}.start_time_unix_nano "
        f"AND e.time_unix_nano <= {span}.end_time_unix_nano, e.time_unix_nano, {outside}), {span}.events))"
    )


@dataclass(frozen=True)
class _EventsSql:
    """The fragments of :func:`_flat_select` that differ when it stores spans with events."""

    stream_columns: str = ""
    keys: str = "keys0"
    values: str = "values0"
    dropped_keys: str = ""
    dropped_values: str = ""
    carried: str = ""
    not_preset: str = ""
    read: str = f"CAST([], {_quote(_EVENTS_TYPE)}) AS events,"
    allowed: str = "length(s.events) = 0"
    budget: str = ""


def _events_sql() -> _EventsSql:
    """Events without attributes: written to the ``events`` column, their names counted in the
    per-span budget, and the stream times (``latencylens.events.*``) added by the Python path's
    rules. An event with attributes, more than a span keeps, a name over the limit or not UTF-8,
    one more than a day ahead, or a span already carrying a stream time is not plain."""
    first_key, last_key = _quote(events.FIRST_CONTENT_NS), _quote(events.LAST_CHUNK_NS)
    return _EventsSql(
        stream_columns=f""",
           first0 NOT IN (0, {_NEVER}) AND dropped_events_count = 0 AS has_first,
           if(chunk0 != 0, chunk0, end0) AS last0,
           arrayConcat(if(has_first, [{first_key}], {_NO_TEXTS}), if(last0 != 0, [{last_key}], {_NO_TEXTS}))
           AS stream_keys,
           arrayConcat(if(has_first, [toString(first0 - start_ns0)], {_NO_TEXTS}),
                       if(last0 != 0, [toString(last0 - start_ns0)], {_NO_TEXTS})) AS stream_values""",
        keys="arrayConcat(keys0, stream_keys)",
        values="arrayConcat(values0, stream_values)",
        dropped_keys=", stream_keys",
        dropped_values=",\n                                      stream_values",
        carried=", event_bytes",
        not_preset="\n         AND NOT hasAny(keys0, stream_keys)",
        read=f"""CAST(arrayMap(e -> (e.name, fromUnixTimestamp64Nano(toInt64(e.time_unix_nano), 'UTC'),
                                         map()),
                           s.events), {_quote(_EVENTS_TYPE)}) AS events,
             length(arrayStringConcat(s.events.name)) AS event_bytes,
             s.start_time_unix_nano AS start_ns0,
             {_stream_time("s", events.FIRST_CONTENT_EVENTS, True)} AS first0,
             {_stream_time("s", events.CHUNK_EVENTS, False)} AS chunk0,
             {_stream_time("s", events.STREAM_END_EVENTS, False)} AS end0,""",
        allowed=f"""length(s.events) <= {MAX_EVENTS_PER_SPAN}
             AND arrayAll(e -> length(e.attributes) = 0 AND isValidUTF8(e.name)
                               AND length(e.name) <= ll_max_attribute_bytes
                               AND e.time_unix_nano <= ll_now_ns + {FUTURE_LIMIT_NS}, s.events)""",
        budget="+ event_bytes ",
    )


def _flat_select(database: str, with_events: bool = False) -> str:
    """One row per span of the landed bodies, with its row columns, ``plain`` and its body.

    Built in stages, each a subquery whose columns the next reads: a value used in several places
    (the value texts, the attribute map) is computed once, where an alias is copied into every
    place that names it and analyzed again there (the value checks read the texts of the stage
    before rather than writing them again). Planning, not the rows, is most of a small INSERT's
    cost: with the stages and :data:`INSERT_SETTINGS`, an INSERT's views take ≈ 50 ms before its
    first span (≈ 115 ms in one stage, ≈ 95 ms with ClickHouse's default AND-chain rewrite), then
    ≈ 8 µs a span.

    ``with_events``: spans with events are stored too (:func:`_events_sql`), for ≈ 20 ms more
    planning per INSERT, hence a set of views of their own (:func:`statements`)."""
    e = _events_sql() if with_events else _EventsSql()
    content_keys = _array(sorted(CONTENT_KEYS))
    indexed = _quote("(?s)^" + INDEXED_PATTERN)
    oi = _quote(openinference.OPENINFERENCE_SPAN_KIND)
    service = _quote("service.name")
    limits = "ll_max_span_bytes, ll_store_content, ll_content_max_bytes"
    limit = "ll_max_attribute_bytes"
    return f"""
SELECT project, trace_id, span_id, parent_span_id, service, name, span_kind, attributes,
       {_classify("attributes", "parent_span_id != " + _ZERO_SPAN)} AS kind,
       start_time, duration_ns, status_code, status_message, resource_attributes, events,
       dropped_events_count, batch, seq,
       checked AND match(attributes[{oi}], {_PRINTABLE})
       AND length(arrayStringConcat(mapKeys(attributes))) + length(arrayStringConcat(mapValues(attributes)))
           {e.budget}<= ll_max_span_bytes AS plain
FROM (
  SELECT project, trace_id, span_id, parent_span_id, service, name, span_kind,
         if(dropped = 0, mapFromArrays({e.keys}, {e.values}),
            mapFromArrays(arrayConcat(arrayFilter((k, c) -> NOT c, keys0, content0),
                                      [{_quote(DROPPED_ATTRIBUTES)}, {_quote(DROPPED_BYTES)}]{e.dropped_keys}),
                          arrayConcat(arrayFilter((v, c) -> NOT c, values0, content0),
                                      [toString(dropped),
                                       toString(arraySum((v, c) -> if(c, length(v), 0), values0, content0))]{e.dropped_values}))
         ) AS attributes,
         start_time, duration_ns, status_code, status_message, resource_attributes, events,
         dropped_events_count, batch, seq, ll_max_span_bytes{e.carried},
         checked0{e.not_preset}
         AND {_attributes_ok("key_values0", "values0", "match({k}, " + _PRINTABLE + ")", limit)}
         AND (dropped = 0 OR NOT hasAny(keys0, {_array((DROPPED_ATTRIBUTES, DROPPED_BYTES))}))
         AND if(ll_store_content,
                NOT arrayExists((v, c) -> c AND length(v) > ll_content_max_bytes, values0, content0), 1)
         AS checked
  FROM (
    SELECT *, if(ll_store_content, 0, arrayCount(c -> c, content0)) AS dropped{e.stream_columns}
    FROM (
      SELECT ll_project AS project, toFixedString(substring(s.trace_id, 1, 16), 16) AS trace_id,
             toFixedString(substring(s.span_id, 1, 8), 8) AS span_id,
             if(s.parent_span_id = '', {_ZERO_SPAN},
                toFixedString(substring(s.parent_span_id, 1, 8), 8)) AS parent_span_id,
             if(resource[{service}] = '', {_quote(UNKNOWN_SERVICE)}, resource[{service}]) AS service,
             s.name AS name,
             transform(s.kind, [0, 1, 2, 3, 4, 5], {_array(_SPAN_KINDS)}, 'unspecified') AS span_kind,
             arrayMap(kv -> kv.key, s.attributes) AS keys0,
             arrayMap(kv -> {_value_text("kv.value")}, s.attributes) AS values0,
             arrayMap(kv -> has({content_keys}, kv.key) OR match(kv.key, {indexed}), s.attributes)
             AS content0,
             fromUnixTimestamp64Nano(toInt64(s.start_time_unix_nano), 'UTC') AS start_time,
             toInt64(s.end_time_unix_nano) - toInt64(s.start_time_unix_nano) AS duration_ns,
             toUInt8(s.status.code) AS status_code, s.status.message AS status_message,
             resource AS resource_attributes,
             {e.read}
             s.dropped_events_count AS dropped_events_count,
             ll_batch AS batch, ll_seq AS seq, {limits},
             resource_ok
             AND length(s.trace_id) = 16 AND s.trace_id != {_ZERO_TRACE}
             AND length(s.span_id) = 8 AND s.span_id != {_ZERO_SPAN}
             AND length(s.parent_span_id) IN (0, 8)
             AND s.start_time_unix_nano != 0
             AND greatest(s.start_time_unix_nano, s.end_time_unix_nano) <= ll_now_ns + {FUTURE_LIMIT_NS}
             AND s.end_time_unix_nano >= s.start_time_unix_nano
             AND s.status.code BETWEEN 0 AND 2
             AND {e.allowed}
             AND isValidUTF8(s.name) AND length(s.name) <= ll_max_attribute_bytes
             AND isValidUTF8(s.status.message) AND length(s.status.message) <= ll_max_attribute_bytes
             AND ll_max_attribute_bytes >= 32
             AND length(arrayDistinct(arrayMap(kv -> kv.key, s.attributes))) = length(s.attributes)
             AS checked0, s.attributes AS key_values0, ll_max_attribute_bytes
      FROM (
        SELECT *, mapFromArrays(resource_keys, resource_values) AS resource,
               resource_checked
               AND {_attributes_ok("resource_kvs", "resource_values", "isValidUTF8({k})", limit)}
               AND length(arrayStringConcat(resource_keys)) + length(arrayStringConcat(resource_values))
                   <= least(ll_max_span_bytes, {MAX_RESOURCE_BYTES}) AS resource_ok
        FROM (
          SELECT ll_project, ll_batch, ll_seq, ll_now_ns, ll_max_attribute_bytes, ll_max_span_bytes,
                 ll_store_content, ll_content_max_bytes, rs.scope_spans AS scope_spans,
                 arrayMap(kv -> kv.key, rs.resource.attributes) AS resource_keys,
                 arrayMap(kv -> {_value_text("kv.value")}, rs.resource.attributes) AS resource_values,
                 length(arrayDistinct(arrayMap(kv -> kv.key, rs.resource.attributes)))
                 = length(rs.resource.attributes) AS resource_checked,
                 rs.resource.attributes AS resource_kvs
          FROM {database}.{LANDING}
          ARRAY JOIN resource_spans AS rs
        )
      )
      ARRAY JOIN scope_spans AS ss
      ARRAY JOIN ss.spans AS s
    )
  )
)"""  # noqa: E501 (the SQL is easier to read unbroken)


_SPAN_COLUMNS_SQL: Final = (
    "project, trace_id, span_id, parent_span_id, service, name, span_kind, kind, start_time, duration_ns, "
    "status_code, status_message, attributes, resource_attributes, events, dropped_events_count"
)


_VERDICT_SELECT: Final = (
    "SELECT batch, seq, toUInt32(count()) AS spans, toUInt32(countIf(NOT plain)) AS not_plain, "
    "any(project) AS project, (sumMapIf([trace_id], [toUInt32(1)], plain)).1 AS trace_ids, "
    "(sumMapIf([trace_id], [toUInt32(1)], plain)).2 AS trace_spans, "
    "toUnixTimestamp64Nano(minIf(start_time, plain)) AS first_start_ns, "
    "toUnixTimestamp64Nano(maxIf(start_time, plain)) AS last_start_ns"
)
"""One row per body: its spans, those not plain, and the plain ones' traces with how many spans of
each it stored (``trace_ids`` and ``trace_spans`` in step, for the per-trace span cap), and their
earliest and latest start (what the read-back of their traces looks near)."""


def statements(database: str, cluster: str | None = None) -> list[str]:
    """The landing tables and their views, for a database (each ``IF NOT EXISTS``): two sets, one
    for spans without events and one for spans with events (which costs every INSERT ≈ 20 ms more
    planning, so only bodies that need it take it), feeding one verdicts table. The views' names
    carry a hash of their SQL, so a collector whose mapping changed makes its own.

    On a cluster (``cluster``, :mod:`.ddl`'s topology) each is created ``ON CLUSTER``, so any node
    can take an INSERT of bodies. The ``Null`` tables and ``otlp_verdicts`` are the node's own (a
    verdict concerns the INSERT that node ran, read by the collector that sent it); the spans view
    writes to ``spans``, the ``Distributed`` front, so each span goes to its trace's shard as the
    Python path's inserts do (:func:`insert_settings` makes that write part of the INSERT)."""
    db = database
    on = f" ON CLUSTER {cluster}" if cluster else ""
    plain = _view_set(db, on, with_events=False)
    return [
        *plain[:3],
        f"CREATE TABLE IF NOT EXISTS {db}.{VERDICTS}{on} (inserted DateTime DEFAULT now(), "
        "batch String, seq UInt32, "
        "spans UInt32, not_plain UInt32, project LowCardinality(String), trace_ids Array(FixedString(16))) "
        "ENGINE = MergeTree ORDER BY (batch, seq) TTL inserted + toIntervalDay(1)",
        f"ALTER TABLE {db}.{VERDICTS}{on} ADD COLUMN IF NOT EXISTS trace_spans Array(UInt32), "
        "ADD COLUMN IF NOT EXISTS first_start_ns Int64, ADD COLUMN IF NOT EXISTS last_start_ns Int64",
        *plain[3:],
        *_view_set(db, on, with_events=True),
    ]


def _view_set(db: str, on: str, with_events: bool) -> list[str]:
    """One set: its landing and flat tables (3 statements), then its three views."""
    flat_select = _flat_select(db, with_events)
    proto, columns = (EVENTS_PROTO, EVENTS_LANDING_COLUMNS) if with_events else (PROTO, LANDING_COLUMNS)
    version = hashlib.sha256((proto + flat_select + _VERDICT_SELECT).encode()).hexdigest()[:10]
    return [
        f"CREATE TABLE IF NOT EXISTS {db}.{LANDING}_{version}{on} ({columns}) ENGINE = Null",
        f"CREATE TABLE IF NOT EXISTS {db}.{FLAT}_{version}{on} AS {db}.spans ENGINE = Null",
        f"ALTER TABLE {db}.{FLAT}_{version}{on} ADD COLUMN IF NOT EXISTS batch String, "
        "ADD COLUMN IF NOT EXISTS seq UInt32, ADD COLUMN IF NOT EXISTS plain Bool",
        f"CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.{FLAT}_mv_{version}{on} TO {db}.{FLAT}_{version} AS "
        f"SELECT {_SPAN_COLUMNS_SQL}, batch, seq, plain FROM ("
        + flat_select.replace(f"{db}.{LANDING}", f"{db}.{LANDING}_{version}")
        + ")",
        f"CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.otlp_spans_mv_{version}{on} TO {db}.spans AS "
        f"SELECT {_SPAN_COLUMNS_SQL} FROM {db}.{FLAT}_{version} WHERE plain",
        f"CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.otlp_verdicts_mv_{version}{on} TO {db}.{VERDICTS} AS "
        f"{_VERDICT_SELECT} FROM {db}.{FLAT}_{version} GROUP BY batch, seq",
    ]


@functools.cache
def landing_table(database: str, with_events: bool = False) -> str:
    """The landing table the current mapping's views read: those of spans without events, or
    (``with_events``) those that also store spans with events."""
    first = _view_set(database, "", with_events)[0]
    return first.split("IF NOT EXISTS ", 1)[1].split(" ", 1)[0]


@dataclass
class Verdict:
    """What the engine did with one body of a batch."""

    spans: int = 0
    """Spans the body holds."""
    not_plain: int = 0
    """Spans it left to the Python path (then the whole body takes it)."""
    project: str = ""
    trace_spans: dict[bytes, int] = field(default_factory=dict)
    """Spans it stored, by trace (the per-trace span cap counts them)."""
    first_start_ns: int = 0
    last_start_ns: int = 0
    """The earliest and latest start of the spans it stored; 0 when not known (a verdict written by
    an earlier collector's views, which did not record them)."""

    @property
    def trace_ids(self) -> set[bytes]:
        """Traces of the spans it stored."""
        return set(self.trace_spans)

    @property
    def stored_all(self) -> bool:
        return self.not_plain == 0


def verdicts_sql(database: str) -> str:
    return (
        f"SELECT seq, sum(spans) AS spans, sum(not_plain) AS not_plain, any(project) AS project, "
        f"(sumMap(trace_ids, trace_spans)).1 AS ids, (sumMap(trace_ids, trace_spans)).2 AS counts, "
        "min(first_start_ns) AS first_start_ns, max(last_start_ns) AS last_start_ns "
        f"FROM {database}.{VERDICTS} "
        "WHERE batch = {batch:String} GROUP BY seq"
    )


def read_verdicts(rows: Sequence[dict[str, object]], bodies: int) -> list[Verdict | None]:
    """One verdict per body of the batch; None for a body whose verdict was not read, which must
    take the Python path. A body without spans has no row (its views write none), nor has any body
    whose verdict the query did not see: verdicts are written by the node that ran the INSERT, and
    a query sent elsewhere (a load balancer in front of a cluster) sees none. Only the Python path
    can tell the two apart, and storing a body twice loses nothing (the copies collapse)."""
    out: list[Verdict | None] = [None] * bodies
    for row in rows:
        seq = int(row["seq"])  # type: ignore[call-overload]
        if 0 <= seq < bodies:
            ids = row["ids"]
            out[seq] = Verdict(
                int(row["spans"]),  # type: ignore[call-overload]
                int(row["not_plain"]),  # type: ignore[call-overload]
                str(row["project"]),
                {
                    bytes(t) if not isinstance(t, str) else t.encode("latin-1"): int(n)
                    for t, n in zip(ids, row["counts"], strict=True)  # type: ignore[call-overload]
                },
                int(row["first_start_ns"]),  # type: ignore[call-overload]
                int(row["last_start_ns"]),  # type: ignore[call-overload]
            )
    return out


__all__ = [
    "CLUSTER_INSERT_SETTINGS",
    "EVENTS_LANDING_COLUMNS",
    "EVENTS_PROTO",
    "FLAT",
    "FUTURE_LIMIT_NS",
    "INSERT_SETTINGS",
    "LANDING",
    "LANDING_COLUMNS",
    "MAX_EVENTS_PER_SPAN",
    "MAX_RESOURCE_BYTES",
    "PROTO",
    "UNKNOWN_SERVICE",
    "VERDICTS",
    "BodyLimits",
    "Verdict",
    "envelope",
    "framed",
    "has_span_events",
    "insert_settings",
    "landing_table",
    "otlp_frame_ok",
    "read_verdicts",
    "schema",
    "schema_file_name",
    "statements",
    "verdicts_sql",
]
