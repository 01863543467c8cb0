"""A call's result attributes stored directly on the SDK's span equal what ``set_attributes`` stores.

``set_result_attributes`` skips the SDK's per-value cleaning where it cannot change anything; these
tests hold it to ``Span.set_attributes`` on real SDK spans: same values and types (lists become
tuples), same order, same limits (length, count), the same warning on an ended span, and the
public method for any span that is not the SDK's own.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk.trace import Span as SdkSpan
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.trace import INVALID_SPAN_CONTEXT, NonRecordingSpan

from latencylens._attributes import _store_directly, set_result_attributes
from latencylens.providers._base import CheckedAttributes

# What a Groq reply gives (``GroqAdapter.response_attributes``), plus a float, a bool and a key the
# span already has from its start (set again: it moves to the end, as in the SDK).
RESULT: dict[str, Any] = {
    "gen_ai.usage.input_tokens": 45,
    "gen_ai.usage.output_tokens": 662,
    "latencylens.provider.queue_ns": 41_905_864,
    "latencylens.provenance.queue": "reported",
    "gen_ai.response.model": "llama-3.3-70b-versatile",
    "gen_ai.response.finish_reasons": ["stop", "length"],
    "latencylens.provider.fields_reported": ["usage.prompt_tokens", "usage.queue_time"],
    "latencylens.decode_tokens_per_second": 249.6,
    "gen_ai.request.stream": False,
    "gen_ai.operation.name": "chat",
}
START = {"latencylens.span.kind": "model", "gen_ai.operation.name": "chat", "gen_ai.provider.name": "groq"}


def _pair(limits: SpanLimits | None = None) -> tuple[Any, Any]:
    tracer = TracerProvider(span_limits=limits or SpanLimits()).get_tracer("test")
    return tracer.start_span("ours", attributes=START), tracer.start_span("sdk", attributes=START)


def _stored(span: Any) -> list[tuple[str, Any]]:
    return list(span.attributes.items())


def test_stored_directly_as_set_attributes_stores_them() -> None:
    ours, sdk = _pair()
    assert _store_directly(ours, dict(RESULT))  # the direct path, not the fallback
    sdk.set_attributes(RESULT)
    assert _stored(ours) == _stored(sdk)
    assert ours.attributes["gen_ai.response.finish_reasons"] == ("stop", "length")
    assert type(ours.attributes["gen_ai.response.finish_reasons"]) is tuple
    assert list(ours.attributes)[-1] == "gen_ai.operation.name"  # set again: moved to the end


def test_checked_attributes_are_stored_as_set_attributes_stores_them() -> None:
    ours, sdk = _pair()
    checked = CheckedAttributes(RESULT)
    checked.lists = ("gen_ai.response.finish_reasons", "latencylens.provider.fields_reported")
    assert _store_directly(ours, checked)
    sdk.set_attributes(RESULT)
    assert _stored(ours) == _stored(sdk)
    assert type(ours.attributes["latencylens.provider.fields_reported"]) is tuple  # not the list given


def test_the_decorator_path_stores_the_same_on_an_sdk_span() -> None:
    ours, sdk = _pair()
    set_result_attributes(ours, dict(RESULT))
    sdk.set_attributes(RESULT)
    assert _stored(ours) == _stored(sdk)
    ours.end()
    sdk.end()
    assert dict(ours.attributes) == dict(sdk.attributes)


def test_a_string_length_limit_is_applied_through_the_sdk() -> None:
    ours, sdk = _pair(SpanLimits(max_span_attribute_length=5))
    assert not _store_directly(ours, dict(RESULT))
    set_result_attributes(ours, dict(RESULT))
    sdk.set_attributes(RESULT)
    assert _stored(ours) == _stored(sdk)
    assert ours.attributes["gen_ai.response.model"] == "llama"


def test_a_span_without_room_drops_as_the_sdk_does() -> None:
    ours, sdk = _pair(SpanLimits(max_span_attributes=6))
    set_result_attributes(ours, dict(RESULT))
    sdk.set_attributes(RESULT)
    assert _stored(ours) == _stored(sdk)
    assert len(ours.attributes) == 6
    assert ours.dropped_attributes == sdk.dropped_attributes > 0


@pytest.mark.parametrize(
    "odd",
    [
        {"k": None},
        {"k": {"nested": 1}},
        {"k": [1, None]},
        {"k": ["a", 1]},
        {"k": [True, 1]},
        {"k": []},
        {"k": object()},
        {"": 1},
        {"k": b"bytes"},
    ],
    ids=[
        "none",
        "mapping",
        "list with none",
        "mixed list",
        "bools and ints",
        "empty list",
        "object",
        "empty key",
        "bytes",
    ],
)
def test_values_outside_the_plain_types_take_set_attributes(odd: dict[str, Any]) -> None:
    ours, sdk = _pair()
    assert not _store_directly(ours, {**RESULT, **odd})
    assert len(ours.attributes) == len(START)  # nothing stored by the refused direct path
    set_result_attributes(ours, {**RESULT, **odd})
    sdk.set_attributes({**RESULT, **odd})
    assert _stored(ours) == _stored(sdk)


def test_an_ended_span_is_left_as_the_sdk_leaves_it(caplog: pytest.LogCaptureFixture) -> None:
    ours, _ = _pair()
    ours.end()
    with caplog.at_level(logging.WARNING):
        set_result_attributes(ours, dict(RESULT))
    assert _stored(ours) == list(START.items())
    assert "Setting attribute on ended span." in caplog.text


def test_a_non_recording_span_takes_its_own_method() -> None:
    span = NonRecordingSpan(INVALID_SPAN_CONTEXT)
    set_result_attributes(span, dict(RESULT))  # a no-op, without error
    assert not span.is_recording()


class _CountingSpan(SdkSpan):
    """Another library's span built on the SDK's, with its own ``set_attributes``."""

    calls = 0

    def set_attributes(self, attributes: Any) -> None:
        type(self).calls += 1
        super().set_attributes(attributes)


def test_a_subclass_from_elsewhere_gets_its_own_set_attributes() -> None:
    span = _CountingSpan("sub", INVALID_SPAN_CONTEXT)
    span.start()
    set_result_attributes(span, dict(RESULT))
    assert _CountingSpan.calls == 1
    assert span.attributes["gen_ai.response.finish_reasons"] == ("stop", "length")


class _OtherAttributes(BoundedAttributes):
    """What a later SDK might keep a span's attributes in: not the class the direct path knows."""


def test_an_sdk_span_keeping_attributes_in_another_class_takes_set_attributes() -> None:
    ours, sdk = _pair()
    ours._attributes = _OtherAttributes(128, dict(START), immutable=False)
    assert not _store_directly(ours, dict(RESULT))
    set_result_attributes(ours, dict(RESULT))
    sdk.set_attributes(RESULT)
    assert _stored(ours) == _stored(sdk)


# A stream's own attributes (counts, times, how it ended), one of them also in RESULT: set again,
# it moves to the end and takes the later value, as a second ``set_attributes`` would do.
OWN: dict[str, Any] = {
    "latencylens.stream.chunks": 242,
    "latencylens.stream.completed": True,
    "gen_ai.response.time_to_first_chunk": 0.0419,
    "latencylens.stream.end_reason": "completed",
    "gen_ai.request.stream": True,
}


@pytest.mark.parametrize(
    "limits",
    [None, SpanLimits(max_span_attribute_length=5), SpanLimits(max_span_attributes=12)],
    ids=["no limit", "length limit", "count limit"],
)
def test_own_attributes_are_stored_after_the_others_as_a_second_set_attributes(
    limits: SpanLimits | None,
) -> None:
    ours, sdk = _pair(limits)
    set_result_attributes(ours, dict(RESULT), dict(OWN))
    sdk.set_attributes(RESULT)
    sdk.set_attributes(OWN)
    assert _stored(ours) == _stored(sdk)
    assert ours.dropped_attributes == sdk.dropped_attributes
    if limits is None:
        assert list(ours.attributes)[-1] == "gen_ai.request.stream"
        assert ours.attributes["gen_ai.request.stream"] is True


def test_own_attributes_reach_another_span_through_its_own_method() -> None:
    span = _CountingSpan("sub", INVALID_SPAN_CONTEXT)
    span.start()
    before = _CountingSpan.calls
    set_result_attributes(span, dict(RESULT), dict(OWN))
    assert _CountingSpan.calls == before + 2
    assert span.attributes["latencylens.stream.chunks"] == 242
