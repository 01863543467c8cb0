"""Alert notifications: a generic JSON webhook and Slack-compatible incoming webhooks.

Each delivery is retried with exponential backoff on connection errors, 429 and 5xx; other 4xx
answers are final (retrying a rejected payload cannot help). ``sleep`` is injectable so tests
check the backoff without waiting.

Names in a notice (the SLO's, the project's) are written by whoever holds a project's API key, so
every format treats them as data: the JSON body is a dict serialised by the HTTP client (never
text built by hand), and Slack's mrkdwn gets ``&``, ``<`` and ``>`` escaped as Slack asks, so a
name such as ``<!channel>`` or ``<https://evil.example|login>`` shows as typed instead of pinging
the channel or hiding a link. Webhook targets themselves come only from the server's configuration
(``LATENCYLENS_SLO_WEBHOOK_URLS``, ``LATENCYLENS_SLO_SLACK_WEBHOOK_URLS``); no API call adds one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Final, Literal

import httpx

from latencylens_collector.analysis.explanation import format_ns
from latencylens_collector.queries.compare import signed

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WorstRequest:
    trace_id: str
    value_ns: int | None
    """The request's metric value, when measured in this evaluation."""
    url: str


@dataclass(frozen=True)
class Notice:
    """What people are told about one alert transition."""

    alert_id: int
    slo_id: int
    slo_name: str
    project: str
    state: str
    """``firing`` or ``resolved``."""
    metric: str
    objective: dict[str, Any]
    value_ns: int | None
    threshold_ns: int
    burn_rate: float | None
    burn_rates: dict[str, float]
    budget_remaining: float | None
    dominant_component: str | None
    dominant_delta_ns: int | None
    dominant_breach_mean_ns: int | None
    dominant_previous_mean_ns: int | None
    worst_requests: list[WorstRequest] = field(default_factory=list)
    started_at: str | None = None
    fired_at: str | None = None
    resolved_at: str | None = None

    def summary(self) -> str:
        """One line a person reads first."""
        verb = "FIRING" if self.state == "firing" else "RESOLVED"
        value = format_ns(self.value_ns) if self.value_ns is not None else "no value"
        text = (
            f"[{verb}] SLO {self.slo_name}: {self.metric} {value} (threshold {format_ns(self.threshold_ns)})"
        )
        if self.burn_rate is not None:
            text += f", burn rate {self.burn_rate:.1f}×"
        if self.dominant_component and self.dominant_delta_ns is not None:
            text += f"; cause: {self.dominant_component} {signed(self.dominant_delta_ns)} vs previous window"
        return text


def json_payload(notice: Notice) -> dict[str, Any]:
    """The generic webhook body: every field of the notice plus ``summary``, as a dict the HTTP
    client serialises (names are values, never spliced into JSON text)."""
    body = asdict(notice)
    body["summary"] = notice.summary()
    return {"kind": "latencylens.slo.alert", "version": 1, **body}


def mrkdwn(text: str) -> str:
    """Text shown as typed in Slack mrkdwn: its control characters ``&``, ``<``, ``>`` as the HTML
    entities Slack decodes (``<!channel>``, ``<@U1>`` and ``<url|label>`` lose their meaning)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _link(url: str, label: str) -> str:
    """A Slack link; a ``|`` or ``>`` in the URL could end it early, so those are percent-encoded."""
    return f"<{mrkdwn(url).replace('|', '%7C')}|{mrkdwn(label)}>"


def slack_payload(notice: Notice) -> dict[str, Any]:
    """Slack incoming-webhook body (``text`` plus mrkdwn blocks); Mattermost and others accept it.
    Both ``text`` and the block are mrkdwn, so both are escaped."""
    summary = mrkdwn(notice.summary())
    lines = [f"*{summary}*"]
    if notice.project:
        lines.append(f"Project: {mrkdwn(notice.project)}")
    if notice.budget_remaining is not None:
        lines.append(f"Error budget remaining: {notice.budget_remaining:.1%}")
    if notice.burn_rates:
        lines.append(
            "Burn rates: " + ", ".join(f"{mrkdwn(w)} {r:.1f}×" for w, r in notice.burn_rates.items())
        )
    if notice.dominant_component and notice.dominant_breach_mean_ns is not None:
        previous = notice.dominant_previous_mean_ns
        lines.append(
            f"Dominant component: *{mrkdwn(notice.dominant_component)}*, mean "
            f"{format_ns(notice.dominant_breach_mean_ns)}"
            + (f" (was {format_ns(previous)})" if previous is not None else "")
        )
    if notice.worst_requests:
        lines.append(
            "Worst requests: "
            + ", ".join(
                f"{_link(w.url, w.trace_id[:12])}{_suffix(w.value_ns)}" for w in notice.worst_requests
            )
        )
    return {
        "text": summary,
        "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": "\n".join(lines)}}],
    }


def _suffix(ns: int | None) -> str:
    return "" if ns is None else f" {format_ns(ns)}"


@dataclass(frozen=True)
class Target:
    url: str
    kind: Literal["json", "slack"] = "json"


@dataclass(frozen=True)
class Delivery:
    url: str
    ok: bool
    attempts: int
    error: str | None = None


PAYLOADS: Final[dict[str, Callable[[Notice], dict[str, Any]]]] = {
    "json": json_payload,
    "slack": slack_payload,
}


class Notifier:
    """Posts notices to every target."""

    def __init__(
        self,
        targets: Sequence[Target],
        *,
        attempts: int = 4,
        backoff_s: float = 0.5,
        timeout_s: float = 5.0,
        sleep: Callable[[float], None] = time.sleep,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.targets = tuple(targets)
        self.attempts = max(1, attempts)
        self.backoff_s = backoff_s
        self.timeout_s = timeout_s
        self.sleep = sleep
        self._transport = transport

    def send(self, notice: Notice) -> list[Delivery]:
        if not self.targets:
            return []
        with httpx.Client(timeout=self.timeout_s, transport=self._transport) as client:
            return [self._deliver(client, target, notice) for target in self.targets]

    def _deliver(self, client: httpx.Client, target: Target, notice: Notice) -> Delivery:
        body = PAYLOADS[target.kind](notice)
        error = ""
        for attempt in range(1, self.attempts + 1):
            try:
                response = client.post(target.url, json=body)
            except httpx.HTTPError as exc:
                error = f"{type(exc).__name__}: {exc}"
            else:
                if response.is_success:
                    return Delivery(target.url, ok=True, attempts=attempt)
                error = f"HTTP {response.status_code}"
                if response.status_code != 429 and response.status_code < 500:
                    return Delivery(target.url, ok=False, attempts=attempt, error=error)
            if attempt < self.attempts:
                self.sleep(self.backoff_s * 2 ** (attempt - 1))
        _log.warning(
            "alert notification to %s failed after %d attempts: %s", target.url, self.attempts, error
        )
        return Delivery(target.url, ok=False, attempts=self.attempts, error=error)


def targets_from(json_urls: Sequence[str], slack_urls: Sequence[str]) -> list[Target]:
    return [Target(url, "json") for url in json_urls] + [Target(url, "slack") for url in slack_urls]
