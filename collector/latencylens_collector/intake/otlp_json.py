"""OTLP/JSON bodies to protobuf messages, one span at a time.

OTLP/JSON is protobuf's JSON mapping with hex ids. What the decoder adds, so that no body makes it
fail with anything but :class:`OtlpDecodeError` and one bad span never costs the others:

* the frame — the document, ``resourceSpans``, ``scopeSpans`` and ``spans`` arrays and their
  objects — must have the right shape, or the body is refused (400) saying where;
* each span is parsed on its own: a span that is not an object or whose fields have the wrong
  types is rejected (:data:`MALFORMED_SPAN`, reported in ``partial_success``), and so are the spans
  of a resource that is not a valid resource;
* attribute values nested deeper than :data:`MAX_VALUE_DEPTH` arrays or maps are cut to a marker
  before parsing (the span is kept; protobuf's own parser stops at 100 nested messages);
* a body nested deeper than Python's JSON parser goes is parsed again with every array or object
  below :data:`PRUNE_DEPTH` levels replaced by a placeholder; it is accepted only if all of them
  were inside attribute values, which the value cut removes (the attribute is cut, its span kept),
  and refused otherwise (400): so the only outcomes are spans, rejected spans, or a 400;
* bytes that are not UTF-8 and escaped lone surrogates become U+FFFD (counted as repairs).
"""

from __future__ import annotations

import base64
import json
import re
from collections import Counter
from typing import Any, Final

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from latencylens_collector.intake.errors import MALFORMED_RESOURCE, MALFORMED_SPAN, OtlpDecodeError
from latencylens_collector.intake.values import DEPTH_MARKER, MAX_VALUE_DEPTH, NOT_UTF8, TOO_DEEP

PRUNE_DEPTH: Final = 100
"""JSON levels kept when a body is nested deeper than the parser goes: the OTLP frame is 12 levels
and an attribute value cut at :data:`MAX_VALUE_DEPTH` takes 3 levels per array or map."""
MAX_DETAIL_CHARS: Final = 300
_ID_FIELDS: Final = ("traceId", "spanId", "parentSpanId")
_TIME_FIELDS: Final = ("startTimeUnixNano", "endTimeUnixNano")
_EVENT_TIME_FIELDS: Final = ("timeUnixNano",)
_ARRAYS: Final = ("arrayValue", "array_value")
_MAPS: Final = ("kvlistValue", "kvlist_value")
_JSON_SURROGATE = re.compile(rb"\\u[dD][89abAB]")
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')
_PRUNED: Final = "\x00latencylens:pruned"
"""Stands for a pruned array or object (in JSON text: :data:`_PRUNED_JSON`)."""
_PRUNED_JSON: Final = json.dumps(_PRUNED)
_PARSE_ERRORS: Final = (json_format.ParseError, ValueError, TypeError, AttributeError, KeyError, IndexError)


def parse(
    body: bytes, warnings: Counter[str], rejected: Counter[str]
) -> tuple[ExportTraceServiceRequest, str]:
    """The request holding every span that parses, and the first parse error's text ("" if none).

    Repairs and cuts are counted in ``warnings``, rejected spans by reason in ``rejected``; raises
    :class:`OtlpDecodeError` when the body is not JSON or its frame is not an export request's."""
    document, pruned = _load(_text(body, warnings))
    if not isinstance(document, dict):
        raise OtlpDecodeError("body must be a JSON object with a 'resourceSpans' array")
    if _JSON_SURROGATE.search(body):
        repaired = _without_lone_surrogates(document)
        if repaired:
            warnings[NOT_UTF8] += repaired
    request = ExportTraceServiceRequest()
    detail = ""
    for index, resource_spans in enumerate(_array(document, "resourceSpans", "")):
        where = f"resourceSpans[{index}]"
        if not isinstance(resource_spans, dict):
            raise OtlpDecodeError(f"{where} must be an object")
        spans = []
        for scope_index, scope_spans in enumerate(_array(resource_spans, "scopeSpans", where)):
            if not isinstance(scope_spans, dict):
                raise OtlpDecodeError(f"{where}.scopeSpans[{scope_index}] must be an object")
            spans.extend(_array(scope_spans, "spans", f"{where}.scopeSpans[{scope_index}]"))
        target = request.resource_spans.add()
        resource = resource_spans.get("resource")
        if resource is not None:
            error = _parse_into(resource, target.resource, warnings, _prepare_resource)
            if error:
                del request.resource_spans[-1]
                rejected[MALFORMED_RESOURCE] += len(spans)
                detail = detail or f"{where}.resource: {error}"
                continue
        into = target.scope_spans.add()  # the scope is not stored: one holds the resource's spans
        for span in spans:
            error = _parse_into(span, into.spans.add(), warnings, _prepare_span)
            if error:
                del into.spans[-1]
                rejected[MALFORMED_SPAN] += 1
                detail = detail or error
    if pruned and _holds_pruned(document):
        raise OtlpDecodeError(f"body is nested deeper than {PRUNE_DEPTH} levels outside attribute values")
    return request, detail[:MAX_DETAIL_CHARS]


def _text(body: bytes, warnings: Counter[str]) -> str:
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        text = body.decode("utf-8", errors="replace")
        warnings[NOT_UTF8] += text.count("\ufffd") - body.count("\ufffd".encode())
        return text


def _load(text: str) -> tuple[Any, bool]:
    """The document, and whether it had to be pruned."""
    try:
        try:
            return json.loads(text), False
        except RecursionError:
            return json.loads(_pruned(text, PRUNE_DEPTH)), True
    except json.JSONDecodeError as exc:
        raise OtlpDecodeError(f"body is not valid JSON: {exc}") from None
    except RecursionError:  # pragma: no cover - pruned text is at most PRUNE_DEPTH deep
        raise OtlpDecodeError("body is nested too deeply to be an OTLP export") from None


def _pruned(text: str, limit: int) -> str:
    """``text`` with every array or object that opens below ``limit`` levels replaced by the
    placeholder. Brackets are only counted outside strings; unbalanced brackets stay invalid."""
    parts, depth, last, skip_from = [], 0, 0, -1
    for match in _TOKEN.finditer(text):
        token = match.group()
        if token[0] == '"':
            continue
        if token in "[{":
            depth += 1
            if depth == limit + 1:
                skip_from = match.start()
        else:
            if depth == limit + 1 and skip_from >= 0:
                parts.append(text[last:skip_from])
                parts.append(_PRUNED_JSON)
                last, skip_from = match.end(), -1
            depth -= 1
    parts.append(text[last:])
    return "".join(parts)


def _holds_pruned(document: Any) -> bool:
    """Whether a placeholder is left (outside the attribute values that were cut), without
    recursion: the pruned document is at most PRUNE_DEPTH levels deep but may be wide."""
    stack = [document]
    while stack:
        node = stack.pop()
        items = node.values() if isinstance(node, dict) else node
        for item in items:
            if isinstance(item, (dict, list)):
                stack.append(item)
            elif item == _PRUNED:
                return True
    return False


def _array(container: dict[str, Any], key: str, where: str) -> list[Any]:
    value = container.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise OtlpDecodeError(f"{where + '.' if where else ''}{key} must be an array")
    return value


def _parse_into(value: Any, message: Any, warnings: Counter[str], prepare: Any) -> str:
    """Parse one span (or resource) into ``message``; the error's text, or "" when it parsed."""
    if not isinstance(value, dict):
        return f"expected an object, got {type(value).__name__}"
    prepare(value, warnings)
    try:
        json_format.ParseDict(value, message, ignore_unknown_fields=True)
    except _PARSE_ERRORS as exc:
        return str(exc) or type(exc).__name__
    return ""


def _prepare_resource(resource: dict[str, Any], warnings: Counter[str]) -> None:
    _cut_attributes(resource.get("attributes"), warnings)


def _prepare_span(span: dict[str, Any], warnings: Counter[str]) -> None:
    """Hex ids to base64, negative times to 0 (rejected by the decoder), values cut to depth."""
    _hex_ids_to_base64(span)
    _negative_times_to_zero(span, _TIME_FIELDS)
    _cut_attributes(span.get("attributes"), warnings)
    for key, times in (("events", _EVENT_TIME_FIELDS), ("links", ())):
        items = span.get(key)
        for item in items if isinstance(items, list) else ():
            if isinstance(item, dict):
                if times:
                    _negative_times_to_zero(item, times)
                else:
                    _hex_ids_to_base64(item)
                _cut_attributes(item.get("attributes"), warnings)


def _cut_attributes(attributes: Any, warnings: Counter[str]) -> None:
    for kv in attributes if isinstance(attributes, list) else ():
        if isinstance(kv, dict) and "value" in kv:
            kv["value"] = _cut_value(kv["value"], MAX_VALUE_DEPTH, warnings)


def _cut_value(value: Any, depth: int, warnings: Counter[str]) -> Any:
    """An ``AnyValue`` object with arrays and maps deeper than ``depth`` replaced by the marker, as
    the protobuf path cuts them (:func:`..values.any_value_to_str`)."""
    if not isinstance(value, dict):
        return value
    for name in (*_ARRAYS, *_MAPS):
        inner = value.get(name)
        if inner is None:
            continue
        if depth <= 0:
            warnings[TOO_DEEP] += 1
            return {"stringValue": DEPTH_MARKER}
        items = inner.get("values") if isinstance(inner, dict) else None
        if not isinstance(items, list):
            continue
        for index, item in enumerate(items):
            if name in _ARRAYS:
                items[index] = _cut_value(item, depth - 1, warnings)
            elif isinstance(item, dict) and "value" in item:
                item["value"] = _cut_value(item["value"], depth - 1, warnings)
    return value


def _negative_times_to_zero(obj: dict[str, Any], keys: tuple[str, ...]) -> None:
    """A time before 1970 cannot be a fixed64; 0 makes the decoder reject the span (an event at 0
    is kept: its span may be valid)."""
    for key in keys:
        value = obj.get(key)
        if isinstance(value, (str, int)) and not isinstance(value, bool):
            try:
                negative = int(value) < 0
            except ValueError:
                continue  # not a number: json_format reports it
            if negative:
                obj[key] = "0"


def _hex_ids_to_base64(obj: dict[str, Any]) -> None:
    """Replace hex ids by base64; an id that is not hex becomes one byte so its span is rejected."""
    for key in _ID_FIELDS:
        value = obj.get(key)
        if not isinstance(value, str):
            continue
        try:
            raw = bytes.fromhex(value)
        except ValueError:
            raw = b"\x00"  # wrong length on purpose: the span is rejected as having an invalid id
        obj[key] = base64.b64encode(raw).decode("ascii")


def _without_lone_surrogates(document: Any) -> int:
    """Replace unpaired surrogates (``"\\ud800"``) by U+FFFD in every string of the document, in
    place and without recursion; returns how many strings changed (ClickHouse and protobuf need
    real UTF-8)."""
    repaired = 0
    stack = [document]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            for index, item in enumerate(node):
                if isinstance(item, str):
                    fixed = _valid(item)
                    if fixed != item:
                        node[index], repaired = fixed, repaired + 1
                elif isinstance(item, (list, dict)):
                    stack.append(item)
        elif isinstance(node, dict):
            items = list(node.items())
            fixed_items = []
            for key, item in items:
                fixed_key = _valid(key)
                repaired += fixed_key != key
                if isinstance(item, str):
                    fixed = _valid(item)
                    repaired += fixed != item
                    item = fixed
                elif isinstance(item, (list, dict)):
                    stack.append(item)
                fixed_items.append((fixed_key, item))
            node.clear()
            node.update(fixed_items)
    return repaired


def _valid(text: str) -> str:
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
