"""SGLang's request span (``--enable-trace``), ingested through POST /v1/traces from recorded OTLP/JSON.

The fixtures carry the root span SGLang's tokenizer manager ends (name ``Req <rid>``, ``module`` =
``sglang::request``, names from ``make_span_attrs`` and ``convert_to_gen_ai_span_attrs``) with its
thread and stage spans below it. Timestamps (ms after the tokenizer manager received the request):
dispatched to the scheduler 3.1, first token 45.2, finished 239.5, so the span says e2e 0.2395 s,
time to first token 0.0452 s, decode 0.2395 − 0.0452 = 0.1943 s, and prefill 0.0421 s and
inference 0.2364 s counted from the dispatch: both hold the scheduler's queue. The scheduler's
stage spans: ``prefill_waiting`` 3.6 → 11.4 (queue 7.8 ms), ``prefill_forward`` 11.4 → 44.9
(prefill 33.5 ms), ``decode_loop`` 44.9 → 238.9. 5 prompt tokens (2 cached), 32 completion tokens.
"""

from __future__ import annotations

from typing import Any

from otlp_builders import MS
from test_conventions_vllm import US, detail, find_span, nonzero_parts_us, post_fixture


def test_server_spans_split_queue_prefill_and_decode(collector: Any) -> None:
    """Root POST /ask 0–1000 ms; the client's model call (OpenLLMetry-style, provider ``openai``,
    no timing) 100–900 ms; an HTTP client span in it; SGLang's spans below that.

    Worked numbers (µs): the model call's 800 000 split by SGLang's report:
      server total = e2e 239 500 → network = 800 000 − 239 500 = 560 500
      queue 7 800 (prefill_waiting), prefill 33 500 (prefill_forward), decode 194 300 (the span's;
      never its "prefill" 42 100, which holds the queue)
      model_unattributed = 239 500 − 7 800 − 33 500 − 194 300 = 3 900 (tokenization, dispatch,
      detokenization); app_other = 1 000 000 − 800 000 = 200 000; the parts sum to 1 000 000.
    """
    trace_id = post_fixture(collector.url, "sglang_with_client.otlp.json")
    request = detail(collector.url, trace_id)
    assert nonzero_parts_us(request) == {
        "app_other": 200_000,
        "network": 560_500,
        "queue": 7_800,
        "prefill": 33_500,
        "decode": 194_300,
        "model_unattributed": 3_900,
    }
    assert sum(request["parts"].values()) == request["e2e_ns"] == 1000 * MS
    assert request["provenance"]["queue"] == request["provenance"]["decode"] == "reported"
    assert request["model_calls"] == 1
    assert (request["input_tokens"], request["output_tokens"]) == (5, 32)
    assert request["provider"] == "openai"  # the client's name for who it called
    # SGLang's spans are stored and shown, but own none of the request (not app time)
    for name in (" Req 49fa36ea", "prefill_waiting", "decode_loop"):
        assert find_span(request["spans"], name)["critical_ns"] == 0
    assert find_span(request["spans"], " Req 49fa36ea")["service"] == "sglang"


def test_without_its_stage_spans_queue_and_prefill_stay_unattributed(collector: Any) -> None:
    """The same trace, the scheduler's stage spans hung under a parent that never arrived (its
    thread span lost): only the request span's decode and total are known.

    Worked numbers (µs): network 560 500, decode 194 300, model_unattributed = 239 500 − 194 300
    = 45 200 (tokenization, queue and prefill, together), app_other 200 000.
    """

    def lose_the_scheduler_thread(spans: dict[str, Any]) -> None:
        for name in ("prefill_waiting", "prefill_forward"):
            spans[name]["parentSpanId"] = "c0000000000000ff"

    trace_id = post_fixture(collector.url, "sglang_with_client.otlp.json", lose_the_scheduler_thread)
    request = detail(collector.url, trace_id)
    assert nonzero_parts_us(request) == {
        "app_other": 200_000,
        "network": 560_500,
        "decode": 194_300,
        "model_unattributed": 45_200,
    }
    assert sum(request["parts"].values()) == request["e2e_ns"] == 1000 * MS


def test_client_reported_split_is_kept_beside_the_server_span(collector: Any) -> None:
    """The same trace, the client call made by our SDK's SGLang adapter, which read queue 7.8 ms,
    prefill 33.5 ms, decode 194.0 ms and e2e_latency 239.5 ms from ``meta_info``.

    Worked numbers (µs): the client's split is kept (SGLang's spans would give decode 194 300):
      network = 800 000 − 239 500 = 560 500; queue 7 800, prefill 33 500, decode 194 000;
      model_unattributed = 239 500 − 7 800 − 33 500 − 194 000 = 4 200; app_other 200 000.
    """

    def from_our_sdk(spans: dict[str, Any]) -> None:
        call = spans["chat qwen/qwen2.5-0.5b-instruct"]
        call["attributes"] = [
            {"key": "latencylens.span.kind", "value": {"stringValue": "model"}},
            {"key": "gen_ai.provider.name", "value": {"stringValue": "sglang"}},
            {"key": "gen_ai.request.model", "value": {"stringValue": "qwen/qwen2.5-0.5b-instruct"}},
            *(
                {"key": f"latencylens.provider.{name}_ns", "value": {"intValue": str(value)}}
                for name, value in (
                    ("queue", 7_800_000),
                    ("prefill", 33_500_000),
                    ("decode", 194_000_000),
                    ("server_total", 239_500_000),
                )
            ),
        ]

    trace_id = post_fixture(collector.url, "sglang_with_client.otlp.json", from_our_sdk)
    request = detail(collector.url, trace_id)
    assert nonzero_parts_us(request) == {
        "app_other": 200_000,
        "network": 560_500,
        "queue": 7_800,
        "prefill": 33_500,
        "decode": 194_000,
        "model_unattributed": 4_200,
    }
    assert sum(request["parts"].values()) == request["e2e_ns"]
    assert request["provider"] == "sglang"
    assert request["model_calls"] == 1
    assert (request["input_tokens"], request["output_tokens"]) == (5, 32)  # from SGLang's span


def test_server_only_trace_is_one_sglang_model_call(collector: Any) -> None:
    """SGLang called without trace context: its span is the request and the model call.

    Worked numbers (µs): duration = e2e 239 500; network 0; queue 7 800, prefill 33 500, decode
    194 300; model_unattributed 239 500 − 7 800 − 33 500 − 194 300 = 3 900. TTFT = SGLang's time to
    first token, 45 200; ITL = (e2e − TTFT) / (32 − 1) = 194 300 / 31 = 6 267.74… → 194 300 000 // 31
    = 6 267 741 ns.
    """
    trace_id = post_fixture(collector.url, "sglang_server_only.otlp.json")
    request = detail(collector.url, trace_id)
    assert request["e2e_ns"] == 239_500 * US
    assert nonzero_parts_us(request) == {
        "queue": 7_800,
        "prefill": 33_500,
        "decode": 194_300,
        "model_unattributed": 3_900,
    }
    assert request["provider"] == "sglang"  # not vLLM, whose attribute names SGLang reuses
    assert request["model"] == "qwen/qwen2.5-0.5b-instruct"
    assert (request["input_tokens"], request["output_tokens"]) == (5, 32)
    assert request["ttft_ns"] == 45_200 * US
    assert request["provenance"]["ttft"] == "reported"
    assert request["itl_ns"] == 194_300 * US // 31
