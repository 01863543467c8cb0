"""Trace-level reading: spans that only mean something together.

Three rules need the trace, all applied by :func:`resolve_trace`:

* **Tools inside an AI SDK call** (:func:`.aisdk.tools_beside_calls`): the AI SDK's legacy provider
  call stays open while its tools run; it is cut at its finish and its tools become its siblings.

* **Spans of the same call** (:mod:`.same_call`): when several instrumentations describe one model
  call, one span counts it and takes what it lacks from the others; the others own no time.
* **vLLM and SGLang server spans**: vLLM's ``llm_request`` span (SGLang's ``Req`` span) is a
  descendant of the client's model-call span. Its reported queue, prefill and decode replace
  whatever the client estimated for that call (SGLang's fill only what the client did not report:
  :mod:`.sglang`), network becomes client duration − server e2e, and the server span
  itself is not counted again (not as app time, not as a second model call). A server span with no
  client model call above it (the server called without trace context) is the model call itself:
  its duration is the server's e2e and it has no network.

Ancestors are found in one pass (:class:`.lineage.Lineage`), so a deep trace costs linear time.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Final

from latencylens import semconv
from latencylens_collector.analysis.conventions import aisdk, logfire, openlit, sglang, vllm
from latencylens_collector.analysis.conventions.lineage import Lineage
from latencylens_collector.analysis.conventions.reading import canonical_attributes
from latencylens_collector.analysis.conventions.same_call import (
    KIND_MODEL_WRAPPER,
    KIND_SAME_CALL,
    SameCalls,
    find_same_calls,
    is_application_work,
    is_client_call,
    merged_attributes,
)
from latencylens_collector.analysis.conventions.values import first_seconds_ns
from latencylens_collector.analysis.records import SpanRow

KIND_MODEL_SERVER: Final = "model_server"
"""In-memory kind of a server span whose timing was merged into its client's model call."""


def resolve_trace(spans: Sequence[SpanRow]) -> list[SpanRow]:
    """One trace's spans as attribution should see them (idempotent; the input is not changed).

    Model spans get canonical attributes (:func:`canonical_attributes`); spans of one call become
    one model call and :data:`KIND_SAME_CALL` spans below it, a model span around several calls
    becomes :data:`KIND_MODEL_WRAPPER` (application work); a client model call with a vLLM server
    span below it gets the server's timing; that server span becomes :data:`KIND_MODEL_SERVER`; a
    vLLM span without a client call becomes a model call of its own. First, what other spans say
    about a model span is read into it (Logfire's stream-end log, OpenLIT's HTTP child), and an AI
    SDK call's tools are moved out of it.
    """
    spans = aisdk.tools_beside_calls(openlit.with_stream_start(logfire.resolve(spans)))
    lineage = Lineage(spans, is_call=is_client_call, passable=is_application_work)
    calls = find_same_calls(lineage)
    servers = [row for row in spans if vllm.is_server_span(row.attributes)]
    server_rows = {id(row) for row in servers}
    sglang_servers = [row for row in servers if sglang.is_server_span(row.attributes)]
    stages = sglang.stages_below(sglang_servers, lineage.by_id) if sglang_servers else {}
    owners: dict[bytes, bytes] = {}
    for server in servers:
        client = _calling_model(server.span_id, lineage, calls)
        if client is not None:
            owners[server.span_id] = client
    server_of = _latest_server_per_client(owners, lineage.by_id)
    resolved = []
    for row in spans:
        parent = calls.parents.get(row.span_id, row.parent_span_id)
        if row.span_id in owners:
            resolved.append(dataclasses.replace(row, kind=KIND_MODEL_SERVER))
        elif id(row) in server_rows:
            resolved.append(_server_as_model_call(row, stages.get(row.span_id)))
        elif row.span_id in calls.wrapped:
            attributes = {**row.attributes, semconv.WRAPS_MODEL_CALLS: str(calls.wrapped[row.span_id])}
            resolved.append(dataclasses.replace(row, kind=KIND_MODEL_WRAPPER, attributes=attributes))
        elif row.span_id in calls.owner_of:
            attributes = {**row.attributes, semconv.SAME_CALL_AS: calls.owner_of[row.span_id].hex()}
            resolved.append(
                dataclasses.replace(row, kind=KIND_SAME_CALL, parent_span_id=parent, attributes=attributes)
            )
        elif row.kind == semconv.KIND_MODEL:
            attributes = canonical_attributes(row.attributes, row.duration_ns)
            others = calls.members.get(row.span_id)
            if others:
                attributes = merged_attributes(row, attributes, others)
            matched = server_of.get(row.span_id)
            if matched is not None:
                attributes = _with_server_timing(attributes, matched, stages.get(matched.span_id))
            # Our SDK's spans are canonical already: keep the row rather than copy it.
            if attributes == row.attributes and parent == row.parent_span_id:
                resolved.append(row)
            else:
                resolved.append(dataclasses.replace(row, parent_span_id=parent, attributes=attributes))
        else:
            resolved.append(row)
    return resolved


def _calling_model(server_id: bytes, lineage: Lineage, calls: SameCalls) -> bytes | None:
    """The model call a server span serves: the nearest client call above it, counted once."""
    client = lineage.nearest_call(server_id)
    while client is not None and client in calls.wrapped:
        client = lineage.nearest_call(client)
    return None if client is None else calls.owner(client)


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


_SERVER_TIMING_KEYS: Final = (
    semconv.PROVIDER_QUEUE_NS,
    semconv.PROVIDER_PREFILL_NS,
    semconv.PROVIDER_DECODE_NS,
    semconv.PROVIDER_INFERENCE_NS,
    semconv.PROVIDER_SERVER_TOTAL_NS,
)


def _server_reading(
    attributes: Mapping[str, str], stages: Mapping[str, int] | None
) -> tuple[dict[str, int], str]:
    """A server span's reported timing and the provider it names: SGLang's (with the durations of
    its stage spans) or vLLM's."""
    if sglang.is_server_span(attributes):
        return sglang.server_timing(attributes, stages), sglang.PROVIDER
    return vllm.server_timing(attributes), vllm.PROVIDER


def _with_server_timing(
    client: Mapping[str, str], server: SpanRow, stages: Mapping[str, int] | None
) -> dict[str, str]:
    """The client's attributes with the server's reported times; usage and model fill gaps.

    vLLM's times replace the client's (they are the same server's, and finer than any estimate).
    SGLang's spans report what its replies' ``meta_info`` does (queue, prefill, decode, total) and
    sometimes less, so the times the client read from ``meta_info`` are kept and the spans fill
    only what they lack."""
    merged = dict(client)
    timing, provider = _server_reading(server.attributes, stages)
    if provider == sglang.PROVIDER:
        for key, ns in timing.items():
            merged.setdefault(key, str(ns))
    else:
        for key in _SERVER_TIMING_KEYS:
            merged.pop(key, None)
        merged.update({key: str(value) for key, value in timing.items()})
    for key, value in canonical_attributes(server.attributes, server.duration_ns).items():
        if key.startswith(("gen_ai.usage.", semconv.GEN_AI_RESPONSE_MODEL)):
            merged.setdefault(key, value)
    merged.setdefault(semconv.GEN_AI_PROVIDER_NAME, provider)
    merged.update(vllm.reported_first_token(merged, server.attributes))  # when the client has none
    return merged


def _server_as_model_call(row: SpanRow, stages: Mapping[str, int] | None) -> SpanRow:
    """A server span nobody called: a model call lasting the server's e2e, without network."""
    e2e = first_seconds_ns(row.attributes, vllm.GEN_AI_LATENCY_E2E)
    duration = e2e if e2e is not None else row.duration_ns
    attributes = canonical_attributes(row.attributes, duration)
    timing, provider = _server_reading(row.attributes, stages)
    timing[semconv.PROVIDER_SERVER_TOTAL_NS] = duration
    attributes.update({key: str(value) for key, value in timing.items()})
    attributes.update(vllm.reported_first_token(attributes, row.attributes))
    attributes.setdefault(semconv.GEN_AI_PROVIDER_NAME, provider)
    return dataclasses.replace(row, kind=semconv.KIND_MODEL, duration_ns=duration, attributes=attributes)
