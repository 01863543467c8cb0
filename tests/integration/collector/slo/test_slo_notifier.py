"""Webhook delivery against a real HTTP receiver on 127.0.0.1: retries, backoff, payload shapes."""

from __future__ import annotations

import json
import re
import socket
from dataclasses import replace

import httpx
from slo_support import MS, WebhookReceiver

from latencylens_collector.slo.notifier import (
    Notice,
    Notifier,
    Target,
    WorstRequest,
    json_payload,
    slack_payload,
)

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
        "[FIRING] SLO chat ttft: ttft 1.55 s (threshold 1.00 s), burn rate 15.0×; "
        "cause: queue +1.48 s vs previous window"
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
    assert "Dominant component: *queue*, mean 1.50 s (was 20 ms)" in text
    assert f"<http://lens/api/requests/{'ab' * 16}|{'ab' * 6}> 1.55 s" in text


# --- issue 15, item 6: names are data in every format ---------------------------------------------
HOSTILE_NAME = '<!channel> ttft <https://evil.example/login|open the dashboard> & "co"'
HOSTILE_PROJECT = "<!here>"
HOSTILE = replace(NOTICE, slo_name=HOSTILE_NAME, project=HOSTILE_PROJECT)
_SLACK_TOKEN = re.compile(r"<([^<>]*)>")


def _slack_texts(body: dict) -> list[str]:
    return [body["text"], *(block["text"]["text"] for block in body["blocks"])]


def test_slack_payload_shows_hostile_names_as_typed() -> None:
    """The reproduction: an SLO named ``<!channel> …<https://evil.example|…>`` reached the channel
    as a mention and a disguised link. Every ``<…>`` left in the message is one of our own links."""
    with WebhookReceiver() as receiver:
        (delivery,) = Notifier([Target(receiver.url, "slack")]).send(HOSTILE)
    assert delivery.ok
    (body,) = receiver.bodies
    for text in _slack_texts(body):
        assert "<!" not in text and "evil.example|" not in text.replace("&lt;", "")
        assert [token.split("|")[0] for token in _SLACK_TOKEN.findall(text)] in (
            [],
            [f"http://lens/api/requests/{'ab' * 16}"],
        )
        # Escaped as Slack documents: & first, then < and >; Slack shows the name as typed.
        assert (
            '&lt;!channel&gt; ttft &lt;https://evil.example/login|open the dashboard&gt; &amp; "co"' in text
        )
    block = body["blocks"][0]["text"]["text"]
    assert "Project: &lt;!here&gt;" in block


def test_slack_link_cannot_be_closed_early_by_its_url() -> None:
    worst = WorstRequest("cd" * 16, 900 * MS, "http://lens/x|<!channel>")
    body = slack_payload(replace(NOTICE, worst_requests=[worst]))
    text = body["blocks"][0]["text"]["text"]
    assert "<http://lens/x%7C&lt;!channel&gt;|cdcdcdcdcdcd> 900 ms" in text
    assert "<!" not in text


def test_json_payload_carries_hostile_names_as_values() -> None:
    """A name shaped to break out of a JSON string stays one value: the body is serialised."""
    breakout = 'x", "state": "resolved", "slo_name": "y\\\n</script>\u2028'
    with WebhookReceiver() as receiver:
        (delivery,) = Notifier([Target(receiver.url, "json")]).send(replace(NOTICE, slo_name=breakout))
    assert delivery.ok
    (body,) = receiver.bodies
    assert body["slo_name"] == breakout
    assert body["state"] == "firing"
    assert body["summary"].startswith(f"[FIRING] SLO {breakout}: ttft")
    assert body == json.loads(json.dumps(json_payload(replace(NOTICE, slo_name=breakout))))


def test_a_project_key_cannot_add_a_webhook(collector) -> None:
    """Webhook targets come from the server's configuration only: the SLO body, the one thing a
    project's key can write, has no field for one, and unknown fields are refused."""
    body = {"name": "mine", "objective": {"type": "ratio", "target": 0.99, "threshold_ns": 1000 * MS}}
    api = f"{collector.url}/api/slos"
    for field in ("webhook_url", "webhooks", "notify", "slack_webhook_url"):
        response = httpx.post(api, json={**body, field: "https://evil.example/hook"})
        assert response.status_code == 422, field
        assert "Extra inputs are not permitted" in response.text
    assert httpx.get(api).json()["slos"] == []
    assert httpx.post(api, json=body).status_code == 201
