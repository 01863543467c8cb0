"""The documented responses of each provider (from provider-timing.md), as fresh dicts per call.

Only what the examples show is used; where an example is trimmed ("…"), the minimum the provider's
SDK needs to parse it (ids, ``object``, ``created``) is filled in and marked.
"""

from __future__ import annotations

from typing import Any

OPENAI_MODEL = "gpt-4.1-2025-04-14"


def openai_chat_completion() -> dict[str, Any]:
    """OpenAI API-reference usage block inside a minimal chat completion."""
    return {
        "id": "chatcmpl-123",  # filled in
        "object": "chat.completion",
        "created": 1741569952,
        "model": OPENAI_MODEL,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi"}, "finish_reason": "stop"}],
        "usage": {
            "prompt_tokens": 19,
            "completion_tokens": 10,
            "total_tokens": 29,
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": 0,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        },
    }


def openai_usage_chunk() -> dict[str, Any]:
    """The final ``include_usage`` chunk from the reference."""
    return {
        "id": "chatcmpl-123",
        "object": "chat.completion.chunk",
        "created": 1741569952,
        "model": OPENAI_MODEL,
        "choices": [],
        "usage": {
            "prompt_tokens": 19,
            "completion_tokens": 10,
            "total_tokens": 29,
            "prompt_tokens_details": {"cached_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0},
        },
    }


def openai_chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-123",
        "object": "chat.completion.chunk",
        "created": 1741569952,
        "model": OPENAI_MODEL,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        "usage": None,
    }


def openai_response() -> dict[str, Any]:
    """Responses API: the recorded response with cached input tokens (output list filled in)."""
    return {
        "id": "resp_0cd5",
        "object": "response",
        "created_at": 1768560502,
        "status": "completed",
        "completed_at": 1768560504,
        "model": OPENAI_MODEL,
        "output": [],  # filled in
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": 12033,
            "input_tokens_details": {"cached_tokens": 11904},
            "output_tokens": 44,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 12077,
        },
    }


def openai_response_events(texts: list[str]) -> list[tuple[str, dict[str, Any]]]:
    """A Responses API stream: ``response.created``, one ``response.output_text.delta`` per text,
    ``response.completed`` carrying the recorded response (and its usage)."""
    created = {**openai_response(), "status": "in_progress", "usage": None}
    events: list[tuple[str, dict[str, Any]]] = [
        ("response.created", {"type": "response.created", "sequence_number": 0, "response": created})
    ]
    for number, text in enumerate(texts, start=1):
        events.append(
            (
                "response.output_text.delta",
                {
                    "type": "response.output_text.delta",
                    "sequence_number": number,
                    "item_id": "msg_1",
                    "output_index": 0,
                    "content_index": 0,
                    "delta": text,
                    "logprobs": [],
                },
            )
        )
    events.append(
        (
            "response.completed",
            {"type": "response.completed", "sequence_number": len(texts) + 1, "response": openai_response()},
        )
    )
    return events


def groq_completion() -> dict[str, Any]:
    """Groq API reference, non-streaming (content trimmed there; filled in)."""
    return {
        "id": "chatcmpl-f51b2cd2-bef7-417e-964e-a08f0b513c22",
        "object": "chat.completion",
        "created": 1730241104,
        "model": "openai/gpt-oss-20b",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "Hi"}, "finish_reason": "stop"}
        ],  # content filled in
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


GROQ_USAGE = {
    "queue_time": 0.041905864,
    "prompt_tokens": 45,
    "prompt_time": 0.003940145,
    "completion_tokens": 662,
    "completion_time": 2.652230333,
    "total_tokens": 707,
    "total_time": 2.656170478,
}


def groq_stream_chunk(
    delta: dict[str, Any], finish: str | None = None, final: bool = False
) -> dict[str, Any]:
    """A chunk of the recorded Groq stream; the final one carries ``x_groq.usage`` and ``usage``."""
    chunk: dict[str, Any] = {
        "id": "chatcmpl-7eb08824",
        "object": "chat.completion.chunk",
        "created": 1770770842,
        "model": "llama-3.3-70b-versatile",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    if final:
        chunk["x_groq"] = {"id": "req_01kh52ndshfr2azv0xe6tnv4fx", "usage": dict(GROQ_USAGE)}
        chunk["usage"] = dict(GROQ_USAGE)
    return chunk


def cerebras_completion() -> dict[str, Any]:
    """Cerebras API-reference example (choices filled in)."""
    return {
        "id": "chatcmpl-292e278f-514e-4186-9010-91ce6a14168b",
        "object": "chat.completion",
        "created": 1723733419,
        "model": "gpt-oss-120b",
        "system_fingerprint": "fp_1",  # filled in
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi"}, "finish_reason": "stop"}],
        "usage": {
            "prompt_tokens": 12,
            "completion_tokens": 10,
            "total_tokens": 22,
            "prompt_tokens_details": {"cached_tokens": 0},
            "completion_tokens_details": {"accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0},
        },
        "time_info": {
            "queue_time": 0.000073161,
            "prompt_time": 0.0010744798888888889,
            "completion_time": 0.005658071111111111,
            "total_time": 0.022224903106689453,
            "created": 1723733419,
        },
    }


def anthropic_message() -> dict[str, Any]:
    """A Messages response around the prompt-caching docs' usage example."""
    return {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "content": [{"type": "text", "text": "Hi"}],
        "model": "claude-opus-4-6",
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": 21,
            "cache_creation_input_tokens": 188086,
            "cache_read_input_tokens": 0,
            "output_tokens": 393,
        },
    }


def anthropic_stream_events(text_parts: list[str]) -> list[tuple[str, dict[str, Any]]]:
    """The streaming docs' event sequence; ``text_parts`` become one ``content_block_delta`` each."""
    events: list[tuple[str, dict[str, Any]]] = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_1nZdL29xx5MUA1yADyHTEsnR8uuvGzszyY",
                    "type": "message",
                    "role": "assistant",
                    "content": [],
                    "model": "claude-opus-4-6",
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": 25, "output_tokens": 1},
                },
            },
        ),
        (
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        ),
        ("ping", {"type": "ping"}),
    ]
    for text in text_parts:
        events.append(
            (
                "content_block_delta",
                {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}},
            )
        )
    events += [
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": 15},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    return events


def ollama_final(kind: str = "generate") -> dict[str, Any]:
    """Ollama docs' final object (``usage.mdx``); ``kind="chat"`` moves the text into ``message``."""
    final: dict[str, Any] = {
        "model": "gemma4",
        "created_at": "2025-10-17T23:14:07.414671Z",
        "response": "Hello! How can I help you today?",
        "done": True,
        "done_reason": "stop",
        "total_duration": 174560334,
        "load_duration": 101397084,
        "prompt_eval_count": 11,
        "prompt_eval_duration": 13074791,
        "eval_count": 18,
        "eval_duration": 52479709,
    }
    if kind == "chat":
        del final["response"]
        final["message"] = {"role": "assistant", "content": ""}
    return final


LLAMACPP_TIMINGS = {
    "cache_n": 0,
    "prompt_n": 46,
    "prompt_ms": 651.714,
    "prompt_per_token_ms": 14.167695652173915,
    "prompt_per_second": 70.58310854147678,
    "predicted_n": 10,
    "predicted_ms": 73.517,
    "predicted_per_token_ms": 7.351699999999999,
    "predicted_per_second": 136.02296067576208,
}


def llamacpp_completion() -> dict[str, Any]:
    """The captured llama-server b9910 response (id, model, created, choices filled in)."""
    return {
        "id": "chatcmpl-ll",
        "object": "chat.completion",
        "created": 1,
        "model": "qwen",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi"}, "finish_reason": "stop"}],
        "system_fingerprint": "b9910-f5525f7e7",
        "usage": {
            "completion_tokens": 10,
            "prompt_tokens": 46,
            "total_tokens": 56,
            "prompt_tokens_details": {"cached_tokens": 0},
        },
        "timings": dict(LLAMACPP_TIMINGS),
    }


# llama.cpp's native /completion: the fields tools/server/README.md documents ("Response format"),
# as server_task_result_cmpl_final::to_json_non_oaicompat writes them, with the captured timings above.


def llamacpp_native(stop_type: str = "eos", **timings: Any) -> dict[str, Any]:
    """A native ``/completion`` reply (the final object; in a stream, its last chunk)."""
    timing = {**LLAMACPP_TIMINGS, **timings}
    return {
        "index": 0,
        "content": " Paris.",
        "tokens": [],
        "id_slot": 0,
        "stop": True,
        "model": "qwen",
        "tokens_predicted": timing["predicted_n"],
        "tokens_evaluated": timing["cache_n"] + timing["prompt_n"],
        "generation_settings": {"n_predict": 32},
        "prompt": "The capital of France is",
        "has_new_line": False,
        "truncated": False,
        "stop_type": stop_type,
        "stopping_word": "",
        "tokens_cached": timing["cache_n"],
        "timings": timing,
    }


# The second request of a native batch: values exact in binary (ms → ns rounds nothing), its
# prompt_ms + predicted_ms (780.75 ms) longer than the first's (651.714 + 73.517 = 725.231 ms).
LLAMACPP_SECOND_TIMINGS = {
    "cache_n": 16,
    "prompt_n": 30,
    "prompt_ms": 700.5,
    "predicted_n": 12,
    "predicted_ms": 80.25,
}


def llamacpp_native_batch() -> list[dict[str, Any]]:
    """``/completion`` given two prompts: one reply per prompt, each with its ``index``."""
    return [llamacpp_native(), {**llamacpp_native("limit", **LLAMACPP_SECOND_TIMINGS), "index": 1}]


def llamacpp_native_chunks(pieces: list[str], final: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """A native stream: each chunk the next piece of text with the counts so far (``stop`` false),
    then the final object (``stop`` true, its content empty: the text came in the pieces)."""
    last = final or llamacpp_native()
    chunks = [
        {
            "index": last["index"],
            "content": piece,
            "tokens": [number],
            "stop": False,
            "id_slot": 0,
            "tokens_predicted": number + 1,
            "tokens_evaluated": last["tokens_evaluated"],
        }
        for number, piece in enumerate(pieces)
    ]
    return [*chunks, {**last, "content": ""}]


TGI_HEADERS = {
    "x-compute-type": "gpu+optimized",
    "x-compute-time": "1.234567",
    "x-compute-characters": "112",
    "x-total-time": "1234",
    "x-validation-time": "2",
    "x-queue-time": "15",
    "x-inference-time": "1217",
    "x-time-per-token": "12",
    "x-prompt-tokens": "28",
    "x-generated-tokens": "100",
}


def tgi_chat_completion() -> dict[str, Any]:
    """A TGI ``/v1/chat/completions`` body whose counts match the reconstructed headers."""
    return {
        "id": "",
        "object": "chat.completion",
        "created": 1,
        "model": "tgi",
        "system_fingerprint": "3.0.0-native",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 28, "completion_tokens": 100, "total_tokens": 128},
    }


VLLM_USAGE = {"prompt_tokens": 42, "completion_tokens": 128, "total_tokens": 170}
VLLM_METRICS = {
    "time_to_first_token_ms": 85.2,
    "generation_time_ms": 1240.5,
    "queue_time_ms": 12.3,
    "mean_itl_ms": 9.1,
    "tokens_per_second": 103.2,
}


def vllm_completion() -> dict[str, Any]:
    return {
        "id": "chatcmpl-abc123",
        "object": "chat.completion",
        "created": 1,
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi"}, "finish_reason": "stop"}],
        "usage": dict(VLLM_USAGE),
        "metrics": dict(VLLM_METRICS),
    }


def bedrock_converse() -> dict[str, Any]:
    """The Converse example from the reference."""
    return {
        "output": {"message": {"role": "assistant", "content": [{"text": "ok"}]}},
        "stopReason": "end_turn",
        "usage": {
            "inputTokens": 10,
            "outputTokens": 4,
            "totalTokens": 14,
            "cacheReadInputTokens": 0,
            "cacheWriteInputTokens": 0,
        },
        "metrics": {"latencyMs": 123},
    }


def gemini_response(text: str, usage: bool = True, finish: bool = True) -> dict[str, Any]:
    """A ``generateContent`` response (REST camelCase) with the documented ``usageMetadata`` fields."""
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": [{"text": text}]}, "index": 0}
    if finish:
        candidate["finishReason"] = "STOP"
    body: dict[str, Any] = {
        "candidates": [candidate],
        "modelVersion": "gemini-2.5-flash",
        "responseId": "resp-gem-1",
    }
    if usage:
        body["usageMetadata"] = {
            "promptTokenCount": 12,
            "candidatesTokenCount": 8,
            "totalTokenCount": 25,
            "cachedContentTokenCount": 4,
            "thoughtsTokenCount": 5,
        }
    return body


# SGLang's documented native /generate reply (docs/basic_usage/send_request.ipynb, output of the
# first /generate request; the text is ours): meta_info as the server sends it without metrics.
SGLANG_META = {
    "id": "49fa36ead40e4aa5874ba0df46dee79d",
    "finish_reason": {"type": "length", "length": 32},
    "prompt_tokens": 5,
    "weight_version": "default",
    "num_retractions": 0,
    "reasoning_tokens": 0,
    "completion_tokens": 32,
    "cached_tokens": 2,
    "cached_tokens_details": {"device": 2, "host": 0},
    "dp_rank": None,
    "e2e_latency": 0.23950170911848545,
    "response_sent_to_client_ts": 1780931883.1074142,
}
# What --enable-metrics adds to the final meta_info (field names from
# python/sglang/srt/observability/req_time_stats.py; no documented example carries values, so these
# are chosen inside the documented e2e_latency and exactly representable in binary, so the expected
# ns are exact): queue 1/128 s, inference 7/32 s, prefill finished 1/64 s after the forward entry.
SGLANG_METRICS = {
    "queue_time": 0.0078125,
    "inference_time": 0.21875,
    "forward_entry_time": 1780931882.875,
    "prefill_finished_time": 1780931882.890625,
    "prefill_waiting_latency": 0.0009765625,
    "prefill_launch_latency": 0.0146484375,
    "request_received_ts": 1780931882.854248,  # request_finished_ts − e2e_latency
    "request_finished_ts": 1780931883.09375,
}


def sglang_generate(metrics: bool = False) -> dict[str, Any]:
    """A native ``/generate`` reply: ``text``, ``output_ids`` and ``meta_info``."""
    meta = {**SGLANG_META, **(SGLANG_METRICS if metrics else {})}
    return {"text": " Paris. It is the capital of France.", "output_ids": list(range(32)), "meta_info": meta}


def sglang_generate_chunks(texts: list[str]) -> list[dict[str, Any]]:
    """A native ``/generate`` stream: cumulative ``text``, ``meta_info`` on every chunk with the running
    ``completion_tokens``; the last chunk carries the final meta_info with metrics."""
    chunks = []
    text = ""
    for index, part in enumerate(texts[:-1]):
        text += part
        meta = {
            "id": SGLANG_META["id"],
            "finish_reason": None,
            "prompt_tokens": 5,
            "completion_tokens": index + 1,
            "cached_tokens": 2,
            "queue_time": SGLANG_METRICS["queue_time"],
        }
        chunks.append({"text": text, "output_ids": list(range(index + 1)), "meta_info": meta})
    final = sglang_generate(metrics=True)
    final["text"] = text + texts[-1]
    chunks.append(final)
    return chunks


# The second request of a batch (/generate given two prompts answers a list of two replies, each
# shaped as the documented one): values chosen exactly representable in binary, its e2e_latency
# longer than the first request's 0.2395… s, so the batch's timing is this request's.
SGLANG_SECOND_META = {
    "id": "5d1c0e9b7f2a4c6e8a0b2d4f6e8c0a1b",
    "finish_reason": {"type": "stop", "matched": 151645},
    "prompt_tokens": 7,
    "completion_tokens": 16,
    "cached_tokens": 0,
    "reasoning_tokens": 0,
    "e2e_latency": 0.25,
    "queue_time": 0.015625,
    "inference_time": 0.1875,
    "forward_entry_time": 1780931882.9375,
    "prefill_finished_time": 1780931882.96875,
}


def sglang_batch_generate() -> list[dict[str, Any]]:
    """``/generate`` given two prompts: the documented reply (with metrics), then the second's."""
    second = {**SGLANG_META, **SGLANG_METRICS, **SGLANG_SECOND_META}
    return [
        sglang_generate(metrics=True),
        {"text": " Berlin.", "output_ids": list(range(16)), "meta_info": second},
    ]


def sglang_batch_chunks() -> list[dict[str, Any]]:
    """A batch's stream: each request's chunks carry its ``index``, interleaved as they finish steps;
    each request's last chunk has its final meta_info (the first's repeats its text: no content)."""
    first = sglang_generate_chunks(["Paris", ".", ""])
    second_final = {**sglang_batch_generate()[1], "index": 1}
    second_partial = {
        "text": " Berlin",
        "output_ids": [0],
        "meta_info": {**SGLANG_SECOND_META, "finish_reason": None, "completion_tokens": 1},
        "index": 1,
    }
    return [
        {**first[0], "index": 0},
        {**second_partial},
        {**first[1], "index": 0},
        second_final,
        {**first[2], "index": 0},
    ]


def sglang_chat_completion(meta_info: bool) -> dict[str, Any]:
    """``/v1/chat/completions``; with ``return_meta_info`` each choice carries the native meta_info."""
    choice: dict[str, Any] = {
        "index": 0,
        "message": {"role": "assistant", "content": "Paris."},
        "finish_reason": "length",
    }
    if meta_info:
        choice["meta_info"] = {**SGLANG_META, **SGLANG_METRICS}
    return {
        "id": SGLANG_META["id"],
        "object": "chat.completion",
        "created": 1,
        "model": "qwen/qwen2.5-0.5b-instruct",
        "choices": [choice],
        "usage": {
            "prompt_tokens": 5,
            "completion_tokens": 32,
            "total_tokens": 37,
            "prompt_tokens_details": {"cached_tokens": 2},
            "reasoning_tokens": 0,
        },
    }


# NVIDIA NIM per-request metrics (experimental; NIM_PER_REQ_METRICS_ENABLE=1): field names from the
# NIM for LLMs "Per-Request Metrics" page; values as in the provider-timing reference's example.
NIM_STATS = {
    "type": "NIM LLM Model Stats",
    "version": "0.1.0",
    "llm_input_token_length": 512,
    "llm_output_token_length": 64,
    "generation_time_in_ms": 800.0,
    "time_in_queue_in_ms": 10.0,
    "response_tokens": {
        "response_token_length": 64,
        "time_to_first_token_in_ms": 110.0,
        "token_to_token_time_in_ms": 12.0,
        "tokens_per_second": 80.0,
    },
}


def nim_chat_completion(usage: bool = True) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": "chat-5ba1c0a4d1b64b0e9c6f1b0e2f5d8a1c",
        "object": "chat.completion",
        "created": 1,
        "model": "meta/llama-3.1-8b-instruct",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi"}, "finish_reason": "stop"}],
        "stats": dict(NIM_STATS),
    }
    if usage:
        body["usage"] = {"prompt_tokens": 512, "completion_tokens": 64, "total_tokens": 576}
    return body
