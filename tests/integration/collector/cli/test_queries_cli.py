"""``latencylens explain | stats | compare`` and ``slow --cursor`` against a running collector."""

from __future__ import annotations

import argparse
import json
import re
import time

import pytest
from queries_data import MS, S, request_row, trace_id

from latencylens_collector.cli.http import ServiceClient
from latencylens_collector.cli.main import main


@pytest.fixture
def loaded(collector):
    """Two hours ago: m-small 1000 ms (decode 600), m-big 2000 ms (queue 1500); an hour later m-big
    again with 3000 ms of queue."""
    t0 = (time.time_ns() // (3600 * S) - 2) * 3600 * S
    collector.store.upsert_requests(
        [
            request_row(1, t0, {"network": 100, "queue": 300, "decode": 600}, model="m-small", ttft_ms=400),
            request_row(
                2, t0 + S, {"network": 100, "queue": 1500, "decode": 400}, model="m-big", ttft_ms=1600
            ),
            request_row(
                3, t0 + 3600 * S, {"network": 100, "queue": 3000, "decode": 400}, model="m-big", ttft_ms=3100
            ),
        ]
    )
    collector.t0 = t0
    return collector


def test_stats_json_and_table(loaded, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    assert main(["stats", "--url", loaded.url, "--by", "model", "--since", "1d", "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert [(g["key"]["model"], g["count"]) for g in body["groups"]] == [("m-big", 2), ("m-small", 1)]
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["stats", "--url", loaded.url, "--by", "model"]) == 0
    out = capsys.readouterr().out
    assert "m-big" in out and "m-small" in out and "queue" in out


def test_stats_rejected_group_by_is_reported(loaded, capsys) -> None:
    assert main(["stats", "--url", loaded.url, "--by", "colour"]) == 1
    assert "allowed: service, route, model, provider" in capsys.readouterr().err


def test_explain_table(loaded, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["explain", trace_id(2).hex(), "--url", loaded.url]) == 0
    out = capsys.readouterr().out
    assert "Waiting in the provider's queue at groq took 1.50 s of the request's 2.00 s (75%)" in out
    assert "dominant: queue 1500.0 ms" in out


def test_compare_table(loaded, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    a0 = loaded.t0 // S
    argv = [
        "compare",
        "--url",
        loaded.url,
        "--a-since",
        str(a0),
        "--a-until",
        str(a0 + 3600),
        "--b-since",
        str(a0 + 3600),
        "--b-until",
        str(a0 + 7200),
        "--by",
        "model",
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out
    # A TTFT [400, 1600] p95 → 1600; B [3100] → 3100. Cut to 8 significant bits: 1593.8 and
    # 3087.0 ms → +1.49 s. Queue p95 1500 → 3000 ms: 1493.2 → 2986.3 ms → +1.49 s, on m-big.
    assert "p95 TTFT +1.49 s, of which queue +1.49 s on model m-big" in out
    assert main([*argv, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["groups"][0]["key"] == {"model": "m-big"}


def test_explain_and_slow_show_unsplit_inference(collector, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    """A TGI call as attribution splits its reconstructed headers (x-queue-time 15, x-inference-time
    1217, x-total-time 1234 ms) over 1300 ms: network 66, server other 1234 − 15 − 1217 = 2."""
    row = request_row(
        7,
        time.time_ns() - 3600 * S,
        {"network": 66, "queue": 15, "inference": 1217, "server_other": 2},
        model="llama-3.1-8b",
        provider="tgi",
    )
    row["provenance"] = {
        "network": "derived",
        "queue": "reported",
        "inference": "reported",
        "server_other": "derived",
    }
    collector.store.upsert_requests([row])
    monkeypatch.setenv("COLUMNS", "300")
    assert main(["explain", trace_id(7).hex(), "--url", collector.url]) == 0
    out = capsys.readouterr().out
    assert (
        "tgi reported queue 15 ms and inference (prefill + decode, not split) 1.22 s; 2.0 ms of server" in out
    )
    # The parts table lists the components this request has, the two new ones included.
    header = next(line for line in out.splitlines() if line.split()[:1] == ["e2e"])
    assert re.split(r"\s{2,}", header.strip()) == ["e2e", "network", "queue", "inference", "server, other"]
    assert "1217.0" in out and "2.0" in out
    assert main(["slow", "--url", collector.url]) == 0
    out = capsys.readouterr().out
    assert "inference" in out and "server, other" in out and "1217.0" in out
    assert "inference = prefill + decode, not split by the provider" in out


def test_slow_pages_with_cursor(loaded, capsys) -> None:
    assert main(["slow", "--url", loaded.url, "--limit", "2", "--json"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert [r["e2e_ns"] // MS for r in first["requests"]] == [3500, 2000]
    assert (
        main(["slow", "--url", loaded.url, "--limit", "2", "--cursor", first["next_cursor"], "--json"]) == 0
    )
    second = json.loads(capsys.readouterr().out)
    assert [r["e2e_ns"] // MS for r in second["requests"]] == [1000] and second["next_cursor"] is None
    assert main(["slow", "--url", loaded.url, "--limit", "2"]) == 0
    assert f"--cursor {first['next_cursor']}" in capsys.readouterr().out


def test_api_key_goes_in_the_authorization_header(monkeypatch: pytest.MonkeyPatch) -> None:
    def headers(api_key: str | None) -> dict[str, str]:
        return ServiceClient.from_args(argparse.Namespace(url="http://x", api_key=api_key)).headers()

    monkeypatch.delenv("LATENCYLENS_API_KEY", raising=False)
    assert headers(None) == {}
    monkeypatch.setenv("LATENCYLENS_API_KEY", "from-env")
    assert headers(None) == {"Authorization": "Bearer from-env"}
    assert headers("flag") == {"Authorization": "Bearer flag"}


def test_relative_times_are_read_by_the_service(loaded, capsys) -> None:
    """``--since 3h`` goes to the service as typed; the rows of two and one hours ago are in."""
    assert main(["stats", "--url", loaded.url, "--since", "3h", "--json"]) == 0
    assert sum(g["count"] for g in json.loads(capsys.readouterr().out)["groups"]) == 3
    assert main(["stats", "--url", loaded.url, "--since", "30m", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["groups"] == []


def test_unreachable_collector(capsys) -> None:
    assert main(["stats", "--url", "http://127.0.0.1:9"]) == 3
    assert "cannot reach" in capsys.readouterr().err
