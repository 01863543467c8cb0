"""Webhook delivery against a real HTTP receiver on 127.0.0.1: retries, backoff, payload shapes."""

from __future__ import annotations

import socket

from slo_support import MS, WebhookReceiver

from latencylens_collector.slo.notifier import Notice, Notifier, Target, WorstRequest, slack_payload

NOTICE = Notice(
    alert_id=7,
    slo_id=3,
    slo_name="chat ttft",
    project="default",
    state="firing",
    metric="ttft",
    objective={"type": "ratio", "target": 0.99, "threshold_ns": 1000 * MS, "period": "30d"},
    value_ns=1550 * MS,
    threshold_ns=1000 * MS,
    burn_rate=15.0,
    burn_rates={"1h": 15.0, "5m": 100.0},
    budget_remaining=0.25,
    dominant_component="queue",
    dominant_delta_ns=1480 * MS,
    dominant_breach_mean_ns=1500 * MS,
    dominant_previous_mean_ns=20 * MS,
    worst_requests=[WorstRequest("ab" * 16, 1550 * MS, "http://lens/api/requests/" + "ab" * 16)],
)


def test_failing_webhook_is_retried_with_exponential_backoff() -> None:
    sleeps: list[float] = []
    with WebhookReceiver(statuses=[500, 503, 429]) as receiver:
        (delivery,) = Notifier([Target(receiver.url)], sleep=sleeps.append, backoff_s=0.5).send(NOTICE)
    assert delivery.ok and delivery.attempts == 4
    assert sleeps == [0.5, 1.0, 2.0]  # 0.5 s × 2^(attempt−1)
    assert receiver.hits == 4
    (body,) = receiver.bodies
    assert body["slo_name"] == "chat ttft" and body["dominant_component"] == "queue"
    assert body["summary"] == (
        "[FIRING] SLO chat ttft: ttft 1550 ms (threshold 1000 ms), burn rate 15.0×; "
        "cause: queue +1480 ms vs previous window"
    )


def test_gives_up_after_the_last_attempt_and_does_not_retry_a_rejection() -> None:
    sleeps: list[float] = []
    with WebhookReceiver(statuses=[502] * 10) as down, WebhookReceiver(statuses=[400]) as rejecting:
        notifier = Notifier([Target(down.url), Target(rejecting.url)], sleep=sleeps.append, attempts=3)
        failed, rejected = notifier.send(NOTICE)
    assert (failed.ok, failed.attempts, failed.error) == (False, 3, "HTTP 502")
    assert (rejected.ok, rejected.attempts, rejected.error) == (False, 1, "HTTP 400")
    assert sleeps == [0.5, 1.0]
    assert (down.hits, rejecting.hits) == (3, 1)


def test_unreachable_webhook_is_retried() -> None:
    with socket.socket() as sock:  # a port nobody listens on once closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    sleeps: list[float] = []
    (delivery,) = Notifier([Target(f"http://127.0.0.1:{port}/")], sleep=sleeps.append, attempts=2).send(
        NOTICE
    )
    assert not delivery.ok and delivery.attempts == 2 and delivery.error and "ConnectError" in delivery.error
    assert sleeps == [0.5]


def test_slack_payload_names_value_burn_cause_and_links() -> None:
    with WebhookReceiver() as receiver:
        Notifier([Target(receiver.url, "slack")]).send(NOTICE)
    (body,) = receiver.bodies
    assert body == slack_payload(NOTICE)
    text = body["blocks"][0]["text"]["text"]
    assert body["text"].startswith("[FIRING] SLO chat ttft")
    assert "Error budget remaining: 25.0%" in text
    assert "Dominant component: *queue*, mean 1500 ms (was 20 ms)" in text
    assert f"<http://lens/api/requests/{'ab' * 16}|{'ab' * 6}> 1550 ms" in text
