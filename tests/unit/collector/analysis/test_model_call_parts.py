"""One model call's duration split into network, queue, prefill, decode (or unsplit inference and
the server's other time) and unattributed time."""

from __future__ import annotations

from latencylens_collector.analysis.attribution import (
    COMPONENTS,
    DECODE,
    DERIVED,
    INFERENCE,
    MEASURED,
    MODEL_UNATTRIBUTED,
    NETWORK,
    PREFILL,
    QUEUE,
    REPORTED,
    SERVER_OTHER,
    ModelTiming,
    model_call_parts,
    scale_parts,
)

# Groq API reference usage: queue_time 0.037493756 s, prompt_time 0.000680594 s,
# completion_time 0.463333333 s, total_time 0.464013927 s (= prompt + completion; queue outside).
GROQ_TIMING = ModelTiming(
    queue_ns=37_493_756,
    prefill_ns=680_594,
    decode_ns=463_333_333,
    server_total_ns=37_493_756 + 464_013_927,  # = 501_507_683 ns of server time
)


def test_groq_reference_call_of_520_ms() -> None:
    parts = model_call_parts(520_000_000, GROQ_TIMING)
    assert parts.parts[QUEUE] == 37_493_756
    assert parts.parts[PREFILL] == 680_594
    assert parts.parts[DECODE] == 463_333_333
    # network = 520,000,000 − 501,507,683 = 18,492,317 ns
    assert parts.parts[NETWORK] == 18_492_317
    # Groq's total_time is exactly prompt + completion, so nothing is left unexplained.
    assert parts.parts[MODEL_UNATTRIBUTED] == 0
    assert sum(parts.parts.values()) == 520_000_000
    assert parts.provenance[QUEUE] == REPORTED
    assert parts.provenance[NETWORK] == DERIVED
    assert not parts.inconsistent


def test_server_total_larger_than_parts_leaves_unattributed_server_time() -> None:
    # Cerebras docs example: queue 73,161 + prompt 1,074,480 + completion 5,658,071 = 6,805,712 ns,
    # total_time 22,224,903 ns → 15,419,191 ns of server time the parts do not explain.
    timing = ModelTiming(
        queue_ns=73_161, prefill_ns=1_074_480, decode_ns=5_658_071, server_total_ns=22_224_903
    )
    parts = model_call_parts(30_000_000, timing)
    assert parts.parts[MODEL_UNATTRIBUTED] == 15_419_191
    assert parts.parts[NETWORK] == 30_000_000 - 22_224_903
    assert sum(parts.parts.values()) == 30_000_000


def test_provider_reporting_more_than_measured_is_clipped_and_flagged() -> None:
    # Client measured 400 ms but Groq reports 501.5 ms of server time: network would be −101.5 ms.
    parts = model_call_parts(400_000_000, GROQ_TIMING)
    assert parts.inconsistent
    assert parts.parts[NETWORK] == 0
    assert parts.parts[QUEUE] == 37_493_756
    assert parts.parts[PREFILL] == 680_594
    # decode gets what is left: 400,000,000 − 37,493,756 − 680,594 = 361,825,650
    assert parts.parts[DECODE] == 361_825_650
    assert parts.parts[MODEL_UNATTRIBUTED] == 0
    assert all(value >= 0 for value in parts.parts.values())
    assert sum(parts.parts.values()) == 400_000_000


def test_only_parts_reported_uses_their_sum_as_server_total() -> None:
    parts = model_call_parts(100, ModelTiming(queue_ns=10, decode_ns=50))
    assert parts.parts == {**dict.fromkeys(COMPONENTS, 0), QUEUE: 10, DECODE: 50, NETWORK: 40}


def test_stream_without_server_timing_measures_decode() -> None:
    # First content at 300 ms, last chunk at 900 ms of a 910 ms call.
    timing = ModelTiming(first_content_ns=300_000_000, last_chunk_ns=900_000_000)
    parts = model_call_parts(910_000_000, timing)
    assert parts.parts[DECODE] == 600_000_000
    assert parts.provenance[DECODE] == MEASURED
    assert parts.parts[MODEL_UNATTRIBUTED] == 310_000_000
    assert sum(parts.parts.values()) == 910_000_000


def test_no_timing_at_all_is_one_unattributed_block() -> None:
    parts = model_call_parts(5_000, None)
    assert parts.parts[MODEL_UNATTRIBUTED] == 5_000
    assert sum(parts.parts.values()) == 5_000


# TGI's response headers (router/src/server.rs; the reconstructed example of the provider-timing
# reference): x-total-time 1234 ms, x-validation-time 2, x-queue-time 15, x-inference-time 1217
# (prefill + decode together). The SDK's TGI adapter turns them into these ns.
MS = 1_000_000
TGI_TIMING = ModelTiming(queue_ns=15 * MS, inference_ns=1_217 * MS, server_total_ns=1_234 * MS)


def test_tgi_unsplit_inference_is_its_own_part_beside_the_servers_other_time() -> None:
    parts = model_call_parts(1_300 * MS, TGI_TIMING)
    assert parts.parts[QUEUE] == 15 * MS
    assert parts.parts[INFERENCE] == 1_217 * MS
    # server_other = total − queue − inference = 1234 − 15 − 1217 = 2 ms (= x-validation-time here)
    assert parts.parts[SERVER_OTHER] == 2 * MS
    # network = client duration − server total = 1300 − 1234 = 66 ms
    assert parts.parts[NETWORK] == 66 * MS
    assert parts.parts[PREFILL] == parts.parts[DECODE] == parts.parts[MODEL_UNATTRIBUTED] == 0
    assert sum(parts.parts.values()) == 1_300 * MS
    assert parts.provenance == {QUEUE: REPORTED, INFERENCE: REPORTED, NETWORK: DERIVED, SERVER_OTHER: DERIVED}
    assert not parts.inconsistent


def test_tgi_reports_longer_than_the_client_measured_are_clipped_in_order() -> None:
    # 1000 ms measured, 1234 ms reported: network 0, queue 15, inference gets the 985 ms left,
    # nothing is left for the server's other time.
    parts = model_call_parts(1_000 * MS, TGI_TIMING)
    assert parts.inconsistent
    assert parts.parts[NETWORK] == 0
    assert parts.parts[QUEUE] == 15 * MS
    assert parts.parts[INFERENCE] == 985 * MS
    assert parts.parts[SERVER_OTHER] == 0
    assert sum(parts.parts.values()) == 1_000 * MS
    # 1233 ms measured: queue and inference fit whole (1232 ms), the last 1 ms is server time.
    parts = model_call_parts(1_233 * MS, TGI_TIMING)
    assert parts.inconsistent
    assert (parts.parts[QUEUE], parts.parts[INFERENCE]) == (15 * MS, 1_217 * MS)
    assert parts.parts[SERVER_OTHER] == 1 * MS
    assert parts.parts[NETWORK] == 0
    assert sum(parts.parts.values()) == 1_233 * MS
    assert all(value >= 0 for value in parts.parts.values())


def test_tgi_without_a_total_uses_queue_plus_inference() -> None:
    parts = model_call_parts(1_300 * MS, ModelTiming(queue_ns=15 * MS, inference_ns=1_217 * MS))
    # server total = 15 + 1217 = 1232 ms → network 68 ms, no other server time
    assert parts.parts[NETWORK] == 68 * MS
    assert parts.parts[SERVER_OTHER] == 0
    assert parts.provenance[SERVER_OTHER] == DERIVED
    assert sum(parts.parts.values()) == 1_300 * MS


def test_total_below_its_own_parts_is_raised_to_their_sum() -> None:
    # Headers are truncated to whole ms, each on its own: say queue 15 + inference 1217 with a
    # total of 1231. The parts are kept, the total taken as 1232 ms, the call flagged.
    timing = ModelTiming(queue_ns=15 * MS, inference_ns=1_217 * MS, server_total_ns=1_231 * MS)
    parts = model_call_parts(1_300 * MS, timing)
    assert parts.inconsistent
    assert parts.parts[NETWORK] == 68 * MS  # 1300 − 1232, not 0: the client's wait is still network
    assert parts.parts[INFERENCE] == 1_217 * MS
    assert parts.parts[SERVER_OTHER] == 0
    assert sum(parts.parts.values()) == 1_300 * MS


def test_split_prefill_and_decode_win_over_an_unsplit_inference() -> None:
    timing = ModelTiming(queue_ns=10, prefill_ns=20, decode_ns=60, inference_ns=80, server_total_ns=95)
    parts = model_call_parts(100, timing)
    assert (parts.parts[PREFILL], parts.parts[DECODE], parts.parts[INFERENCE]) == (20, 60, 0)
    assert INFERENCE not in parts.provenance and SERVER_OTHER not in parts.provenance
    # 95 − (10 + 20 + 60) = 5 of server time the split parts leave: unattributed, as before
    assert parts.parts[MODEL_UNATTRIBUTED] == 5
    assert parts.parts[NETWORK] == 5


def test_scale_parts_sums_exactly() -> None:
    scaled = scale_parts({"a": 1, "b": 1, "c": 1}, 100)
    assert sum(scaled.values()) == 100
    assert sorted(scaled.values()) == [33, 33, 34]
    assert scale_parts({"a": 0}, 10) == {"a": 0}
