"""The one-sentence explanation of a request (pure function)."""

from __future__ import annotations

import pytest

from latencylens_collector.analysis.attribution import COMPONENTS
from latencylens_collector.analysis.explanation import explain, format_ns

MS = 1_000_000
PROVENANCE = {"decode": "reported", "network": "derived", "queue": "reported", "tool": "measured"}


def parts(**ms: int) -> dict[str, int]:
    return {name: ms.get(name, 0) * MS for name in COMPONENTS}


def test_decode_dominates() -> None:
    found = explain(parts(decode=1500, queue=300, network=200), PROVENANCE, 2000 * MS, "groq", "llama-3")
    assert (found.dominant, found.dominant_ns, found.share, found.provenance) == (
        "decode",
        1500 * MS,
        0.75,
        "reported",
    )
    assert found.sentence == (
        "Generating output tokens (decode) on llama-3 (groq) took 1.50 s of the request's 2.00 s (75%); "
        "as reported by groq."
    )


def test_network_is_derived() -> None:
    found = explain(parts(network=600, decode=400), PROVENANCE, 1000 * MS, "openai", "gpt")
    assert found.dominant == "network" and found.provenance == "derived"
    assert "minus the server time openai reported" in found.sentence


def test_measured_decode_without_a_report() -> None:
    found = explain(parts(decode=90, model_unattributed=10), {"decode": "measured"}, 100 * MS)
    assert found.sentence.endswith("measured from the first to the last streamed chunk.")


# TGI's reconstructed headers: x-queue-time 15, x-inference-time 1217 (prefill + decode), x-total-time
# 1234 ms → server other = 1234 − 15 − 1217 = 2 ms; a 1300 ms call → network 66 ms; 50 ms of app.
TGI_PROVENANCE = {
    "queue": "reported",
    "inference": "reported",
    "server_other": "derived",
    "network": "derived",
}


def test_unsplit_inference_is_named_with_what_the_provider_reported() -> None:
    found = explain(
        parts(queue=15, inference=1217, server_other=2, network=66, app_other=50),
        TGI_PROVENANCE,
        1350 * MS,
        "tgi",
        "llama-3.1-8b",
    )
    assert (found.dominant, found.provenance) == ("inference", "reported")
    # share = 1217 / 1350 = 0.901
    assert found.sentence == (
        "Prefill + decode (not split by the provider) on llama-3.1-8b (tgi) took 1.22 s of the request's "
        "1.35 s (90%); tgi reported queue 15 ms and inference (prefill + decode, not split) 1.22 s; "
        "2.0 ms of server time outside them."
    )


def test_queue_of_an_unsplit_provider_names_the_whole_report() -> None:
    found = explain(parts(queue=900, inference=80, server_other=20), TGI_PROVENANCE, 1000 * MS, "tgi", "m")
    assert found.sentence == (
        "Waiting in the provider's queue at tgi took 900 ms of the request's 1.00 s (90%); tgi reported "
        "queue 900 ms and inference (prefill + decode, not split) 80 ms; 20 ms of server time outside them."
    )
    only_inference = explain(parts(inference=80, server_other=20), {"inference": "reported"}, 100 * MS)
    assert only_inference.sentence.endswith(
        "the provider reported inference (prefill + decode, not split) 80 ms; "
        "20 ms of server time outside it."
    )


def test_empty_request_and_ties() -> None:
    found = explain(parts(), {}, 0)
    assert (found.dominant, found.share) == ("retrieval", 0.0)  # all zero: the first component
    assert explain(parts(tool=50, decode=50), PROVENANCE, 100 * MS).dominant == "tool"


@pytest.mark.parametrize(
    ("ns", "text"), [(850 * MS, "850 ms"), (1_250 * MS, "1.25 s"), (400_000, "0.4 ms"), (12 * MS, "12 ms")]
)
def test_format(ns: int, text: str) -> None:
    assert format_ns(ns) == text
