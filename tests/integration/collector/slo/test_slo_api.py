"""The SLO API, the SLO file, the in-service scheduler, /metrics and the CLI, on a real collector."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from slo_support import MS, Chat, otel_spans, protobuf_body

from latencylens_collector.cli.main import main as cli_main
from latencylens_collector.metadata import db

SLO_FILE = """
slos:
  - name: chat p95 ttft
    metric: ttft
    filter: {service: chat-api}
    objective: {type: percentile, quantile: 0.95, threshold_ns: 800ms, window: 5m, for: 10m}
    min_requests: 20
  - name: other team
    project: team-b
    objective: {type: ratio, target: 0.99, threshold_ns: 1000000000, period: 30d}
"""
RATIO = {
    "name": "99% within 1 s",
    "metric": "ttft",
    "filter": {"model": "llama-3.3-70b"},
    "objective": {"type": "ratio", "target": 0.99, "threshold_ns": 1000 * MS, "period": "30d"},
    "min_requests": 50,
}


def test_slo_crud_file_and_silences(
    start_collector: Callable[..., Any], metadata_url: str, tmp_path: Path
) -> None:
    path = tmp_path / "slos.yaml"
    path.write_text(SLO_FILE)
    collector = start_collector(metadata_url=metadata_url, slo_file=str(path), slo_eval_interval_s=0)
    api = f"{collector.url}/api"

    (from_file,) = httpx.get(f"{api}/slos").json()["slos"]  # team-b's SLO is not ours to see
    assert from_file == {
        "id": from_file["id"],
        "name": "chat p95 ttft",
        "project": "default",
        "source": "file",
        "metric": "ttft",
        "filter": {"service": "chat-api"},
        "objective": {
            "type": "percentile",
            "quantile": 0.95,
            "threshold_ns": 800 * MS,
            "window": "5m",
            "for": "10m",
        },
        "min_requests": 20,
        "status": "no_data",
        "budget_remaining": None,
        "burn_rates": {},
        "value_ns": None,
        "evaluated_at": None,
    }

    created = httpx.post(f"{api}/slos", json=RATIO)
    assert created.status_code == 201
    slo = created.json()
    assert slo["objective"] == RATIO["objective"] and slo["source"] == "api"
    assert httpx.post(f"{api}/slos", json=RATIO).status_code == 409
    bad = {**RATIO, "name": "x", "objective": {"type": "ratio", "target": 1.5, "threshold_ns": 1}}
    assert httpx.post(f"{api}/slos", json=bad).status_code == 422
    assert httpx.post(f"{api}/slos", json={**RATIO, "name": "y", "metric": "tpot"}).status_code == 422
    assert httpx.get(f"{api}/slos/{slo['id']}").json()["name"] == "99% within 1 s"

    silence = httpx.post(
        f"{api}/silences", json={"slo_id": slo["id"], "until": "2100-01-01T00:00:00Z", "reason": "migration"}
    )
    assert silence.status_code == 201 and silence.json()["active"] is True
    past = {"slo_id": slo["id"], "until": "2000-01-01T00:00:00Z"}
    assert httpx.post(f"{api}/silences", json=past).status_code == 422
    assert httpx.post(f"{api}/silences", json={**past, "until": "2999-01-01"}).status_code == 422
    assert (
        httpx.post(f"{api}/silences", json={**past, "slo_id": 9999, "until": "2100-01-01"}).status_code == 404
    )
    assert [s["reason"] for s in httpx.get(f"{api}/silences").json()["silences"]] == ["migration"]

    assert httpx.get(f"{api}/alerts").json() == {"alerts": []}
    assert httpx.get(f"{api}/alerts/1/history").status_code == 404
    assert httpx.delete(f"{api}/slos/{slo['id']}").status_code == 204
    assert httpx.get(f"{api}/slos/{slo['id']}").status_code == 404
    assert httpx.delete(f"{api}/slos/{slo['id']}").status_code == 404


def test_scheduler_evaluates_in_the_service_and_metrics_are_exposed(
    start_collector: Callable[..., Any], metadata_url: str
) -> None:
    collector = start_collector(metadata_url=metadata_url, slo_eval_interval_s=1)
    now = time.time_ns()
    # 60 requests over the last 10 minutes, all with TTFT 70 ms and end-to-end 310 ms.
    spans = [s for i in range(60) for s in otel_spans(now - (600 - 10 * i) * 1_000_000_000, Chat())]
    response = httpx.post(
        f"{collector.url}/v1/traces",
        content=protobuf_body(spans),
        headers={"Content-Type": "application/x-protobuf"},
    )
    assert response.status_code == 200
    slo = httpx.post(f"{collector.url}/api/slos", json=RATIO).json()

    # The scheduler runs every second on the service's real clock: wait for an evaluation that saw
    # the traffic (a liveness check, not a timing assertion).
    deadline = time.monotonic() + 60
    while True:
        status = httpx.get(f"{collector.url}/api/slos/{slo['id']}").json()
        if status["evaluated_at"] and status["budget_remaining"] is not None:
            break
        assert time.monotonic() < deadline, status
        time.sleep(0.2)
    assert status["status"] == "ok" and status["budget_remaining"] == 1.0  # no request above 1 s
    assert status["burn_rates"]["1h"] == 0.0 and status["value_ns"] == 70 * MS

    text = httpx.get(f"{collector.url}/metrics").text
    labels = 'model="llama-3.3-70b",project="default",service="chat-api"'
    # 70 ms TTFT: above the 0.05 s bound, within 0.1 s. 310 ms end-to-end: within 0.5 s, not 0.3 s.
    assert f'latencylens_ttft_seconds_bucket{{le="0.05",{labels}}} 0.0' in text
    assert f'latencylens_ttft_seconds_bucket{{le="0.1",{labels}}} 60.0' in text
    assert f'latencylens_ttft_seconds_bucket{{le="+Inf",{labels}}} 60.0' in text
    assert f"latencylens_ttft_seconds_count{{{labels}}} 60.0" in text
    assert f"latencylens_ttft_seconds_sum{{{labels}}} 4.2" in text  # 60 × 0.07 s
    assert f'latencylens_e2e_seconds_bucket{{le="0.3",{labels}}} 0.0' in text
    assert f'latencylens_e2e_seconds_bucket{{le="0.5",{labels}}} 60.0' in text
    assert 'latencylens_slo_burn_rate{project="default",slo="99% within 1 s",window="1h"} 0.0' in text
    assert 'latencylens_slo_error_budget_remaining{project="default",slo="99% within 1 s"} 1.0' in text
    assert 'latencylens_slo_alert_firing{project="default",slo="99% within 1 s"} 0.0' in text


def test_cli_lists_slos_and_migrates(
    start_collector: Callable[..., Any], metadata_url: str, tmp_path: Path, capsys: Any
) -> None:
    collector = start_collector(metadata_url=metadata_url, slo_eval_interval_s=0)
    args = [
        "slo",
        "create",
        "--url",
        collector.url,
        "--name",
        "p95",
        "--quantile",
        "0.95",
        "--threshold-ms",
        "800",
    ]
    assert cli_main(args) == 0
    capsys.readouterr()
    assert cli_main(["slo", "list", "--url", collector.url, "--json"]) == 0
    (slo,) = __import__("json").loads(capsys.readouterr().out)["slos"]
    assert slo["objective"] == {
        "type": "percentile",
        "quantile": 0.95,
        "threshold_ns": 800 * MS,
        "window": "5m",
        "for": "10m",
    }
    assert cli_main(["slo", "alerts", "--url", collector.url]) == 0

    fresh = f"sqlite:///{tmp_path / 'fresh.db'}"
    assert cli_main(["slo", "migrate", "--metadata-url", fresh]) == 0
    assert "at revision keys_0002" in capsys.readouterr().out
    assert db.current_revision(db.make_engine(fresh)) == "keys_0002"
