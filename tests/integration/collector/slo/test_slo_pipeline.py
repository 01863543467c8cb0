"""A TTFT breach through the real pipeline: OTLP protobuf (built by the OpenTelemetry SDK's encoder)
→ collector → chdb → SLO evaluation → webhook on 127.0.0.1, with queue time injected at the provider.

The collector's own scheduler is off (interval 0); the test evaluates the same metadata database
and the collector's store with a hand-driven clock, one evaluation per simulated minute, as the
scheduler would with a 60 s interval.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import httpx
import pytest
from slo_support import BASE_NS, MINUTE, MS, Chat, FakeClock, S, WebhookReceiver, otel_spans, protobuf_body

from latencylens_collector.metadata import db
from latencylens_collector.slo.evaluator import Evaluator
from latencylens_collector.slo.notifier import Notifier, Target
from latencylens_collector.slo.repository import SloRepository

T0 = BASE_NS
HEALTHY = Chat(queue=20)  # TTFT 70 ms
QUEUED = Chat(queue=1500)  # TTFT 1550 ms: the provider's queue is backed up
EVERY = 30 * S  # one request every 30 s throughout


def post(url: str, starts: Sequence[int], chat: Chat) -> None:
    spans = [span for start in starts for span in otel_spans(start, chat)]
    response = httpx.post(
        f"{url}/v1/traces", content=protobuf_body(spans), headers={"Content-Type": "application/x-protobuf"}
    )
    assert response.status_code == 200, response.text


def wait_for_rows(collector: Any, count: int, timeout_s: float = 60.0) -> None:
    """Ingest may be asynchronous: wait until the collector has stored ``count`` requests."""
    sql = f"SELECT count() AS n FROM {collector.store.database}.requests FINAL"
    deadline = time.monotonic() + timeout_s
    while (n := collector.store.query(sql)[0]["n"]) < count:
        assert time.monotonic() < deadline, f"only {n} of {count} requests stored"
        time.sleep(0.05)


def starts(from_min: int, to_min: int) -> list[int]:
    return list(range(T0 + from_min * MINUTE, T0 + to_min * MINUTE, EVERY))


@pytest.fixture
def receiver() -> Any:
    with WebhookReceiver() as hook:
        yield hook


def test_ttft_breach_fires_names_queue_and_resolves(
    start_collector: Callable[..., Any], metadata_url: str, receiver: WebhookReceiver
) -> None:
    collector = start_collector(metadata_url=metadata_url, slo_eval_interval_s=0)
    slo = httpx.post(
        f"{collector.url}/api/slos",
        json={
            "name": "chat starts streaming within 1 s",
            "metric": "ttft",
            "filter": {"service": "chat-api", "route": "POST /chat", "provider": "groq"},
            "objective": {"type": "ratio", "target": 0.99, "threshold_ns": 1000 * MS, "period": "30d"},
            "min_requests": 10,
        },
    ).json()

    engine = db.make_engine(metadata_url)
    clock = FakeClock(T0)
    sleeps: list[float] = []
    evaluator = Evaluator(
        SloRepository(engine),
        collector.store,
        Notifier([Target(receiver.url)], sleep=sleeps.append),
        clock,
        collector.url,
    )

    def evaluate_at(minute: int) -> Any:
        clock.now_ns = T0 + minute * MINUTE
        (result,) = evaluator.run_once()
        return result

    # Six healthy hours, then the provider queues every request for 1.5 s from T0 to T0+10m.
    post(collector.url, starts(-360, 0), HEALTHY)  # 720 requests
    post(collector.url, starts(0, 10), QUEUED)  # 20 requests
    wait_for_rows(collector, 740)

    # The fast pair's 1 h window holds 120 requests, 2 per minute; t minutes into the breach 2t are
    # bad: burn = (2t / 120) / 0.01 = 1.67·t, above 14.4 once t > 8.64. The 5 min window is all bad
    # from t = 5 (burn 100). The slow pair needs (2t / 720) / 0.01 > 6, t > 21.6: later.
    results = {minute: evaluate_at(minute) for minute in range(0, 10)}
    assert all(results[m].transitions == [] for m in range(0, 9))
    assert results[8].measurement.burn_rates["1h"] == pytest.approx(16 / 1.2)  # 13.3: not yet
    fired = results[9]  # condition true since t = 8.64: fired at the next evaluation
    assert fired.transitions == ["pending", "firing"]
    # 1 h: 18 of 120 bad → 15×; 5 min: 10 of 10 → 100×; 6 h: 18 of 720 → 2.5×; 30 min: 18 of 60 → 30×.
    assert fired.measurement.burn_rates == pytest.approx({"1h": 15.0, "5m": 100.0, "6h": 2.5, "30m": 30.0})
    # Budget over 30 days: 18 bad of 738 with 1 % allowed (7.38) → 1 − 18 / 7.38 = −1.439.
    assert fired.measurement.budget_remaining == pytest.approx(1 - 18 / 7.38)
    assert [d.ok for d in fired.deliveries] == [True]

    (payload,) = receiver.bodies
    assert payload["state"] == "firing"
    assert payload["slo_name"] == "chat starts streaming within 1 s"
    # p99 over 1 h: element ⌊0.99·120⌋ = 118 of 102 × 70 ms then 18 × 1550 ms → 1550 ms.
    assert payload["value_ns"] == 1550 * MS
    assert payload["burn_rate"] == pytest.approx(15.0)
    # Cause: queue mean over the last 5 min is 1500 ms; over the 5 min before the 1 h window it was 20.
    assert payload["dominant_component"] == "queue"
    assert payload["dominant_delta_ns"] == 1480 * MS
    assert len(payload["worst_requests"]) == 5
    worst = payload["worst_requests"][0]
    assert worst["value_ns"] == 1550 * MS
    detail = httpx.get(worst["url"]).json()  # the link works on the collector
    assert detail["ttft_ns"] == 1550 * MS and detail["parts"]["queue"] == 1500 * MS

    # Recovery from T0+10m. The alert holds while the last 5 min still burn (T0+14m: 2 of 10 bad,
    # 20×) and resolves at T0+15m, when the 5 min window is clean and the 6 h burn (20 of 720 → 2.8×)
    # is under 6.
    post(collector.url, starts(10, 16), HEALTHY)
    wait_for_rows(collector, 752)
    assert [evaluate_at(m).transitions for m in range(10, 16)] == [[], [], [], [], [], ["resolved"]]
    assert [body["state"] for body in receiver.bodies] == ["firing", "resolved"]
    assert sleeps == []

    # The collector's API shows the same alert, its history and the SLO's status.
    (alert,) = httpx.get(f"{collector.url}/api/alerts", params={"slo_id": slo["id"]}).json()["alerts"]
    assert alert["state"] == "resolved" and alert["dominant_component"] == "queue"
    assert alert["fired_at"] == "2026-01-01T00:09:00Z" and alert["resolved_at"] == "2026-01-01T00:15:00Z"
    history = httpx.get(f"{collector.url}/api/alerts/{alert['id']}/history").json()["transitions"]
    assert [t["state"] for t in history if "notification" not in t["note"]] == [
        "pending",
        "firing",
        "resolved",
    ]
    status = httpx.get(f"{collector.url}/api/slos/{slo['id']}").json()
    assert status["status"] == "ok" and status["evaluated_at"] == "2026-01-01T00:15:00Z"
    engine.dispose()
