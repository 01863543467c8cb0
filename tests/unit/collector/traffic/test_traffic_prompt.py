"""Synthetic prompts of a token length and the request bodies built from a shape."""

from __future__ import annotations

from latencylens_collector.traffic.prompt import VOCABULARY, split_prompt, synthetic_prompt, word_count
from latencylens_collector.traffic.shape import RequestShape
from latencylens_collector.traffic.target import Target, anthropic_request, is_loopback, openai_request


def test_prompt_has_one_word_per_token_from_the_vocabulary() -> None:
    for tokens in (0, 1, 7, 512, 3000):
        text = synthetic_prompt(tokens, key="a")
        assert word_count(text) == tokens
        assert set(text.split()) <= set(VOCABULARY)
        assert text == "" or text.startswith(" ")  # each word after a space: one token each


def test_cached_prefix_is_shared_and_the_rest_is_not() -> None:
    first = synthetic_prompt(600, cached_tokens=400, key="trace-1").split()
    second = synthetic_prompt(600, cached_tokens=400, key="trace-2").split()
    assert first[:400] == second[:400]
    assert first[400:] != second[400:]
    assert synthetic_prompt(600, 400, "trace-1") == synthetic_prompt(600, 400, "trace-1")  # stable


def test_split_prompt_cuts_after_the_shared_prefix() -> None:
    prefix, rest = split_prompt(50, 20, "k")
    assert prefix + rest == synthetic_prompt(50, 20, "k")
    assert word_count(prefix) == 20 and word_count(rest) == 30


def test_openai_body_streams_with_usage_and_bounds_the_output() -> None:
    shape = RequestShape(offset_ns=0, input_tokens=120, output_tokens=33, source_trace_id="ab")
    body = openai_request(shape, Target(base_url="http://127.0.0.1:8000/v1", model="m"))
    assert body["max_tokens"] == 33 and body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert word_count(body["messages"][0]["content"]) == 120
    assert "extra_body" not in body  # hosted OpenAI refuses unknown fields
    vllm = openai_request(shape, Target(base_url="http://127.0.0.1:8000/v1", model="m", provider="vllm"))
    assert vllm["extra_body"] == {"ignore_eos": True, "min_tokens": 33}
    forced = Target(base_url="http://x/v1", model="m", provider="vllm", ignore_eos=False)
    assert "extra_body" not in openai_request(shape, forced)


def test_anthropic_body_puts_a_long_cached_prefix_in_a_cached_system_block() -> None:
    target = Target(base_url="http://127.0.0.1:9/", model="claude", api="anthropic")
    long = anthropic_request(RequestShape(0, 3000, 50, cached_input_tokens=2048, source_trace_id="t"), target)
    assert long["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert word_count(long["system"][0]["text"]) == 2048
    assert word_count(long["messages"][0]["content"]) == 952
    short = anthropic_request(RequestShape(0, 300, 50, cached_input_tokens=200), target)
    assert "system" not in short and word_count(short["messages"][0]["content"]) == 300
    assert short["max_tokens"] == 50 and short["stream"] is True


def test_loopback_endpoints() -> None:
    for url in (
        "http://127.0.0.1:8000/v1",
        "http://localhost:11434/v1",
        "http://[::1]:8000",
        "http://127.3.4.5",
    ):
        assert is_loopback(url), url
    for url in ("https://api.openai.com/v1", "http://10.0.0.5:8000/v1", "http://vllm:8000/v1", "not a url"):
        assert not is_loopback(url), url
