"""Trace-level reading: spans that only mean something together.

vLLM's ``llm_request`` server span is a descendant of the client's model-call span. Its reported
queue, prefill and decode replace whatever the client estimated for that call, network becomes
client duration − server e2e, and the server span itself is not counted again (not as app time,
not as a second model call). A vLLM span with no client model call above it (vLLM called without
trace context) is the model call itself: its duration is the server's e2e and it has no network.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Final

from latencylens import semconv
from latencylens_collector.conventions import vllm
from latencylens_collector.conventions.reading import canonical_attributes
from latencylens_collector.conventions.values import first_seconds_ns
from latencylens_collector.rows import SpanRow

KIND_MODEL_SERVER: Final = "model_server"
"""In-memory kind of a server span whose timing was merged into its client's model call."""


def resolve_trace(spans: Sequence[SpanRow]) -> list[SpanRow]:
    """One trace's spans as attribution should see them (idempotent; the input is not changed).

    Model spans get canonical attributes (:func:`canonical_attributes`); a client model call with
    a vLLM server span below it gets the server's timing; that server span becomes
    :data:`KIND_MODEL_SERVER`; a vLLM span without a client call becomes a model call of its own.
    """
    by_id = {row.span_id: row for row in spans}
    servers = [row for row in spans if vllm.is_server_span(row.attributes)]
    server_rows = {id(row) for row in servers}
    owners: dict[bytes, bytes] = {}
    for server in servers:
        owner = _model_ancestor(server, by_id)
        if owner is not None:
            owners[server.span_id] = owner.span_id
    server_of = _latest_server_per_client(owners, by_id)
    resolved = []
    for row in spans:
        if row.span_id in owners:
            resolved.append(dataclasses.replace(row, kind=KIND_MODEL_SERVER))
        elif id(row) in server_rows:
            resolved.append(_server_as_model_call(row))
        elif row.kind == semconv.KIND_MODEL:
            attributes = canonical_attributes(row.attributes, row.duration_ns)
            matched = server_of.get(row.span_id)
            if matched is not None:
                attributes = _with_server_timing(attributes, matched)
            # Our SDK's spans are canonical already: keep the row rather than copy it.
            resolved.append(
                row if attributes == row.attributes else dataclasses.replace(row, attributes=attributes)
            )
        else:
            resolved.append(row)
    return resolved


def _model_ancestor(span: SpanRow, by_id: Mapping[bytes, SpanRow]) -> SpanRow | None:
    """The nearest stored ancestor that is a client-side model call, or None."""
    seen = {span.span_id}
    current = span
    while current.has_parent:
        parent = by_id.get(current.parent_span_id)
        if parent is None or parent.span_id in seen:
            return None
        if parent.kind == semconv.KIND_MODEL and not vllm.is_server_span(parent.attributes):
            return parent
        seen.add(parent.span_id)
        current = parent
    return None


def _latest_server_per_client(
    owners: Mapping[bytes, bytes], by_id: Mapping[bytes, SpanRow]
) -> dict[bytes, SpanRow]:
    """Per client call, its server span that ended last (a retried call has several)."""
    chosen: dict[bytes, SpanRow] = {}
    for server_id, client_id in owners.items():
        server = by_id[server_id]
        current = chosen.get(client_id)
        if current is None or (server.end_ns, server.span_id) > (current.end_ns, current.span_id):
            chosen[client_id] = server
    return chosen


def _with_server_timing(client: Mapping[str, str], server: SpanRow) -> dict[str, str]:
    """The client's attributes with the server's reported times; usage and model fill gaps."""
    merged = dict(client)
    for key in (
        semconv.PROVIDER_QUEUE_NS,
        semconv.PROVIDER_PREFILL_NS,
        semconv.PROVIDER_DECODE_NS,
        semconv.PROVIDER_SERVER_TOTAL_NS,
    ):
        merged.pop(key, None)
    merged.update({key: str(value) for key, value in vllm.server_timing(server.attributes).items()})
    for key, value in canonical_attributes(server.attributes, server.duration_ns).items():
        if key.startswith(("gen_ai.usage.", semconv.GEN_AI_RESPONSE_MODEL)):
            merged.setdefault(key, value)
    merged.setdefault(semconv.GEN_AI_PROVIDER_NAME, vllm.PROVIDER)
    return merged


def _server_as_model_call(row: SpanRow) -> SpanRow:
    """A vLLM span nobody called: a model call lasting the server's e2e, without network."""
    e2e = first_seconds_ns(row.attributes, vllm.GEN_AI_LATENCY_E2E)
    duration = e2e if e2e is not None else row.duration_ns
    attributes = canonical_attributes(row.attributes, duration)
    timing = vllm.server_timing(row.attributes)
    timing[semconv.PROVIDER_SERVER_TOTAL_NS] = duration
    attributes.update({key: str(value) for key, value in timing.items()})
    for key, value in vllm.server_stream_offsets(row.attributes).items():
        attributes.setdefault(key, str(value))
    attributes.setdefault(semconv.GEN_AI_PROVIDER_NAME, vllm.PROVIDER)
    return dataclasses.replace(row, kind=semconv.KIND_MODEL, duration_ns=duration, attributes=attributes)
