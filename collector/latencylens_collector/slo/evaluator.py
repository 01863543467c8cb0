"""One evaluation of every SLO: measure in ClickHouse, advance the alert, notify, store the status.

The clock is injected and an evaluation is one call (:meth:`Evaluator.run_once`), so tests drive
time by hand; the scheduler only calls ``run_once`` every interval. Without one, windows end at the
store's clock (ClickHouse's ``now64``): a collector whose clock runs ahead or behind the server would
otherwise count a shifted window.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Final

from latencylens_collector.analysis.attribution import (
    COMPONENTS,
    DECODE,
    INFERENCE,
    MODEL_UNATTRIBUTED,
    NETWORK,
    PREFILL,
    QUEUE,
    SERVER_OTHER,
)
from latencylens_collector.runtime.clock import Clock
from latencylens_collector.slo import burn
from latencylens_collector.slo.definitions import (
    PercentileObjective,
    RatioObjective,
    objective_from_json,
)
from latencylens_collector.slo.lifecycle import FIRING, OPEN_STATES, PENDING, RESOLVED, advance
from latencylens_collector.slo.measure import Scope, component_means, window_stats, worst_requests
from latencylens_collector.slo.notifier import Delivery, Notice, Notifier, WorstRequest
from latencylens_collector.slo.records import AlertRecord, SloRecord
from latencylens_collector.slo.repository import SloRepository
from latencylens_collector.storage.store import StorageError, Store

_log = logging.getLogger(__name__)

CAUSE_COMPONENTS: Final[Mapping[str, tuple[str, ...]]] = {
    # Time to first token is spent before the stream starts: decode and application work cannot
    # explain it. An unsplit inference holds prefill and decode, so it can explain a breach of either.
    "ttft": (QUEUE, PREFILL, INFERENCE, SERVER_OTHER, NETWORK, MODEL_UNATTRIBUTED),
    "itl": (DECODE, INFERENCE, NETWORK, MODEL_UNATTRIBUTED),
    "e2e": COMPONENTS,
}
"""Components that can explain a breach of each metric."""
WORST_REQUESTS: Final = 5
NO_DATA: Final = "no_data"
OK: Final = "ok"
SILENCED: Final = "silenced"


@dataclass(frozen=True)
class Measurement:
    breached: bool | None
    value_ns: int | None
    total: int
    burn_rates: dict[str, float]
    budget_remaining: float | None
    burn_rate: float | None
    """Burn rate shown on the alert: the breaching pair's long window, or the percentile window's."""
    breach_window_ns: int
    """Length of the window compared against the one before the breach when looking for the cause."""
    lookback_ns: int
    """How far back the breach may reach: the baseline window ends at least this long before now."""
    threshold_ns: int
    for_ns: int


def measure(store: Store, slo: SloRecord, now_ns: int) -> Measurement:
    scope = Scope(slo.project, slo.metric, slo.filter)
    objective = objective_from_json(slo.objective)
    if isinstance(objective, RatioObjective):
        return _measure_ratio(store, scope, objective, slo.min_requests, now_ns)
    return _measure_percentile(store, scope, objective, slo.min_requests, now_ns)


def _measure_ratio(
    store: Store, scope: Scope, objective: RatioObjective, min_requests: int, now_ns: int
) -> Measurement:
    windows = {**burn.BURN_WINDOW_NS, "period": objective.period_ns}
    stats = window_stats(
        store,
        scope,
        now_ns=now_ns,
        windows=windows,
        threshold_ns=objective.threshold_ns,
        quantile=objective.target,
        value_window=burn.FAST_BURN.long,
    )
    verdict = burn.ratio_verdict(stats.counts, objective.target, min_requests)
    pair = verdict.pair or burn.FAST_BURN
    return Measurement(
        breached=verdict.breached,
        value_ns=stats.value_ns,
        total=stats.value_total,
        burn_rates=verdict.burn_rates,
        budget_remaining=burn.budget_remaining(stats.counts["period"], objective.target),
        burn_rate=verdict.burn_rates.get(pair.long),
        breach_window_ns=burn.BURN_WINDOW_NS[pair.short],
        lookback_ns=burn.BURN_WINDOW_NS[pair.long],
        threshold_ns=objective.threshold_ns,
        for_ns=0,
    )


def _measure_percentile(
    store: Store, scope: Scope, objective: PercentileObjective, min_requests: int, now_ns: int
) -> Measurement:
    stats = window_stats(
        store,
        scope,
        now_ns=now_ns,
        windows={"window": objective.window_ns},
        threshold_ns=objective.threshold_ns,
        quantile=objective.quantile,
        value_window="window",
    )
    counts = stats.counts["window"]
    rate = burn.percentile_burn_rate(counts, objective.quantile)
    return Measurement(
        breached=burn.percentile_breached(stats.value_ns, counts.total, objective.threshold_ns, min_requests),
        value_ns=stats.value_ns,
        total=counts.total,
        burn_rates={},
        budget_remaining=None if rate is None else 1.0 - rate,
        burn_rate=rate,
        breach_window_ns=objective.window_ns,
        lookback_ns=0,
        threshold_ns=objective.threshold_ns,
        for_ns=objective.for_ns,
    )


@dataclass(frozen=True)
class Cause:
    component: str
    delta_ns: int | None
    """Change of the component's mean against the window before the breach (None: no requests then)."""
    breach_mean_ns: int
    previous_mean_ns: int | None


def dominant_component(
    breach: Mapping[str, float], previous: Mapping[str, float] | None, candidates: Sequence[str]
) -> Cause | None:
    """The component whose mean grew most; without a previous window, the largest one."""
    if not candidates:
        return None
    if previous is None:
        name = max(candidates, key=lambda c: breach[c])
        return Cause(name, None, round(breach[name]), None)
    name = max(candidates, key=lambda c: breach[c] - previous[c])
    return Cause(name, round(breach[name] - previous[name]), round(breach[name]), round(previous[name]))


@dataclass
class Evaluation:
    """What one evaluation of one SLO did (for logs and tests)."""

    slo_id: int
    status: str
    measurement: Measurement
    alert_id: int | None = None
    transitions: list[str] = field(default_factory=list)
    deliveries: list[Delivery] = field(default_factory=list)


class Evaluator:
    def __init__(
        self,
        repository: SloRepository,
        store: Store,
        notifier: Notifier,
        clock: Clock | None,
        public_url: str,
    ) -> None:
        self.repository = repository
        self.store = store
        self.notifier = notifier
        self.clock: Clock = clock or store.now_ns
        self.public_url = public_url.rstrip("/")

    def run_once(self) -> list[Evaluation]:
        """Evaluate every SLO of every project at the clock's current time."""
        slos = self.repository.slos(None)
        if not slos:
            return []
        try:
            now_ns = self.clock()
        except StorageError as exc:  # the store's clock: ClickHouse is down, so is every measure
            _log.warning("SLOs not evaluated, retrying at the next interval: %s", exc)
            return []
        results = []
        for slo in slos:
            try:
                results.append(self.evaluate(slo, now_ns))
            except Exception:
                # One SLO failing (ClickHouse down, a bad row) must not stop the others.
                _log.exception("evaluating SLO %s (%d) failed", slo.name, slo.id)
        return results

    def evaluate(self, slo: SloRecord, now_ns: int) -> Evaluation:
        m = measure(self.store, slo, now_ns)
        alert = self.repository.open_alert(slo.id)
        steps = advance(
            alert.state if alert else None,
            alert.started_at_ns if alert else None,
            m.breached,
            now_ns,
            m.for_ns,
        )
        if alert is None and steps:
            alert = self.repository.open_new_alert(slo, now_ns)
        for step in steps:
            assert alert is not None
            alert = self.repository.record_transition(alert.id, step.state, now_ns, step.note)
        cause: Cause | None = None
        worst: list[tuple[str, int]] = []
        if alert is not None and alert.state in OPEN_STATES and m.breached:
            values: dict[str, object] = {"value_ns": m.value_ns, "burn_rate": m.burn_rate}
            if any(step.state == FIRING for step in steps):
                cause, worst = self._diagnose(slo, alert, m, now_ns)
                values.update(
                    dominant_component=cause.component if cause else None,
                    dominant_delta_ns=cause.delta_ns if cause else None,
                    worst_trace_ids=[trace for trace, _ in worst],
                )
            alert = self.repository.update_alert(alert.id, **values)
        deliveries = self._notify(slo, alert, m, now_ns, cause, worst) if alert is not None else []
        status = alert.state if alert is not None and alert.state in (PENDING, FIRING) else None
        status = status or (NO_DATA if m.breached is None else OK)
        self.repository.save_status(
            slo.id,
            status=status,
            budget_remaining=m.budget_remaining,
            burn_rates=m.burn_rates,
            value_ns=m.value_ns,
            total=m.total,
            evaluated_at_ns=now_ns,
        )
        return Evaluation(
            slo_id=slo.id,
            status=status,
            measurement=m,
            alert_id=alert.id if alert is not None else None,
            transitions=[step.state for step in steps],
            deliveries=deliveries,
        )

    def _diagnose(
        self, slo: SloRecord, alert: AlertRecord, m: Measurement, now_ns: int
    ) -> tuple[Cause | None, list[tuple[str, int]]]:
        """Compare the breach window with the same-length window just before the breach.

        The breach began no later than the alert opened (percentile alerts wait in pending) and, for
        a ratio alert, may reach back over the whole long window of the pair that fired.
        """
        scope = Scope(slo.project, slo.metric, slo.filter)
        length = m.breach_window_ns
        anchor = min(alert.started_at_ns, now_ns - m.lookback_ns)
        breach = component_means(self.store, scope, now_ns - length, now_ns)
        previous = component_means(self.store, scope, anchor - length, anchor)
        cause = dominant_component(breach, previous, CAUSE_COMPONENTS[slo.metric]) if breach else None
        return cause, worst_requests(self.store, scope, now_ns - length, now_ns, WORST_REQUESTS)

    def _notify(
        self,
        slo: SloRecord,
        alert: AlertRecord,
        m: Measurement,
        now_ns: int,
        cause: Cause | None,
        worst: Sequence[tuple[str, int]],
    ) -> list[Delivery]:
        """Announce firing once and resolved once (only when firing was announced)."""
        if alert.state == FIRING and alert.notified_state != FIRING:
            want = FIRING
        elif alert.state == RESOLVED and alert.resolved_at_ns == now_ns and alert.notified_state == FIRING:
            want = RESOLVED
        else:
            return []
        silence = self.repository.active_silence(slo.id, now_ns)
        if silence is not None:
            if alert.notified_state != SILENCED or want == RESOLVED:
                until = _iso(silence.until_ns)
                self.repository.add_note(
                    alert.id, now_ns, f"{want} not sent: silenced until {until} ({silence.reason})"
                )
                self.repository.update_alert(alert.id, notified_state=SILENCED)
            return []
        if not self.notifier.targets:
            self.repository.update_alert(alert.id, notified_state=want)
            return []
        deliveries = self.notifier.send(self._notice(slo, alert, m, want, cause, dict(worst)))
        outcome = "; ".join(
            f"{d.url} {'ok' if d.ok else 'failed (' + (d.error or '') + ')'} after {d.attempts} attempt(s)"
            for d in deliveries
        )
        self.repository.add_note(alert.id, now_ns, f"{want} notification: {outcome}")
        if any(d.ok for d in deliveries):
            self.repository.update_alert(alert.id, notified_state=want)
        return deliveries

    def _notice(
        self,
        slo: SloRecord,
        alert: AlertRecord,
        m: Measurement,
        state: str,
        cause: Cause | None,
        worst: Mapping[str, int],
    ) -> Notice:
        """The notice of an alert; ``cause`` and ``worst`` are known when it fired in this evaluation."""
        return Notice(
            alert_id=alert.id,
            slo_id=slo.id,
            slo_name=slo.name,
            project=slo.project,
            state=state,
            metric=slo.metric,
            objective=dict(slo.objective),
            value_ns=alert.value_ns if state == FIRING else m.value_ns,
            threshold_ns=m.threshold_ns,
            burn_rate=alert.burn_rate if state == FIRING else m.burn_rate,
            burn_rates=m.burn_rates,
            budget_remaining=m.budget_remaining,
            dominant_component=alert.dominant_component,
            dominant_delta_ns=alert.dominant_delta_ns,
            dominant_breach_mean_ns=cause.breach_mean_ns if cause else None,
            dominant_previous_mean_ns=cause.previous_mean_ns if cause else None,
            worst_requests=[
                WorstRequest(trace, worst.get(trace), f"{self.public_url}/api/requests/{trace}")
                for trace in alert.worst_trace_ids
            ],
            started_at=_iso(alert.started_at_ns),
            fired_at=_iso(alert.fired_at_ns),
            resolved_at=_iso(alert.resolved_at_ns),
        )


def _iso(ns: int | None) -> str | None:
    if ns is None:
        return None
    moment = datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(microseconds=ns // 1000)
    return moment.isoformat().replace("+00:00", "Z")
