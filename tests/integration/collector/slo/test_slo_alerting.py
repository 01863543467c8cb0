"""Evaluation over real chdb and SQLite: lifecycle, dedupe, silences and the minimum-traffic rule.

Traffic is fed through the real Ingestor; the clock moves by hand; notifications go to a real
HTTP receiver on 127.0.0.1.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from conftest import PUBLIC_URL, Rig
from slo_support import BASE_NS, MINUTE, MS, Chat, S, WebhookReceiver, spread

from latencylens_collector.slo.notifier import Target

T0 = BASE_NS
HEALTHY = Chat(queue=20)  # TTFT = 40/2 + 20 + 30 = 70 ms
SLOW = Chat(queue=1500)  # TTFT = 20 + 1500 + 30 = 1550 ms
P95_800 = {
    "name": "chat p95 ttft",
    "metric": "ttft",
    "filter": {"service": "chat-api"},
    "objective": {
        "type": "percentile",
        "quantile": 0.95,
        "threshold_ns": 800 * MS,
        "window": "5m",
        "for": "2m",
    },
    "min_requests": 20,
}


def every_10s(start_min: int, end_min: int) -> list[int]:
    return list(spread(T0 + start_min * MINUTE, T0 + end_min * MINUTE, (end_min - start_min) * 6))


def test_percentile_alert_pending_firing_resolved_and_notified_once_each(
    make_rig: Callable[..., Rig],
) -> None:
    with WebhookReceiver() as receiver:
        rig = make_rig([Target(receiver.url)])
        rig.traffic(every_10s(-20, -10), HEALTHY)
        rig.traffic(every_10s(-10, 5), SLOW)
        rig.traffic(every_10s(5, 20), HEALTHY)
        rig.traffic(every_10s(-10, 5), HEALTHY, service="other-api")  # outside the filter
        slo = rig.create(P95_800)

        states: dict[int, tuple[str, list[str]]] = {}
        for minute in range(-10, 11):
            rig.clock.now_ns = T0 + minute * MINUTE
            result = rig.evaluate(slo)
            states[minute] = (result.status, result.transitions)

    # T0−10m: window [−15, −10) holds 30 healthy requests → ok.
    assert states[-10] == ("ok", [])
    # T0−9m: [−14, −9) = 24 healthy + 6 slow; p95 is element ⌊0.95·30⌋ = 28 of the sorted 30 → 1550 ms.
    assert states[-9] == ("pending", ["pending"])
    assert states[-8] == ("pending", [])  # held 1 of 2 minutes
    assert states[-7] == ("firing", ["firing"])
    # Dedupe: the breach persists for 16 more evaluations, nothing new is stored or sent.
    assert all(states[m] == ("firing", []) for m in range(-6, 10))
    # T0+10m: [5, 10) is all healthy again.
    assert states[10] == ("ok", ["resolved"])

    (alert,) = rig.repository.alerts("default", slo.id, 10)
    assert (alert.started_at_ns, alert.fired_at_ns, alert.resolved_at_ns) == (
        T0 - 9 * MINUTE,
        T0 - 7 * MINUTE,
        T0 + 10 * MINUTE,
    )
    assert [(t.state, t.at_ns) for t in rig.repository.history(alert.id) if "notification" not in t.note] == [
        ("pending", T0 - 9 * MINUTE),
        ("firing", T0 - 7 * MINUTE),
        ("resolved", T0 + 10 * MINUTE),
    ]
    assert [body["state"] for body in receiver.bodies] == ["firing", "resolved"]
    firing = receiver.bodies[0]
    assert firing["slo_name"] == "chat p95 ttft"
    assert firing["value_ns"] == 1550 * MS
    # Cause: the breach window [−12, −7) has 12 healthy + 18 slow requests, queue mean
    # (12·20 + 18·1500) / 30 = 908 ms; the window before the alert opened, [−14, −9), has 24 healthy
    # + 6 slow: (24·20 + 6·1500) / 30 = 316 ms. Prefill and network did not change.
    assert firing["dominant_component"] == "queue"
    assert firing["dominant_delta_ns"] == 592 * MS
    assert firing["dominant_breach_mean_ns"] == 908 * MS
    assert firing["dominant_previous_mean_ns"] == 316 * MS
    assert alert.dominant_component == "queue" and alert.dominant_delta_ns == 592 * MS
    assert len(firing["worst_requests"]) == 5
    assert all(w["value_ns"] == 1550 * MS for w in firing["worst_requests"])
    assert all(w["url"] == f"{PUBLIC_URL}/api/requests/{w['trace_id']}" for w in firing["worst_requests"])
    assert sorted(w["trace_id"] for w in firing["worst_requests"]) == sorted(alert.worst_trace_ids)


def test_silence_holds_notifications_until_it_expires(make_rig: Callable[..., Rig]) -> None:
    with WebhookReceiver() as receiver:
        rig = make_rig([Target(receiver.url)])
        rig.traffic(every_10s(-10, 10), SLOW)
        slo = rig.create({**P95_800, "objective": {**P95_800["objective"], "for": "0m"}})  # type: ignore[dict-item]
        rig.repository.add_silence("default", slo.id, T0 + 2 * MINUTE, "provider incident", T0)

        rig.clock.now_ns = T0
        assert rig.evaluate(slo).transitions == ["pending", "firing"]
        rig.clock.now_ns = T0 + MINUTE
        rig.evaluate(slo)
        assert receiver.hits == 0  # silenced: the alert is stored, nobody is paged
        rig.clock.now_ns = T0 + 2 * MINUTE  # the silence ends at T0+2m (exclusive)
        sent = rig.evaluate(slo).deliveries
        rig.clock.now_ns = T0 + 3 * MINUTE
        again = rig.evaluate(slo).deliveries

    assert [d.ok for d in sent] == [True] and again == []
    assert [body["state"] for body in receiver.bodies] == ["firing"]
    (alert,) = rig.repository.alerts("default", slo.id, 10)
    notes = [t.note for t in rig.repository.history(alert.id)]
    assert notes[2].startswith("firing not sent: silenced until 2026-01-01T00:02:00Z (provider incident)")
    assert sum(note.startswith("firing not sent") for note in notes) == 1
    assert notes[3].startswith(f"firing notification: {receiver.url} ok after 1 attempt")


def test_below_minimum_traffic_nothing_fires(make_rig: Callable[..., Rig]) -> None:
    with WebhookReceiver() as receiver:
        rig = make_rig([Target(receiver.url)])
        slo = rig.create({**P95_800, "objective": {**P95_800["objective"], "for": "0m"}})  # type: ignore[dict-item]
        # 19 requests, every one 1550 ms, in the 5 min window: one short of min_requests.
        rig.traffic(list(spread(T0 - 5 * MINUTE, T0 - 10 * S, 19)), SLOW)
        rig.clock.now_ns = T0
        quiet = rig.evaluate(slo)
        assert (quiet.status, quiet.transitions, quiet.measurement.total) == ("no_data", [], 19)
        assert quiet.measurement.value_ns == 1550 * MS  # measured and shown, just not alerted on
        assert rig.repository.alerts("default", slo.id, 10) == []
        # The 20th request makes the same breach count.
        rig.traffic([T0 - 5 * S], SLOW)
        loud = rig.evaluate(slo)
    assert (loud.status, loud.transitions) == ("firing", ["pending", "firing"])
    assert receiver.hits == 1


def test_projects_do_not_see_each_other(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig()
    slo = rig.create(P95_800, project="team-a")
    rig.create(P95_800, project="team-b")  # same name, other project: allowed
    assert [s.id for s in rig.repository.slos("team-a")] == [slo.id]
    assert rig.repository.get("team-b", slo.id) is None
    assert not rig.repository.delete("team-b", slo.id, T0)
    assert rig.repository.add_silence("team-b", slo.id, T0 + MINUTE, "", T0) is None


@pytest.mark.parametrize("metric", ["e2e", "itl"])
def test_other_metrics_are_measured_on_their_columns(make_rig: Callable[..., Rig], metric: str) -> None:
    rig = make_rig()
    rig.traffic(every_10s(-5, 0), HEALTHY)
    slo = rig.create({**P95_800, "metric": metric})
    rig.clock.now_ns = T0
    value = rig.evaluate(slo).measurement.value_ns
    # e2e: root = network + queue + prefill + decode + 20 = 40 + 20 + 30 + 200 + 20 = 310 ms.
    # itl: (last chunk − first content) / (output − 1) = 200 ms / 50 = 4 ms.
    assert value == {"e2e": 310 * MS, "itl": 4 * MS}[metric]
