"""Provider adapters against dicts and real SDK objects (groq and openai types)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import openai.types.chat as openai_chat
import pytest
from groq.types.chat import ChatCompletion as GroqChatCompletion
from groq.types.chat import ChatCompletionChunk as GroqChatCompletionChunk
from opentelemetry.sdk.trace import ReadableSpan
from provider_payloads import (
    NIM_STATS,
    SGLANG_META,
    llamacpp_native,
    llamacpp_native_chunks,
    nim_chat_completion,
    sglang_chat_completion,
    sglang_generate,
)

import latencylens
from latencylens import semconv
from latencylens.providers import get_adapter, known_providers
from latencylens.providers._base import seconds_to_ns
from latencylens.providers.groq import GroqAdapter
from latencylens.providers.openai import OpenAIAdapter

Spans = Callable[[], list[ReadableSpan]]

# The Groq API reference's non-streaming example (content trimmed).
GROQ_REFERENCE: dict[str, Any] = {
    "id": "chatcmpl-f51b2cd2-bef7-417e-964e-a08f0b513c22",
    "object": "chat.completion",
    "created": 1730241104,
    "model": "openai/gpt-oss-20b",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "Fast models..."}, "finish_reason": "stop"}
    ],
    "usage": {
        "queue_time": 0.037493756,
        "prompt_tokens": 18,
        "prompt_time": 0.000680594,
        "completion_tokens": 556,
        "completion_time": 0.463333333,
        "total_tokens": 574,
        "total_time": 0.464013927,
    },
    "system_fingerprint": "fp_179b0f92c9",
    "x_groq": {"id": "req_01jbd6g2qdfw2adyrt2az8hz4w"},
}

# queue_time 0.037493756 s = 37_493_756 ns; prompt_time 0.000680594 s = 680_594 ns;
# completion_time 0.463333333 s = 463_333_333 ns; total_time 0.464013927 s = 464_013_927 ns
# (= prompt + completion: Groq's total excludes the queue), so all server time is
# queue + total = 37_493_756 + 464_013_927 = 501_507_683 ns.
GROQ_REFERENCE_ATTRIBUTES: dict[str, Any] = {
    semconv.GEN_AI_USAGE_INPUT_TOKENS: 18,
    semconv.GEN_AI_USAGE_OUTPUT_TOKENS: 556,
    semconv.PROVIDER_QUEUE_NS: 37_493_756,
    semconv.PROVIDER_PREFILL_NS: 680_594,
    semconv.PROVIDER_DECODE_NS: 463_333_333,
    semconv.PROVIDER_SERVER_TOTAL_NS: 501_507_683,
    semconv.PROVENANCE_QUEUE: "reported",
    semconv.PROVENANCE_PREFILL: "reported",
    semconv.PROVENANCE_DECODE: "reported",
    semconv.PROVENANCE_SERVER_TOTAL: "derived",  # queue_time + total_time, not one field
    semconv.GEN_AI_RESPONSE_MODEL: "openai/gpt-oss-20b",
    semconv.GEN_AI_RESPONSE_ID: "chatcmpl-f51b2cd2-bef7-417e-964e-a08f0b513c22",
    semconv.GEN_AI_RESPONSE_FINISH_REASONS: ["stop"],
    semconv.PROVIDER_FIELDS_REPORTED: [
        "usage.prompt_tokens",
        "usage.completion_tokens",
        "usage.queue_time",
        "usage.prompt_time",
        "usage.completion_time",
        "usage.total_time",
    ],
}


def groq_final_chunk(usage_path: str) -> dict[str, Any]:
    """A stream's final chunk, with the reference usage as ``x_groq.usage`` or top-level ``usage``."""
    final: dict[str, Any] = {
        "id": GROQ_REFERENCE["id"],
        "object": "chat.completion.chunk",
        "created": 1730241104,
        "model": "openai/gpt-oss-20b",
        "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
        "x_groq": {"id": "req_01jbd6g2qdfw2adyrt2az8hz4w"},
    }
    if usage_path == "x_groq.usage":
        final["x_groq"]["usage"] = copy.deepcopy(GROQ_REFERENCE["usage"])
    else:
        final["usage"] = copy.deepcopy(GROQ_REFERENCE["usage"])
    return final


@pytest.mark.parametrize(
    "response",
    [
        pytest.param(GROQ_REFERENCE, id="dict"),
        pytest.param(GroqChatCompletion.model_validate(GROQ_REFERENCE), id="groq-sdk"),
        pytest.param(openai_chat.ChatCompletion.model_validate(GROQ_REFERENCE), id="openai-sdk"),
    ],
)
def test_groq_reference_response(response: Any) -> None:
    assert GroqAdapter().extract(response).to_attributes() == GROQ_REFERENCE_ATTRIBUTES


def test_groq_non_stream_x_groq_usage_cache_stats_are_not_timings() -> None:
    response = copy.deepcopy(GROQ_REFERENCE)
    response["x_groq"]["usage"] = {"dram_cached_tokens": 10, "sram_cached_tokens": 0}
    usage = GroqAdapter().extract(GroqChatCompletion.model_validate(response))
    assert usage.server_total_ns == 501_507_683
    assert usage.fields_missing == []


def test_groq_total_time_missing_falls_back_to_prompt_plus_completion() -> None:
    response = copy.deepcopy(GROQ_REFERENCE)
    del response["usage"]["total_time"]
    usage = GroqAdapter().extract(response)
    assert usage.server_total_ns == 37_493_756 + 680_594 + 463_333_333
    assert usage.fields_missing == ["usage.total_time"]


@pytest.mark.parametrize("queue_time", [float("nan"), float("inf"), -0.0375, 1e300])
def test_groq_queue_time_no_duration_is_listed_missing_and_the_rest_kept(queue_time: float) -> None:
    """JSON parsers accept NaN and Infinity; a negative or absurd time is no duration either. Each
    raised inside the adapter's shortcut before, losing the whole reply's usage."""
    response = copy.deepcopy(GROQ_REFERENCE)
    response["usage"]["queue_time"] = queue_time
    attributes = GroqAdapter().response_attributes(response)
    assert attributes[semconv.PROVIDER_FIELDS_MISSING] == ["usage.queue_time"]
    assert semconv.PROVIDER_QUEUE_NS not in attributes
    assert semconv.PROVIDER_SERVER_TOTAL_NS not in attributes  # queue + total, and queue is unknown
    assert attributes[semconv.PROVIDER_PREFILL_NS] == 680_594
    assert attributes[semconv.PROVIDER_DECODE_NS] == 463_333_333
    assert attributes[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 556


def test_counts_past_int64_or_negative_are_no_counts() -> None:
    """OTLP's integers are int64: a larger count would be dropped by the exporter with an error."""
    response = copy.deepcopy(GROQ_REFERENCE)
    response["usage"]["prompt_tokens"] = 2**70
    response["usage"]["completion_tokens"] = -5
    usage = OpenAIAdapter().extract(response)
    assert (usage.input_tokens, usage.output_tokens) == (None, None)
    assert usage.fields_missing == ["usage.prompt_tokens", "usage.completion_tokens"]


@pytest.mark.parametrize("usage_path", ["x_groq.usage", "usage"])
@pytest.mark.parametrize("sdk", ["dict", "groq", "openai"])
def test_groq_stream_final_chunk(usage_path: str, sdk: str) -> None:
    raw = [
        {
            "id": GROQ_REFERENCE["id"],
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "openai/gpt-oss-20b",
            "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}],
        },
        {
            "id": GROQ_REFERENCE["id"],
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "openai/gpt-oss-20b",
            "choices": [{"index": 0, "delta": {"content": "Fast"}, "finish_reason": None}],
        },
        groq_final_chunk(usage_path),
    ]
    validate = {
        "dict": lambda c: c,
        "groq": GroqChatCompletionChunk.model_validate,
        "openai": openai_chat.ChatCompletionChunk.model_validate,
    }[sdk]
    state = GroqAdapter().new_stream_state()
    assert [state.record_chunk(validate(item)) for item in raw] == [False, True, False]
    expected = dict(GROQ_REFERENCE_ATTRIBUTES)
    expected[semconv.PROVIDER_FIELDS_REPORTED] = [
        f"{usage_path}.{name}"
        for name in (
            "prompt_tokens",
            "completion_tokens",
            "queue_time",
            "prompt_time",
            "completion_time",
            "total_time",
        )
    ]
    assert state.usage().to_attributes() == expected


def test_openai_usage_with_cache_and_reasoning_details() -> None:
    response = openai_chat.ChatCompletion.model_validate(
        {
            "id": "chatcmpl-123",
            "object": "chat.completion",
            "created": 1,
            "model": "gpt-4.1-2025-04-14",
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "length"}
            ],
            "usage": {
                "prompt_tokens": 19,
                "completion_tokens": 10,
                "total_tokens": 29,
                "prompt_tokens_details": {"cached_tokens": 7, "audio_tokens": 0},
                "completion_tokens_details": {"reasoning_tokens": 4, "audio_tokens": 0},
            },
        }
    )
    assert OpenAIAdapter().extract(response).to_attributes() == {
        semconv.GEN_AI_USAGE_INPUT_TOKENS: 19,
        semconv.GEN_AI_USAGE_OUTPUT_TOKENS: 10,
        semconv.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: 7,
        semconv.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS: 4,
        semconv.GEN_AI_RESPONSE_MODEL: "gpt-4.1-2025-04-14",
        semconv.GEN_AI_RESPONSE_ID: "chatcmpl-123",
        semconv.GEN_AI_RESPONSE_FINISH_REASONS: ["length"],
        semconv.PROVIDER_FIELDS_REPORTED: [
            "usage.prompt_tokens",
            "usage.completion_tokens",
            "usage.prompt_tokens_details.cached_tokens",
            "usage.completion_tokens_details.reasoning_tokens",
        ],
    }


def test_openai_stream_reads_the_include_usage_chunk() -> None:
    state = OpenAIAdapter().new_stream_state()
    chunks: list[dict[str, Any]] = [
        {"id": "c", "model": "gpt", "choices": [{"index": 0, "delta": {"content": "a"}}], "usage": None},
        {
            "id": "c",
            "model": "gpt",
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
            "usage": None,
        },
        {
            "id": "c",
            "model": "gpt",
            "choices": [],
            "usage": {"prompt_tokens": 19, "completion_tokens": 10, "total_tokens": 29},
        },
    ]
    assert [
        state.record_chunk(
            openai_chat.ChatCompletionChunk.model_validate(
                {"object": "chat.completion.chunk", "created": 1, **item}
            )
        )
        for item in chunks
    ] == [True, False, False]
    usage = state.usage()
    assert (usage.input_tokens, usage.output_tokens, usage.finish_reasons) == (19, 10, ["stop"])


def test_registry_falls_back_to_openai_compatible_but_keeps_the_name() -> None:
    assert known_providers() == [
        "anthropic",
        "aws.bedrock",
        "bedrock",
        "cerebras",
        "gcp.gemini",
        "gcp.gen_ai",
        "gcp.vertex_ai",
        "gemini",
        "groq",
        "llama.cpp",
        "llamacpp",
        "nim",
        "nvidia.nim",
        "ollama",
        "openai",
        "sglang",
        "tgi",
        "vllm",
    ]
    assert isinstance(get_adapter("groq"), GroqAdapter)
    assert get_adapter("Groq").name == "Groq"
    fallback = get_adapter("lmdeploy")
    assert type(fallback) is OpenAIAdapter
    assert fallback.name == "lmdeploy"


def test_unknown_provider_name_is_kept_on_the_span(spans: Spans) -> None:
    @latencylens.model_call(provider="my-llm-server", model="m")
    def call() -> dict[str, Any]:
        return {"usage": {"prompt_tokens": 2, "completion_tokens": 3}}

    call()
    values = spans()[0].attributes or {}
    assert values[semconv.GEN_AI_PROVIDER_NAME] == "my-llm-server"
    assert values[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 3


class Unknown:
    """Not a response shape any adapter knows."""

    status = "ok"


@pytest.mark.parametrize("response", [Unknown(), {"result": "ok"}, None, 42])
def test_unknown_shape_returns_the_result_and_names_what_was_missing(spans: Spans, response: Any) -> None:
    @latencylens.model_call(provider="groq", model="m")
    def call() -> Any:
        return response

    assert call() is response
    values = spans()[0].attributes or {}
    assert values[semconv.PROVIDER_FIELDS_MISSING] == (
        "usage.prompt_tokens",
        "usage.completion_tokens",
        "usage.queue_time",
        "usage.prompt_time",
        "usage.completion_time",
        "usage.total_time",
    )
    assert semconv.PROVIDER_FIELDS_REPORTED not in values
    assert semconv.PROVIDER_SERVER_TOTAL_NS not in values


class Hostile:
    """A response whose ``usage`` property itself fails, as a broken SDK object might."""

    @property
    def usage(self) -> Any:
        raise RuntimeError("property bug")


def test_response_that_breaks_the_adapter_still_returns(spans: Spans, allow_internal_errors: None) -> None:
    response = Hostile()

    @latencylens.model_call(provider="groq", model="m")
    def call() -> Hostile:
        return response

    assert call() is response
    values = spans()[0].attributes or {}
    assert values[semconv.PROVIDER_EXTRACT_ERRORS] == 1
    assert semconv.ERROR_TYPE not in values


def sglang_reply(**meta: Any) -> dict[str, Any]:
    reply = sglang_generate(metrics=True)
    reply["meta_info"].update(meta)
    return reply


@pytest.mark.parametrize(
    ("meta", "why"),
    [
        ({"prefill_finished_time": 1780931882.75}, "prefill finished before the forward entry"),
        ({"inference_time": 0.0078125}, "prefill (1/64 s) longer than the whole inference (1/128 s)"),
        ({"forward_entry_time": "1780931882.875"}, "a timestamp that is not a number"),
        ({"prefill_finished_time": float("nan")}, "a timestamp that is not finite"),
    ],
)
def test_sglang_split_is_left_out_when_its_timestamps_cannot_be_trusted(
    meta: dict[str, Any], why: str
) -> None:
    usage = get_adapter("sglang").extract(sglang_reply(**meta))
    assert (usage.prefill_ns, usage.decode_ns) == (None, None), why
    assert usage.inference_ns == seconds_to_ns(sglang_reply(**meta)["meta_info"]["inference_time"])
    assert usage.server_total_ns == 239_501_709  # e2e_latency 0.23950170911848545 s, rounded
    assert usage.derived == frozenset()


def test_sglang_finish_reason_as_an_object_or_a_string_and_hostile_timings() -> None:
    adapter = get_adapter("sglang")
    assert adapter.extract(sglang_reply(finish_reason="stop")).finish_reasons == ["stop"]
    assert adapter.extract(sglang_reply(finish_reason={"type": "abort", "message": "x"})).finish_reasons == [
        "abort"
    ]
    hostile = adapter.extract(sglang_reply(e2e_latency=float("inf"), queue_time="soon", finish_reason=[1]))
    assert (hostile.server_total_ns, hostile.queue_ns, hostile.finish_reasons) == (None, None, [])
    assert hostile.fields_missing == ["meta_info.e2e_latency", "meta_info.queue_time"]
    assert hostile.input_tokens == 5  # what was valid is kept


def test_sglang_batch_of_odd_replies_keeps_what_every_request_reported() -> None:
    adapter = get_adapter("sglang")
    no_cache = sglang_reply(e2e_latency=0.5, queue_time=0.25)
    del no_cache["meta_info"]["cached_tokens"]
    # a reply without meta_info and a string are not requests; a count one request lacks is unknown
    usage = adapter.extract([sglang_reply(), no_cache, {"text": "x"}, "junk"])
    assert (usage.input_tokens, usage.output_tokens) == (10, 64)  # 5 + 5, 32 + 32
    assert usage.cache_read_input_tokens is None
    assert (usage.server_total_ns, usage.queue_ns) == (500_000_000, 250_000_000)  # the slower request's
    assert usage.finish_reasons == ["length", "length"] and usage.response_id is None
    nothing = adapter.extract([])
    assert nothing.input_tokens is None
    assert "meta_info.prompt_tokens" in nothing.fields_missing


def test_sglang_openai_reply_with_several_choices_is_timed_by_the_slowest() -> None:
    reply = sglang_chat_completion(meta_info=True)
    slower = {**reply["choices"][0], "index": 1, "meta_info": {**SGLANG_META, "e2e_latency": 0.5}}
    reply["choices"].append(slower)
    usage = get_adapter("sglang").extract(reply)
    assert usage.server_total_ns == 500_000_000  # the second choice's 0.5 s, not the first's 0.2395… s
    assert usage.queue_ns is None  # that choice's meta_info has no metrics: none borrowed from the other
    assert (usage.input_tokens, usage.output_tokens) == (5, 32)  # from usage, as the server summed it


def test_sglang_stream_whose_indices_never_repeat_holds_bounded_state() -> None:
    state = get_adapter("sglang").new_stream_state()
    for index in range(10_000):  # far more "requests" than any batch: each a new index
        chunk = {
            "text": f"t{index}",
            "index": index,
            "meta_info": {"prompt_tokens": 1, "completion_tokens": 1},
        }
        assert state.record_chunk(chunk)  # still content: its text changed
    # 4,096 requests tracked apart and one slot for the rest, one prompt token each: not 10,000
    assert state.usage().input_tokens == 4097


def test_llamacpp_native_reply_without_timings_reads_its_own_counts() -> None:
    reply = llamacpp_native()
    del reply["timings"]  # a build or a response_fields list that leaves them out
    usage = get_adapter("llama.cpp").extract(reply)
    # tokens_evaluated is the whole prompt (46), tokens_cached its cached part, tokens_predicted 10
    assert (usage.input_tokens, usage.cache_read_input_tokens, usage.output_tokens) == (46, 0, 10)
    assert (usage.prefill_ns, usage.decode_ns) == (None, None)
    assert usage.fields_missing == ["timings"]
    assert usage.finish_reasons == ["eos"] and usage.response_model == "qwen"


def test_llamacpp_native_reply_with_hostile_fields_keeps_what_is_valid() -> None:
    reply = {**llamacpp_native(), "stop_type": ["eos"], "model": {"name": "qwen"}}  # not strings
    usage = get_adapter("llama.cpp").extract(reply)
    assert (usage.finish_reasons, usage.response_model) == ([], None)
    assert (usage.input_tokens, usage.prefill_ns) == (46, 651_714_000)  # the timings still read


def test_llamacpp_native_stream_cut_midway_keeps_the_counts_so_far() -> None:
    state = get_adapter("llama.cpp").new_stream_state()
    content = [state.record_chunk(chunk) for chunk in llamacpp_native_chunks([" Paris", ".", ""])[:3]]
    assert content == [True, True, False]  # the empty piece is no content
    usage = state.usage()  # no final object: the last piece's counts, no timings
    assert (usage.input_tokens, usage.output_tokens) == (46, 3)
    assert usage.fields_missing == ["timings"] and usage.finish_reasons == []


def test_llamacpp_native_batch_of_odd_replies_keeps_what_every_request_reported() -> None:
    untimed = llamacpp_native("limit")
    del untimed["timings"]
    usage = get_adapter("llama.cpp").extract([llamacpp_native(), untimed, "junk"])
    # "junk" reports no count, so no sum is known; one request without timings: no split borrowed
    assert (usage.input_tokens, usage.output_tokens, usage.prefill_ns) == (None, None, None)
    assert usage.finish_reasons == ["eos", "limit"]
    assert usage.fields_missing == ["tokens_evaluated", "tokens_predicted", "timings"]  # the native names
    both = get_adapter("llama.cpp").extract([llamacpp_native(), untimed])
    assert (both.input_tokens, both.output_tokens, both.prefill_ns) == (92, 20, None)  # 46 + 46, 10 + 10


def test_nim_stats_with_hostile_values_keep_what_is_valid() -> None:
    reply = nim_chat_completion(usage=False)
    reply["stats"] = {**NIM_STATS, "generation_time_in_ms": "NaN", "llm_output_token_length": "64"}
    usage = get_adapter("nim").extract(reply)
    assert (usage.inference_ns, usage.output_tokens) == (None, None)
    assert usage.queue_ns == 10_000_000 and usage.input_tokens == 512  # 10.0 ms; 512 tokens
    assert usage.fields_missing == ["stats.llm_output_token_length", "stats.generation_time_in_ms"]
