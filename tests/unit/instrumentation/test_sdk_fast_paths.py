"""The cheap readers give exactly what the general ones give.

Per-call and per-chunk readers take shortcuts for the shapes providers actually send (one
``attrgetter`` for several fields of an SDK object, a one-pass attribute dict for a complete Groq
reply, ``getattr`` on chunk types already seen); these tests hold each shortcut to the general path
on complete, partial and odd inputs, with real ``groq`` and ``openai`` SDK objects.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from typing import Any

import openai.types.chat as openai_chat
import pydantic
import pytest
from groq.types.chat import ChatCompletion as GroqChatCompletion
from groq.types.chat import ChatCompletionChunk as GroqChatCompletionChunk
from provider_payloads import GROQ_USAGE

from latencylens import semconv
from latencylens.providers import get_adapter
from latencylens.providers._base import CheckedAttributes, field_of, fields_of
from latencylens.providers._chat import has_content
from latencylens.providers.groq import GroqAdapter

REPLY: dict[str, Any] = {
    "id": "chatcmpl-7eb08824",
    "object": "chat.completion",
    "created": 1770770842,
    "model": "llama-3.3-70b-versatile",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "Queue."}, "finish_reason": "stop"},
        {"index": 1, "message": {"role": "assistant", "content": "Decode."}, "finish_reason": "length"},
    ],
    "usage": dict(GROQ_USAGE),
    "x_groq": {"id": "req_01kh52ndshfr2azv0xe6tnv4fx"},
}


def _variant(change: str) -> dict[str, Any]:
    """REPLY with one thing changed; each one must leave the one-pass path or stay equivalent."""
    reply = copy.deepcopy(REPLY)
    usage = reply["usage"]
    if change == "no total_time":
        del usage["total_time"]
    elif change == "integer queue_time":
        usage["queue_time"] = 0
    elif change == "no usage":
        del reply["usage"]
    elif change == "token details":
        usage["prompt_tokens_details"] = {"cached_tokens": 40}
        usage["completion_tokens_details"] = {"reasoning_tokens": 12}
    elif change == "timed x_groq.usage":
        reply["x_groq"]["usage"] = dict(GROQ_USAGE, queue_time=0.5)
    elif change == "cache-stat x_groq.usage":
        reply["x_groq"]["usage"] = {"dram_cached_tokens": 10, "sram_cached_tokens": 0}
    elif change == "no finish reason":
        for choice in reply["choices"]:
            choice["finish_reason"] = None
    elif change == "no id":
        del reply["id"]
    elif change == "string token count":
        usage["prompt_tokens"] = "45"
    return reply


CHANGES = [
    "none",
    "no total_time",
    "integer queue_time",
    "no usage",
    "token details",
    "timed x_groq.usage",
    "cache-stat x_groq.usage",
    "no finish reason",
    "no id",
    "string token count",
]


def _shapes(reply: dict[str, Any]) -> Iterator[Any]:
    """The reply as a dict and as each SDK's object (where that SDK accepts it)."""
    yield reply
    for model in (GroqChatCompletion, openai_chat.ChatCompletion):
        try:
            yield model.model_validate(reply)
        except pydantic.ValidationError:  # e.g. no ``id``: an SDK would not hand that back
            pass


def _holds_its_claim(attributes: dict[str, Any]) -> bool:
    """Whether ``attributes``, if the adapter marked them :class:`CheckedAttributes`, are what the
    mark promises (so they may be stored without a look at each value); True for a plain dict."""
    if type(attributes) is not CheckedAttributes:
        return True
    for key, value in attributes.items():
        if type(key) is not str or not key:
            return False
        if key in attributes.lists:
            if type(value) is not list or not value or any(type(item) is not str for item in value):
                return False
        elif type(value) not in (str, int, float, bool):
            return False
    return all(key in attributes for key in attributes.lists)


@pytest.mark.parametrize("change", CHANGES)
def test_fast_groq_response_attributes_equal_extract(change: str) -> None:
    adapter = GroqAdapter()
    for response in _shapes(_variant(change)):
        for headers in (None, {}, {"x-request-id": "req_1", "openai-processing-ms": "120"}):
            expected = adapter.extract(response, headers).to_attributes()
            attributes = adapter.response_attributes(response, headers)
            assert attributes == expected, (change, type(response))
            assert _holds_its_claim(attributes), (change, type(response))


class _Name(str):
    """A ``str`` subclass, as an SDK could hand back for a model name: not a checked value."""


def test_fast_groq_attributes_are_marked_checked_only_when_every_value_was_checked() -> None:
    adapter = GroqAdapter()
    # the usual reply, as the SDK's object and as a dict: checked, finish reasons and fields listed
    for response in (GroqChatCompletion.model_validate(REPLY), copy.deepcopy(REPLY)):
        attributes = adapter.response_attributes(response)
        assert type(attributes) is CheckedAttributes
        assert attributes.lists == (
            semconv.GEN_AI_RESPONSE_FINISH_REASONS,
            semconv.PROVIDER_FIELDS_REPORTED,
        )
    odd = copy.deepcopy(REPLY)
    odd["model"] = _Name("llama-3.3-70b-versatile")
    attributes = adapter.response_attributes(odd)
    assert type(attributes) is dict  # the same attributes, stored after a look at each value
    assert attributes == adapter.extract(odd).to_attributes()
    # a stream whose chunks name the model with such a string: its usage is read the fast way, but
    # not marked checked
    state = adapter.new_stream_state()
    for chunk in _stream_variant("none"):
        chunk["model"] = _Name(chunk["model"])
        state.record_chunk(chunk)
    attributes = state.usage_attributes()
    assert type(attributes) is dict
    assert attributes == state.usage().to_attributes()


# GROQ_USAGE worked by hand: queue 0.041905864 s = 41_905_864 ns; prompt 0.003940145 s = 3_940_145 ns;
# completion 2.652230333 s = 2_652_230_333 ns; server total = queue + total_time
# = 41_905_864 + 2_656_170_478 = 2_698_076_342 ns (derived: Groq's total excludes the queue).
USAGE_WORKED: dict[str, Any] = {
    semconv.GEN_AI_USAGE_INPUT_TOKENS: 45,
    semconv.GEN_AI_USAGE_OUTPUT_TOKENS: 662,
    semconv.PROVIDER_QUEUE_NS: 41_905_864,
    semconv.PROVENANCE_QUEUE: "reported",
    semconv.PROVIDER_PREFILL_NS: 3_940_145,
    semconv.PROVENANCE_PREFILL: "reported",
    semconv.PROVIDER_DECODE_NS: 2_652_230_333,
    semconv.PROVENANCE_DECODE: "reported",
    semconv.PROVIDER_SERVER_TOTAL_NS: 2_698_076_342,
    semconv.PROVENANCE_SERVER_TOTAL: "derived",
}
REPORTED_WORKED = [
    "usage.prompt_tokens",
    "usage.completion_tokens",
    "usage.queue_time",
    "usage.prompt_time",
    "usage.completion_time",
    "usage.total_time",
]
"""The fields such a usage object reports, in the order they are noted."""


def test_fast_groq_response_attributes_values_worked_by_hand() -> None:
    attributes = GroqAdapter().response_attributes(GroqChatCompletion.model_validate(REPLY))
    assert attributes == {
        **USAGE_WORKED,
        semconv.GEN_AI_RESPONSE_MODEL: "llama-3.3-70b-versatile",
        semconv.GEN_AI_RESPONSE_ID: "chatcmpl-7eb08824",
        semconv.GEN_AI_RESPONSE_FINISH_REASONS: ["stop", "length"],
        semconv.PROVIDER_FIELDS_REPORTED: REPORTED_WORKED,
    }


@pytest.mark.parametrize("provider", ["openai", "cerebras", "vllm", "ollama", "anthropic"])
def test_fast_default_response_attributes_are_extract(provider: str) -> None:
    adapter = get_adapter(provider)
    assert adapter.response_attributes(REPLY) == adapter.extract(REPLY).to_attributes()


class _Headers(Mapping[str, Any]):
    """A mapping that is not a dict (like httpx ``Headers``), with one attribute of its own."""

    model = "attribute wins over key"

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)


class _Bare:
    """An object with some of the fields, as attributes."""

    def __init__(self) -> None:
        self.id = "x"


def test_fast_fields_of_equals_field_of_for_every_shape() -> None:
    names = ("id", "model", "choices", "usage")
    pydantic = GroqChatCompletion.model_validate(REPLY)
    for obj in (REPLY, pydantic, None, _Headers({"id": "h", "usage": 1}), _Bare(), _Bare(), 7):
        # _Bare twice: the second read goes through the remembered "lacks a field" path.
        assert list(fields_of(obj, names)) == [field_of(obj, name) for name in names], obj


class _Reply(pydantic.BaseModel):
    """An SDK model as the openai SDK makes them: undeclared fields kept as extras; a property."""

    model_config = pydantic.ConfigDict(extra="allow")
    id: str = "r"
    usage: dict[str, int] | None = None

    @property
    def timings(self) -> str:  # a class attribute: never read from the extras
        return "property"


class _Computed(_Reply):
    """A model whose own ``__getattr__`` answers a name it does not declare, for some instances."""

    def __getattr__(self, name: str) -> Any:
        if name == "metrics":
            return "computed" if self.id == "computes" else None
        return super().__getattr__(name)


def test_fast_field_of_reads_an_undeclared_field_as_getattr_does() -> None:
    """Once a name is known to be no field and no class attribute of a model, ``field_of`` reads it
    from the extras directly: the same value, before and after, whether the chunk has it or not."""
    without, with_metrics = _Reply(), _Reply(metrics={"queue_time_ms": 12.3})  # type: ignore[call-arg]
    odd = _Reply(metrics=None, timings="extra")  # type: ignore[call-arg]
    for _ in range(2):  # the second pass takes the remembered path
        for obj in (without, with_metrics, odd, _Computed(), _Computed(id="computes")):
            for name in ("metrics", "usage", "id", "timings", "_private", "model_fields_set"):
                assert field_of(obj, name) == getattr(obj, name, None), (obj, name)
    assert field_of(with_metrics, "metrics") == {"queue_time_ms": 12.3}
    assert field_of(odd, "timings") == "property"  # the property wins, as with getattr
    # a model's own __getattr__ is always asked, even after an instance answered None
    assert (field_of(_Computed(), "metrics"), field_of(_Computed(id="computes"), "metrics")) == (
        None,
        "computed",
    )
    chunk = openai_chat.ChatCompletionChunk.model_validate({**_chunk({}), "metrics": {"a": 1}})
    plain = openai_chat.ChatCompletionChunk.model_validate(_chunk({"content": "x"}))
    for _ in range(2):
        assert (field_of(plain, "metrics"), field_of(chunk, "metrics")) == (None, {"a": 1})
        assert list(fields_of(plain, ("usage", "metrics"))) == [None, None]


def _chunk(delta: dict[str, Any], finish: str | None = None, usage: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    if usage:
        body["x_groq"] = {"id": "req_1", "usage": dict(GROQ_USAGE)}
    return body


def test_fast_stream_state_reads_each_chunk_type_like_has_content() -> None:
    bodies = [
        _chunk({"role": "assistant"}),
        _chunk({"content": ""}),
        _chunk({"content": "a"}),
        _chunk({"content": "b"}),
        _chunk({}, "stop", usage=True),
    ]
    groq_chunks = [GroqChatCompletionChunk.model_validate(body) for body in bodies]
    openai_chunks = [openai_chat.ChatCompletionChunk.model_validate(body) for body in bodies]
    # Types change mid-stream (SDK objects, then dicts, then another SDK's objects): each chunk is
    # still judged on its own, and usage comes from the last usage chunk.
    mixed = groq_chunks[:2] + bodies[2:3] + openai_chunks[3:]
    for chunks in (groq_chunks, openai_chunks, bodies, mixed):
        state = get_adapter("groq").new_stream_state()
        assert [state.record_chunk(chunk) for chunk in chunks] == [has_content(chunk) for chunk in chunks]
        assert [has_content(chunk) for chunk in chunks] == [False, False, True, True, False]
        usage = state.usage()
        assert (usage.input_tokens, usage.output_tokens, usage.queue_ns) == (45, 662, 41_905_864)
        assert usage.finish_reasons == ["stop"]


def _stream_variant(change: str) -> list[dict[str, Any]]:
    """A Groq stream (content chunks, then a final chunk with ``x_groq.usage``) with one thing
    changed; the final chunk's usage gets the same changes as a complete reply's (``_variant``)."""
    reply = _variant(change if change in CHANGES else "none")
    first = _chunk({"role": "assistant"})
    final = _chunk({}, "stop")
    final["x_groq"] = {"id": "req_1", "usage": reply["usage"]} if "usage" in reply else {"id": "req_1"}
    if change == "timed x_groq.usage":  # a stream with both: the top-level one as include_usage sends it
        final["usage"] = dict(GROQ_USAGE)
    elif change == "top-level usage only":
        final["usage"] = final["x_groq"].pop("usage")
    elif change == "cache-stat x_groq.usage":
        final["usage"] = dict(GROQ_USAGE)
        final["x_groq"]["usage"] = reply["x_groq"]["usage"]
    elif change == "x_groq.usage with total_time only":  # still the timed one: read from there
        final["usage"] = dict(GROQ_USAGE)
        final["x_groq"]["usage"] = {"total_time": 2.656170478}
    chunks = [first, _chunk({"content": "a"}), final]
    if change == "no finish reason":
        final["choices"][0]["finish_reason"] = None
    elif change == "no id":
        for chunk in chunks:
            del chunk["id"]
    elif change == "two finish reasons":
        first["choices"].append({"index": 1, "delta": {}, "finish_reason": "length"})
    return chunks


def _stream_shapes(chunks: list[dict[str, Any]]) -> Iterator[list[Any]]:
    yield chunks
    for model in (GroqChatCompletionChunk, openai_chat.ChatCompletionChunk):
        try:
            yield [model.model_validate(chunk) for chunk in chunks]
        except pydantic.ValidationError:
            pass


STREAM_CHANGES = [*CHANGES, "top-level usage only", "two finish reasons", "x_groq.usage with total_time only"]


@pytest.mark.parametrize("change", STREAM_CHANGES)
def test_fast_groq_stream_attributes_equal_usage(change: str) -> None:
    seen = 0
    for chunks in _stream_shapes(_stream_variant(change)):
        state = GroqAdapter().new_stream_state()
        for chunk in chunks:
            state.record_chunk(chunk)
        expected = state.usage().to_attributes()
        assert state.usage_attributes() == expected, (change, type(chunks[0]))
        assert _holds_its_claim(state.usage_attributes()), (change, type(chunks[0]))
        assert state.usage_attributes() is not state.usage_attributes()  # a fresh dict each time
        seen += 1
    assert seen >= (1 if change == "no id" else 2)  # dicts and SDK objects (no SDK takes a chunk without id)


def test_fast_groq_stream_attributes_values_worked_by_hand() -> None:
    state = GroqAdapter().new_stream_state()
    for chunk in _stream_variant("two finish reasons"):
        state.record_chunk(GroqChatCompletionChunk.model_validate(chunk))
    # The same usage as REPLY (see the reply's worked values), read from x_groq.usage; the id and
    # model come from the first chunk, the finish reasons from every chunk in order.
    assert state.usage_attributes() == {
        **USAGE_WORKED,
        semconv.GEN_AI_RESPONSE_MODEL: "m",
        semconv.GEN_AI_RESPONSE_ID: "chatcmpl-1",
        semconv.GEN_AI_RESPONSE_FINISH_REASONS: ["length", "stop"],
        semconv.PROVIDER_FIELDS_REPORTED: [f"x_groq.{path}" for path in REPORTED_WORKED],
    }


@pytest.mark.parametrize(
    "provider", ["openai", "cerebras", "vllm", "tgi", "ollama", "anthropic", "bedrock", "gemini"]
)
def test_default_stream_attributes_are_usage(provider: str) -> None:
    state = get_adapter(provider).new_stream_state()
    for chunk in _stream_variant("top-level usage only"):
        state.record_chunk(chunk)
    assert state.usage_attributes() == state.usage().to_attributes()
