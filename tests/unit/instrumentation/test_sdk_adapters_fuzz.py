"""Every provider adapter against hostile variants of its documented payloads.

A reply or stream chunk with one value swapped for another type (``None``, a list, a dict, a
string, NaN, infinity, a negative or a huge number) or one key deleted must still be read: the
adapter raises nothing (the stream proxy would catch it, but the whole call's usage would be lost
with it), and what it returns is a valid span attribute set: non-empty string keys, values of the
types OpenTelemetry stores, integers that fit OTLP's int64 (the exporter drops any other, logging an
error), counts and durations as ints of at least zero, and an adapter's
:class:`CheckedAttributes` exactly as its contract says (they are stored without a look at each).
An unknown key added anywhere changes nothing that is read.

Each property runs a fixed number of examples from a fixed seed (``derandomize``), so the suite is
reproducible; ``--hypothesis-seed=random`` explores further.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fuzz_settings import reproducible
from hypothesis import given
from hypothesis import strategies as st
from provider_payloads import (
    TGI_HEADERS,
    anthropic_message,
    anthropic_stream_events,
    bedrock_converse,
    cerebras_completion,
    gemini_response,
    groq_completion,
    groq_stream_chunk,
    llamacpp_completion,
    llamacpp_native,
    llamacpp_native_batch,
    llamacpp_native_chunks,
    nim_chat_completion,
    ollama_final,
    openai_chat_completion,
    openai_chunk,
    openai_response,
    openai_response_events,
    openai_usage_chunk,
    sglang_batch_chunks,
    sglang_batch_generate,
    sglang_chat_completion,
    sglang_generate,
    sglang_generate_chunks,
    tgi_chat_completion,
    vllm_completion,
)

from latencylens.providers import get_adapter
from latencylens.providers._base import CheckedAttributes

FUZZ = reproducible(60)

Payload = Callable[[], Any]

REPLIES: dict[str, list[Payload]] = {
    "openai": [openai_chat_completion, openai_response],
    "groq": [groq_completion],
    "cerebras": [cerebras_completion],
    "anthropic": [anthropic_message],
    "ollama": [ollama_final, lambda: ollama_final("chat")],
    "llama.cpp": [llamacpp_completion, llamacpp_native, llamacpp_native_batch],
    "tgi": [tgi_chat_completion],
    "vllm": [vllm_completion],
    "aws.bedrock": [bedrock_converse],
    "gcp.gemini": [lambda: gemini_response("Paris.")],
    "sglang": [lambda: sglang_generate(True), sglang_batch_generate, lambda: sglang_chat_completion(True)],
    "nim": [nim_chat_completion],
}
"""Each adapter's documented non-streamed replies (``tests/support/provider_payloads.py``)."""

STREAMS: dict[str, list[Payload]] = {
    "openai": [
        lambda: [
            openai_chunk({"role": "assistant", "content": ""}),
            openai_chunk({"content": "Hi"}),
            openai_usage_chunk(),
        ],
        lambda: [event for _, event in openai_response_events(["Hel", "lo"])],
    ],
    "groq": [
        lambda: [
            groq_stream_chunk({"role": "assistant", "content": ""}),
            groq_stream_chunk({"content": "Hi"}),
            groq_stream_chunk({}, finish="stop", final=True),
        ]
    ],
    "anthropic": [lambda: [event for _, event in anthropic_stream_events(["Hel", "lo"])]],
    "llama.cpp": [lambda: llamacpp_native_chunks(["Hel", "lo"])],
    "sglang": [lambda: sglang_generate_chunks(["Hel", "Hello"]), sglang_batch_chunks],
}
"""Each adapter's documented streams, one chunk or event object per item."""

HOSTILE = st.sampled_from(
    [
        None,
        True,
        0,
        -1,
        -2.5,
        2**70,
        10**18 + 1,
        1e300,
        float("nan"),
        float("inf"),
        float("-inf"),
        "",
        "x",
        "12",
        "1e999",
        [],
        [None],
        [1, "a", {}],
        {},
        {"a": None},
        [[[[]]]],
    ]
)


def _paths(node: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every place in a JSON tree below its root: dict keys and list indices."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield (*path, key)
            yield from _paths(value, (*path, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield (*path, index)
            yield from _paths(value, (*path, index))


def _containers(node: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every dict in a JSON tree, the root included."""
    if isinstance(node, dict):
        yield path
        for key, value in node.items():
            yield from _containers(value, (*path, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _containers(value, (*path, index))


def _at(node: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        node = node[step]
    return node


@st.composite
def _mutated(draw: st.DrawFn, payload: Any) -> Any:
    """``payload`` with one value replaced by a hostile one, or one dict key deleted."""
    tree = copy.deepcopy(payload)
    paths = list(_paths(tree))
    path = draw(st.sampled_from(paths))
    parent = _at(tree, path[:-1])
    if isinstance(parent, dict) and draw(st.booleans()):
        del parent[path[-1]]
    else:
        parent[path[-1]] = draw(HOSTILE)
    return tree


@st.composite
def _with_unknown_key(draw: st.DrawFn, payload: Any) -> Any:
    """``payload`` with a key no provider documents added to one of its objects."""
    tree = copy.deepcopy(payload)
    _at(tree, draw(st.sampled_from(list(_containers(tree)))))["zz_not_a_field"] = draw(HOSTILE)
    return tree


SCALARS = (str, int, float, bool)


def _assert_valid(attributes: dict[str, Any]) -> None:
    """Attributes OpenTelemetry stores as given; provider durations are ns as ints ≥ 0."""
    for key, value in attributes.items():
        assert type(key) is str and key, key
        if isinstance(value, (list, tuple)):
            assert value, f"{key}: an empty list"
            assert len({type(item) for item in value}) == 1, f"{key}: {value!r}"
            assert type(value[0]) in SCALARS, f"{key}: {value!r}"
        else:
            assert type(value) in SCALARS, f"{key}: {value!r}"
        if type(value) is int:
            assert -(2**63) <= value < 2**63, f"{key}: {value!r} is no OTLP int64"
        if key.startswith("latencylens.provider.") and key.endswith("_ns"):
            assert type(value) is int and value >= 0, f"{key}: {value!r}"
        if key.startswith("gen_ai.usage.") and key.endswith("_tokens"):
            assert type(value) is int and value >= 0, f"{key}: {value!r}"
    if type(attributes) is CheckedAttributes:
        for key, value in attributes.items():
            if key in attributes.lists:
                assert type(value) is list and value and all(type(item) is str for item in value), key
            else:
                assert type(value) in SCALARS, f"{key}: {value!r}"


def _read_reply(provider: str, reply: Any) -> dict[str, Any]:
    adapter = get_adapter(provider)
    headers = TGI_HEADERS if provider == "tgi" else None
    attributes = adapter.response_attributes(reply, headers)
    _assert_valid(attributes)
    _assert_valid(adapter.extract(reply, headers).to_attributes())
    return attributes


def _read_stream(provider: str, chunks: list[Any]) -> tuple[list[bool], dict[str, Any]]:
    state = get_adapter(provider).new_stream_state()
    content = [state.record_chunk(chunk) for chunk in chunks]
    attributes = state.usage_attributes()
    _assert_valid(attributes)
    return content, attributes


REPLY_CASES = [(provider, payload) for provider, payloads in REPLIES.items() for payload in payloads]
STREAM_CASES = [(provider, payload) for provider, payloads in STREAMS.items() for payload in payloads]


def _case_id(case: tuple[str, Payload]) -> str:
    return case[0]


@pytest.mark.parametrize("case", REPLY_CASES, ids=_case_id)
def test_a_documented_reply_reads_to_valid_attributes(case: tuple[str, Payload]) -> None:
    """The unmutated payloads, first: the properties below start from readings that hold."""
    provider, payload = case
    assert _read_reply(provider, payload())  # every documented reply reports something


@pytest.mark.parametrize("case", REPLY_CASES, ids=_case_id)
@FUZZ
@given(data=st.data())
def test_a_reply_with_one_hostile_value_is_read_without_raising(
    case: tuple[str, Payload], data: st.DataObject
) -> None:
    provider, payload = case
    _read_reply(provider, data.draw(_mutated(payload())))


@pytest.mark.parametrize("case", REPLY_CASES, ids=_case_id)
@FUZZ
@given(data=st.data())
def test_an_unknown_key_in_a_reply_changes_nothing(case: tuple[str, Payload], data: st.DataObject) -> None:
    provider, payload = case
    expected = _read_reply(provider, payload())
    assert _read_reply(provider, data.draw(_with_unknown_key(payload()))) == expected


@pytest.mark.parametrize("case", STREAM_CASES, ids=_case_id)
@FUZZ
@given(data=st.data())
def test_a_stream_with_one_hostile_value_is_read_without_raising(
    case: tuple[str, Payload], data: st.DataObject
) -> None:
    provider, payload = case
    _read_stream(provider, data.draw(_mutated(payload())))


@pytest.mark.parametrize("case", STREAM_CASES, ids=_case_id)
@FUZZ
@given(data=st.data())
def test_an_unknown_key_in_a_stream_changes_nothing(case: tuple[str, Payload], data: st.DataObject) -> None:
    provider, payload = case
    expected = _read_stream(provider, payload())
    assert _read_stream(provider, data.draw(_with_unknown_key(payload()))) == expected
