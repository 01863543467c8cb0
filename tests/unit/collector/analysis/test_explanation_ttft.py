"""The explanation names TTFT when the wait for the first token is what dominated."""

from __future__ import annotations

from latencylens_collector.analysis.attribution import ModelTiming, model_call_parts
from latencylens_collector.analysis.explanation import explain

MS = 1_000_000


def test_a_call_without_server_timing_is_explained_as_the_wait_for_the_first_token() -> None:
    # A 1800 ms streamed call, first content at 1200 ms, last chunk at 1700 ms, no server timing:
    # decode 500 ms (measured), model-unattributed 1300 ms; the request adds 200 ms of app time.
    call = model_call_parts(1_800 * MS, ModelTiming(first_content_ns=1_200 * MS, last_chunk_ns=1_700 * MS))
    parts = {**call.parts, "app_other": 200 * MS}
    found = explain(
        parts, {**call.provenance, "app_other": "measured"}, 2_000 * MS, "openai", "gpt-4o", 1_200 * MS
    )
    assert found.dominant == "model_unattributed" and found.dominant_ns == 1_300 * MS
    assert found.sentence == (
        "Waiting for the first token (TTFT 1.20 s) on gpt-4o (openai) took 1.30 s of the request's 2.00 s "
        "(65%); openai reported no server timing, so the wait before the first content chunk (network, "
        "queue and prefill together) is not split."
    )


def test_ttft_is_added_when_it_is_most_of_the_request() -> None:
    # Reported timing: queue 900 + prefill 100 + decode 600 of a 1700 ms call, network 100;
    # the first token came after 1.10 s of the 1.70 s: more than half, so the sentence says so.
    parts = {"network": 100 * MS, "queue": 900 * MS, "prefill": 100 * MS, "decode": 600 * MS}
    provenance = {"network": "derived", "queue": "reported", "prefill": "reported", "decode": "reported"}
    found = explain(parts, provenance, 1_700 * MS, "groq", "llama", 1_100 * MS)
    assert found.sentence == (
        "Waiting in the provider's queue at groq took 900 ms of the request's 1.70 s (53%); as reported by "
        "groq; the first token came after 1.10 s (TTFT)."
    )
    # Without TTFT, or when it is the smaller half, the sentence is as before.
    assert "TTFT" not in explain(parts, provenance, 1_700 * MS, "groq", "llama").sentence
    assert "TTFT" not in explain(parts, provenance, 1_700 * MS, "groq", "llama", 800 * MS).sentence
