"""What to change first: each lever's arithmetic and the rules that rank levers, pure (no I/O).

The advisor works in three steps; this module holds the first and the last:

1. :func:`plan_group` reads one group's measured aggregates (:class:`GroupMeasures`, computed in
   ClickHouse from its request rows) and, per lever, either the *what-if parameters* that describe
   the change (cap outputs at N tokens; prefill costs R ns per uncached input token and a stable
   prefix covers a share S of the input; the queue of the best alternative; ...) or one line
   saying why the lever does not apply.
2. The query layer replays every request row of the group with those parameters, in ClickHouse,
   and measures p50 and p95 of end-to-end time and TTFT after the change. The per-row arithmetic
   it runs is the functions below (:func:`decode_saving_ns`, :func:`prefill_saving_ns`,
   :func:`queue_change_ns`, :func:`network_saving_ns`), written once more in SQL.
3. :func:`judge` turns the before/after percentiles into ranked :class:`LeverAdvice`: a lever is
   recommended when it moves p95 end-to-end time or p95 TTFT by at least
   :data:`MIN_SAVING_SHARE` of its value; levers are ranked by the p95 end-to-end saving.

Invariants: a saving is never larger than the part it comes from (a row's decode, prefill, network
time), so no estimated time goes below zero; every number in an estimate was measured on stored
rows, and whatever is assumed instead is listed in the lever's ``assumptions``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Final

from latencylens_collector.analysis.attribution import (
    COMPONENTS,
    DECODE,
    NETWORK,
    PREFILL,
    QUEUE,
    RETRIEVAL,
    TOOL,
)
from latencylens_collector.analysis.costs import Prices, request_cost_usd
from latencylens_collector.analysis.explanation import format_ns

SHORTEN_OUTPUTS: Final = "shorten_outputs"
PREFIX_CACHING: Final = "prefix_caching"
QUEUE_ALTERNATIVE: Final = "queue_alternative"
NETWORK_REUSE: Final = "network_reuse"
SWITCH_MODEL: Final = "switch_model"
PARALLEL_CALLS: Final = "parallel_calls"
LEVERS: Final = (
    SHORTEN_OUTPUTS,
    PREFIX_CACHING,
    QUEUE_ALTERNATIVE,
    NETWORK_REUSE,
    PARALLEL_CALLS,
    SWITCH_MODEL,
)
"""Every lever, in the order they are evaluated (the ranking is by saving, not this order)."""
TITLES: Final = {
    SHORTEN_OUTPUTS: "Shorten or cap long outputs",
    PREFIX_CACHING: "Cache the stable prompt prefix",
    QUEUE_ALTERNATIVE: "Move to a provider/model that queues less",
    NETWORK_REUSE: "Reuse connections or call a closer region",
    PARALLEL_CALLS: "Run sibling tool and retrieval calls at once",
    SWITCH_MODEL: "Switch to the faster model already serving this route",
}

PART_MIN_SHARE: Final = 0.2
"""A lever that acts on one part is considered when that part is at least this share of the
group's end-to-end time (summed over its requests)."""
MIN_SAVING_SHARE: Final = 0.05
"""A lever is recommended when it cuts p95 end-to-end time or p95 TTFT by at least this share."""
LONG_OUTPUT_RATIO: Final = 1.5
"""Outputs are "long" for capping when the p95 length is at least this many times the p50 length."""
LITTLE_REUSE: Final = 0.5
"""Prefix caching is considered while less than this share of the group's input was read from
the cache."""
DEFAULT_PREFIX_SHARE: Final = 0.5
"""Share of a prompt a stable prefix is assumed to cover when the group has no cached requests to
measure it on (stated as an assumption on the lever)."""
HIGH_CONFIDENCE_SAMPLES: Final = 100
"""Rows behind a measured rate for ``high`` confidence (at least the group minimum for ``medium``)."""
HIGH_COVERAGE: Final = 0.9
"""Share of the group's rows that must carry the measured values for ``high`` confidence."""
CONFIDENCE_LEVELS: Final = ("low", "medium", "high")
IDLE_GAP_NS: Final = 5_000_000_000
"""A request this long after the previous one to the same endpoint (same service) counts as "after
idle": httpx, under the OpenAI and Anthropic SDKs, closes a pooled connection after 5 s idle
(``keepalive_expiry``), so such a request most likely opened a new one."""
MIN_REUSE_SAMPLES: Final = 5
"""Requests each side (after idle, warm) needs before the split counts as evidence."""
REUSE_GAP: Final = 1.5
"""After-idle network p50 at least this many times the warm one: connection set-up is seen."""
NO_CAP: Final = 1e18
"""A cap no output reaches: the neutral what-if parameter of a lever not evaluated."""


# Per-row arithmetic (the query layer runs the same in SQL) ------------------------------------------


def decode_saving_ns(
    output_tokens: int | None, cap: float, per_token_ns: float | None, decode_ns: int
) -> float:
    """Decode time saved when an output of ``output_tokens`` is cut to ``cap`` tokens: each token
    not generated saves one inter-token gap, never more than the row's decode time."""
    if output_tokens is None or per_token_ns is None or output_tokens <= cap:
        return 0.0
    return min(float(decode_ns), (output_tokens - cap) * per_token_ns)


def prefill_saving_ns(
    input_tokens: int | None, cached_tokens: int | None, rate_ns: float, prefix_share: float, prefill_ns: int
) -> float:
    """Prefill time saved when a stable prefix covering ``prefix_share`` of the input is read from
    the cache: the tokens it adds to what was already cached cost ``rate_ns`` each, never more than
    the row's prefill time."""
    if input_tokens is None or cached_tokens is None:
        return 0.0
    newly_cached = max(0.0, prefix_share * input_tokens - cached_tokens)
    return min(float(prefill_ns), rate_ns * newly_cached)


def queue_change_ns(queue_ns: int, alternative_queue_ns: float) -> float:
    """Queue time saved (negative: lost) when a row waits as long as the alternative's median."""
    return queue_ns - alternative_queue_ns


def network_saving_ns(network_ns: int, network_cap_ns: float) -> float:
    """Network time saved when a row's network time above the group's median comes down to it."""
    return max(0.0, network_ns - network_cap_ns)


def parallel_saving_ns(siblings: Sequence[tuple[int, int]]) -> int:
    """Time saved when sibling calls (``(start_ns, duration_ns)`` each, one parent) all start
    together: the time they span, at most their summed durations, less the longest of them.
    Back-to-back calls save all but the longest; calls that already overlap save what still runs
    one after another. (The query layer adds a trace's sibling sets and caps the total at the
    row's tool and retrieval time on the critical path.)"""
    if len(siblings) < 2:
        return 0
    window = max(start + duration for start, duration in siblings) - min(start for start, _ in siblings)
    busy = sum(duration for _, duration in siblings)
    return max(0, min(busy, window) - max(duration for _, duration in siblings))


# Measured inputs ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Percentiles:
    """p50 and p95 in integer ns; None without values."""

    p50: int | None = None
    p95: int | None = None


@dataclass(frozen=True)
class PrefillSums:
    """Prefill time and uncached input tokens summed over requests whose provider split prefill
    and reported both token counts."""

    requests: int = 0
    prefill_ns: int = 0
    uncached_tokens: int = 0

    @property
    def rate_ns(self) -> float | None:
        """Prefill ns per uncached input token; None without tokens."""
        return self.prefill_ns / self.uncached_tokens if self.uncached_tokens > 0 else None

    def __add__(self, other: PrefillSums) -> PrefillSums:
        return PrefillSums(
            self.requests + other.requests,
            self.prefill_ns + other.prefill_ns,
            self.uncached_tokens + other.uncached_tokens,
        )


@dataclass(frozen=True)
class MeanUsage:
    """Mean token counts per request over the rows that reported input and output counts."""

    requests: int = 0
    input_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0

    def cost_usd(self, provider: str, model: str, prices: Prices | None = None) -> float | None:
        """The cost of a mean request (:func:`costs.request_cost_usd`); None without counts or price."""
        if self.requests == 0:
            return None
        counts = (self.input_tokens, self.cached_tokens, self.output_tokens)
        return request_cost_usd(provider, model, *counts, prices=prices)


@dataclass(frozen=True)
class EndpointNetwork:
    """Network time of a group's requests to one endpoint (the model call's ``server.address``;
    empty when its spans did not say)."""

    endpoint: str
    requests: int
    network: Percentiles


@dataclass(frozen=True)
class ReuseSplit:
    """Network time of requests after :data:`IDLE_GAP_NS` or more without a request to the same
    endpoint (a pooled connection would have closed: ``idle``) and of those sooner (``warm``)."""

    idle_requests: int = 0
    idle_p50: int | None = None
    warm_requests: int = 0
    warm_p50: int | None = None

    @property
    def telling(self) -> bool:
        """Both sides have enough requests to compare."""
        return self.idle_requests >= MIN_REUSE_SAMPLES and self.warm_requests >= MIN_REUSE_SAMPLES

    @property
    def setup_seen(self) -> bool:
        """Requests after idle take clearly more network time: new connections cost time here."""
        return (
            self.telling
            and self.idle_p50 is not None
            and self.warm_p50 is not None
            and self.idle_p50 >= REUSE_GAP * self.warm_p50
        )


@dataclass(frozen=True)
class GroupMeasures:
    """One group's aggregates over its request rows (one row per trace)."""

    key: Mapping[str, str]
    count: int
    e2e: Percentiles
    ttft: Percentiles
    part_sums: Mapping[str, int]
    """Critical-path ns summed per component; they add up to the sum of end-to-end times."""
    route: str
    model: str
    provider: str
    """The group's most frequent route, model and provider (its own when grouped by them)."""
    output_requests: int = 0
    """Rows with a reported output token count."""
    output_tokens: Percentiles = field(default_factory=Percentiles)
    per_token_requests: int = 0
    """Rows with a reported output token count and a known time per output token."""
    per_token_ns: float | None = None
    """Median time per output token (the row's ITL, else its decode time / (outputs − 1))."""
    prefill: PrefillSums = field(default_factory=PrefillSums)
    prefill_uncached: PrefillSums = field(default_factory=PrefillSums)
    """Requests that read nothing from the cache."""
    prefill_cached: PrefillSums = field(default_factory=PrefillSums)
    """Requests that read some input from the cache."""
    cached_prefix_share: float | None = None
    """Median share of the input read from the cache, over requests that read any."""
    input_tokens: int = 0
    cached_tokens: int = 0
    """Input and cache-read tokens summed over rows that reported both."""
    queue: Percentiles = field(default_factory=Percentiles)
    network: Percentiles = field(default_factory=Percentiles)
    queue_by_hour: Sequence[tuple[int, int, int]] = ()
    """(UTC hour of day, requests, median queue ns) for the hours the group has requests in."""
    serial_requests: int = 0
    """Rows whose spans hold sibling tool or retrieval calls that ran (partly) one after another."""
    serial_saving_p50: int | None = None
    """Median of :func:`parallel_saving_ns` summed per trace, over those rows."""
    busy_app_ns: int = 0
    """Tool and retrieval busy time summed over the group (beside their critical-path time)."""
    usage: MeanUsage = field(default_factory=MeanUsage)
    endpoints: Sequence[EndpointNetwork] = ()
    """Network time per endpoint, slowest p50 first."""
    reuse: ReuseSplit = field(default_factory=ReuseSplit)

    @property
    def total_ns(self) -> int:
        return sum(self.part_sums.values())

    def share(self, part: str) -> float:
        total = self.total_ns
        return self.part_sums.get(part, 0) / total if total > 0 else 0.0

    @property
    def dominant(self) -> str:
        """The component with the most critical-path time (display order breaks ties)."""
        return max(COMPONENTS, key=lambda name: (self.part_sums.get(name, 0), -COMPONENTS.index(name)))


@dataclass(frozen=True)
class Alternative:
    """Requests of one (route, model, provider) in the window, for levers that move a group."""

    route: str
    model: str
    provider: str
    count: int
    e2e: Percentiles
    ttft: Percentiles
    queue_p50: int | None
    prefill: PrefillSums = field(default_factory=PrefillSums)
    usage: MeanUsage = field(default_factory=MeanUsage)


# Plans ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WhatIf:
    """The per-row what-if parameters of one group; the neutral values change nothing."""

    output_cap: float = NO_CAP
    prefill_rate_ns: float = 0.0
    prefix_share: float = 0.0
    alternative_queue_ns: float = -1.0
    """Negative: no queue alternative."""
    network_cap_ns: float = NO_CAP
    parallel_calls: float = 0.0
    """1: sibling tool and retrieval calls run at once."""


@dataclass(frozen=True)
class LeverPlan:
    """A lever for one group: evaluated (``reason`` None) or why it does not apply."""

    lever: str
    reason: str | None
    evidence: Mapping[str, str | int | float | None]
    confidence: str = "low"
    assumptions: tuple[str, ...] = ()
    action: str = ""
    """What to do, in a few words (for an evaluated lever)."""
    measured_after: tuple[Percentiles, Percentiles] | None = None
    """End-to-end and TTFT after the change when measured directly (another model's requests)."""
    endpoints: tuple[EndpointNetwork, ...] = ()
    """Network time per endpoint (the network lever's evidence)."""


@dataclass(frozen=True)
class GroupPlan:
    measures: GroupMeasures
    what_if: WhatIf
    levers: tuple[LeverPlan, ...]


def confidence(samples: int, coverage: float, min_requests: int, ceiling: str = "high") -> str:
    """``high`` with :data:`HIGH_CONFIDENCE_SAMPLES` rows covering :data:`HIGH_COVERAGE` of the
    group, ``medium`` with at least ``min_requests``, else ``low``; never above ``ceiling``."""
    if samples >= HIGH_CONFIDENCE_SAMPLES and coverage >= HIGH_COVERAGE:
        level = "high"
    elif samples >= min_requests:
        level = "medium"
    else:
        level = "low"
    return min(level, ceiling, key=CONFIDENCE_LEVELS.index)


def plan_group(
    measures: GroupMeasures,
    alternatives: Sequence[Alternative],
    min_requests: int,
    by: Sequence[str],
    prices: Prices | None = None,
) -> GroupPlan:
    """Each lever's what-if parameters for one group, or why it does not apply; ``prices`` (the
    configured ones) price the models ``switch_model`` compares."""
    what_if = WhatIf()
    levers = []
    for planner in (_plan_outputs, _plan_prefix, _plan_queue, _plan_network, _plan_parallel):
        lever, what_if = planner(measures, alternatives, min_requests, by, what_if)
        levers.append(lever)
    levers.append(_plan_model(measures, alternatives, min_requests, by, prices))
    return GroupPlan(measures, what_if, tuple(levers))


def _pct(share: float) -> str:
    return f"{share:.0%}"


def _part_reason(measures: GroupMeasures, part: str) -> str | None:
    share = measures.share(part)
    if share < PART_MIN_SHARE:
        return f"{part} is {_pct(share)} of end-to-end time (below {_pct(PART_MIN_SHARE)})"
    return None


def _plan_outputs(
    m: GroupMeasures, _alts: Sequence[Alternative], min_requests: int, _by: Sequence[str], what_if: WhatIf
) -> tuple[LeverPlan, WhatIf]:
    out = m.output_tokens
    evidence: dict[str, str | int | float | None] = {
        "decode_share": round(m.share(DECODE), 4),
        "requests_with_output_tokens": m.output_requests,
        "requests_with_time_per_token": m.per_token_requests,
        "output_tokens_p50": out.p50,
        "output_tokens_p95": out.p95,
        "time_per_output_token_ns": round(m.per_token_ns) if m.per_token_ns is not None else None,
    }
    reason = _part_reason(m, DECODE)
    if reason is None and (m.per_token_requests == 0 or out.p50 is None or out.p95 is None):
        reason = "no output token counts with a measured time per token"
    if (
        reason is None
        and out.p95 is not None
        and out.p50 is not None
        and out.p95 < LONG_OUTPUT_RATIO * out.p50
    ):
        reason = (
            f"outputs are even (p95 {out.p95} tokens, p50 {out.p50}; below {LONG_OUTPUT_RATIO}×): "
            "no long tail to cap"
        )
    if reason is not None:
        return LeverPlan(SHORTEN_OUTPUTS, reason, evidence), what_if
    assert out.p50 is not None and out.p95 is not None
    return (
        LeverPlan(
            SHORTEN_OUTPUTS,
            None,
            evidence,
            confidence(m.per_token_requests, m.per_token_requests / m.count, min_requests),
            (
                f"outputs above the p50 length ({out.p50} tokens) end there (max_tokens, or a shorter "
                "answer asked for); shorter outputs keep their length",
                "each token not generated saves the request's own time per output token (its ITL); "
                "prefill, queue and TTFT are unchanged",
            ),
            f"cap outputs at {out.p50} tokens (p50; p95 is {out.p95})",
        ),
        replace(what_if, output_cap=float(out.p50)),
    )


def _prefill_rate(m: GroupMeasures, alts: Sequence[Alternative]) -> tuple[float | None, str, int]:
    """Prefill ns per uncached input token: the group's own, else its model's at its provider on
    other routes, else its provider's; with where it came from and the requests behind it."""
    if m.prefill.rate_ns is not None:
        return m.prefill.rate_ns, "group", m.prefill.requests
    same_model = sum(
        (a.prefill for a in alts if a.provider == m.provider and a.model == m.model), PrefillSums()
    )
    if same_model.rate_ns is not None:
        return same_model.rate_ns, f"model {m.model} at {m.provider}", same_model.requests
    provider = sum((a.prefill for a in alts if a.provider == m.provider), PrefillSums())
    if provider.rate_ns is not None:
        return provider.rate_ns, f"provider {m.provider}", provider.requests
    return None, "", 0


def _plan_prefix(
    m: GroupMeasures, alts: Sequence[Alternative], min_requests: int, _by: Sequence[str], what_if: WhatIf
) -> tuple[LeverPlan, WhatIf]:
    cached_ratio = m.cached_tokens / m.input_tokens if m.input_tokens > 0 else None
    rate, rate_source, rate_requests = _prefill_rate(m, alts)
    evidence: dict[str, str | int | float | None] = {
        "prefill_share": round(m.share(PREFILL), 4),
        "cached_input_share": round(cached_ratio, 4) if cached_ratio is not None else None,
        "uncached_requests": m.prefill_uncached.requests,
        "cached_requests": m.prefill_cached.requests,
        "uncached_requests_prefill_per_1k_tokens_ns": _per_1k(m.prefill_uncached.rate_ns),
        "cached_requests_prefill_per_1k_uncached_tokens_ns": _per_1k(m.prefill_cached.rate_ns),
        "prefill_per_1k_uncached_tokens_ns": _per_1k(rate),
        "prefill_rate_source": rate_source or None,
        "prefix_share": round(m.cached_prefix_share, 4) if m.cached_prefix_share is not None else None,
    }
    reason = _part_reason(m, PREFILL)
    if reason is None and cached_ratio is None:
        reason = "no input token counts with cache reads reported"
    if reason is None and cached_ratio is not None and cached_ratio >= LITTLE_REUSE:
        reason = f"the cache already serves {_pct(cached_ratio)} of input tokens"
    if reason is None and rate is None:
        reason = "no prefill time split by the provider to measure a rate on"
    if reason is not None:
        return LeverPlan(PREFIX_CACHING, reason, evidence), what_if
    assert rate is not None
    assumptions = [
        f"prefill costs {format_ns(round(rate * 1000))} per 1k uncached input tokens (measured on "
        f"{rate_source}: prefill time / uncached input tokens over {rate_requests} requests)",
        "cached tokens cost no prefill time; queue, decode and network are unchanged",
    ]
    ceiling = "high"
    share = m.cached_prefix_share
    if share is None:
        share = DEFAULT_PREFIX_SHARE
        ceiling = "medium"
        assumptions.append(
            f"a stable prefix covers {_pct(share)} of each prompt (assumed: no request of this group "
            "read from the cache to measure it on)"
        )
    else:
        assumptions.append(
            f"a stable prefix covers {_pct(share)} of each prompt (the median cached share of this "
            "group's cached requests)"
        )
    if rate_source != "group":
        ceiling = "low"
    return (
        LeverPlan(
            PREFIX_CACHING,
            None,
            evidence,
            confidence(
                rate_requests,
                rate_requests / m.count if rate_source == "group" else 0.0,
                min_requests,
                ceiling,
            ),
            tuple(assumptions),
            f"cache a stable prefix ({_pct(share)} of the prompt)",
        ),
        replace(what_if, prefill_rate_ns=rate, prefix_share=share),
    )


def _per_1k(rate: float | None) -> int | None:
    return round(rate * 1000) if rate is not None else None


def _plan_queue(
    m: GroupMeasures, alts: Sequence[Alternative], min_requests: int, _by: Sequence[str], what_if: WhatIf
) -> tuple[LeverPlan, WhatIf]:
    hours = [h for h in m.queue_by_hour if h[1] > 0]
    worst = max(hours, key=lambda h: h[2]) if hours else None
    best_hour = min(hours, key=lambda h: h[2]) if hours else None
    candidates = [
        a
        for a in alts
        if a.count >= min_requests
        and a.queue_p50 is not None
        and (a.model, a.provider) != (m.model, m.provider)
    ]
    best = min(candidates, key=lambda a: (a.queue_p50 or 0, a.provider, a.model)) if candidates else None
    evidence: dict[str, str | int | float | None] = {
        "queue_share": round(m.share(QUEUE), 4),
        "queue_p50_ns": m.queue.p50,
        "queue_p95_ns": m.queue.p95,
        "worst_hour_utc": worst[0] if worst else None,
        "worst_hour_queue_p50_ns": worst[2] if worst else None,
        "best_hour_utc": best_hour[0] if best_hour else None,
        "best_hour_queue_p50_ns": best_hour[2] if best_hour else None,
        "alternative": f"{best.model} at {best.provider}" if best else None,
        "alternative_requests": best.count if best else None,
        "alternative_queue_p50_ns": best.queue_p50 if best else None,
    }
    reason = _part_reason(m, QUEUE)
    if reason is None and (best is None or m.queue.p50 is None or (best.queue_p50 or 0) >= m.queue.p50):
        reason = (
            f"no other provider/model with {min_requests}+ requests queues less: "
            "capacity (a higher tier, fewer concurrent calls) is the lever"
        )
    if reason is not None:
        return LeverPlan(QUEUE_ALTERNATIVE, reason, evidence), what_if
    assert best is not None and best.queue_p50 is not None
    return (
        LeverPlan(
            QUEUE_ALTERNATIVE,
            None,
            evidence,
            confidence(best.count, 1.0, min_requests, "medium"),
            (
                f"each request waits as long as the median queue of {best.model} at {best.provider} "
                f"({format_ns(best.queue_p50)}, {best.count} requests), and that queue does not grow "
                "with this group's traffic added",
                "the alternative's prefill and decode speed are not part of this estimate",
            ),
            f"move to {best.model} at {best.provider}",
        ),
        replace(what_if, alternative_queue_ns=float(best.queue_p50)),
    )


def _reuse_evidence(m: GroupMeasures) -> tuple[dict[str, str | int | float | None], str]:
    """The idle/warm split as evidence, and the sentence saying what it shows."""
    r = m.reuse
    evidence: dict[str, str | int | float | None] = {
        "after_idle_requests": r.idle_requests,
        "after_idle_network_p50_ns": r.idle_p50,
        "warm_requests": r.warm_requests,
        "warm_network_p50_ns": r.warm_p50,
    }
    idle = f"requests {IDLE_GAP_NS // 1_000_000_000} s or more after the previous one to their endpoint"
    if r.setup_seen:
        assert r.idle_p50 is not None and r.warm_p50 is not None
        sentence = (
            f"connection set-up is seen: {idle} ({r.idle_requests}) take {format_ns(r.idle_p50)} of network "
            f"at p50, those sooner ({r.warm_requests}) {format_ns(r.warm_p50)}; keep-alive or a warm pool "
            f"would save about {format_ns(r.idle_p50 - r.warm_p50)} on each (request rows carry no "
            "connection ids, so a new connection is inferred from the idle gap)"
        )
    elif r.telling:
        sentence = (
            f"no sign of connection set-up: {idle} take {format_ns(r.idle_p50 or 0)} of network at p50, "
            f"those sooner {format_ns(r.warm_p50 or 0)}; slow network here is distance or the path, not new "
            "connections"
        )
    else:
        sentence = (
            f"the data does not tell connection reuse ({r.idle_requests} {idle}, {r.warm_requests} sooner; "
            f"{MIN_REUSE_SAMPLES} of each needed): network above the group's median is assumed to be "
            "connection set-up or distance"
        )
    return evidence, sentence


def _plan_network(
    m: GroupMeasures, _alts: Sequence[Alternative], min_requests: int, _by: Sequence[str], what_if: WhatIf
) -> tuple[LeverPlan, WhatIf]:
    net = m.network
    reuse, sentence = _reuse_evidence(m)
    endpoints = tuple(m.endpoints)
    named = [e for e in endpoints if e.endpoint]
    evidence: dict[str, str | int | float | None] = {
        "network_share": round(m.share(NETWORK), 4),
        "network_p50_ns": net.p50,
        "network_p95_ns": net.p95,
        "provider": m.provider,
        "endpoints": len(named),
        **reuse,
    }
    if named:
        slow, fast = named[0], named[-1]
        evidence["slowest_endpoint"] = slow.endpoint
        evidence["slowest_endpoint_network_p50_ns"] = slow.network.p50
        if len(named) > 1:
            evidence["fastest_endpoint"] = fast.endpoint
            evidence["fastest_endpoint_network_p50_ns"] = fast.network.p50
    reason = _part_reason(m, NETWORK)
    if reason is None and (net.p50 is None or net.p95 is None or net.p95 <= net.p50):
        reason = "network time is even across requests: no slow connections to remove"
    if reason is not None:
        return LeverPlan(NETWORK_REUSE, reason, evidence, endpoints=endpoints), what_if
    assert net.p50 is not None
    where = named[0].endpoint if len(named) == 1 else m.provider
    if m.reuse.setup_seen:
        action = f"reuse connections to {where} (keep-alive, one long-lived client)"
    elif len(named) > 1:
        action = f"call {named[-1].endpoint} rather than {named[0].endpoint}, or a closer region"
    else:
        action = f"reuse connections / a closer region for {where}"
    assumptions = (
        f"network time above the group's median ({format_ns(net.p50)}) is what reused connections or a "
        "closer region remove",
        sentence,
    )
    ceiling = "medium" if m.reuse.setup_seen or len(named) > 1 else "low"
    return (
        LeverPlan(
            NETWORK_REUSE,
            None,
            evidence,
            confidence(m.count, 1.0, min_requests, ceiling),
            assumptions,
            action,
            endpoints=endpoints,
        ),
        replace(what_if, network_cap_ns=float(net.p50)),
    )


def _plan_parallel(
    m: GroupMeasures, _alts: Sequence[Alternative], min_requests: int, _by: Sequence[str], what_if: WhatIf
) -> tuple[LeverPlan, WhatIf]:
    share = m.share(TOOL) + m.share(RETRIEVAL)
    critical = m.part_sums.get(TOOL, 0) + m.part_sums.get(RETRIEVAL, 0)
    evidence: dict[str, str | int | float | None] = {
        "tool_and_retrieval_share": round(share, 4),
        "tool_and_retrieval_busy_ns": m.busy_app_ns,
        "tool_and_retrieval_critical_ns": critical,
        "requests_with_serial_siblings": m.serial_requests,
        "serial_saving_p50_ns": m.serial_saving_p50,
    }
    reason = None
    if share < PART_MIN_SHARE:
        reason = (
            f"tool and retrieval calls are {_pct(share)} of end-to-end time (below {_pct(PART_MIN_SHARE)})"
        )
    elif m.serial_requests == 0:
        reason = "no sibling tool or retrieval calls ran one after another"
    if reason is not None:
        return LeverPlan(PARALLEL_CALLS, reason, evidence), what_if
    return (
        LeverPlan(
            PARALLEL_CALLS,
            None,
            evidence,
            confidence(m.serial_requests, m.serial_requests / m.count, min_requests, "medium"),
            (
                "sibling tool and retrieval calls under one parent do not need each other's results, "
                "so they can start together and the slowest sets the time (the spans cannot tell)",
                "the saving comes off the request's tool and retrieval time on the critical path; "
                "TTFT is unchanged",
            ),
            f"run sibling calls at once ({m.serial_requests} requests run them one after another)",
        ),
        replace(what_if, parallel_calls=1.0),
    )


def _plan_model(
    m: GroupMeasures, alts: Sequence[Alternative], min_requests: int, by: Sequence[str], prices: Prices | None
) -> LeverPlan:
    evidence: dict[str, str | int | float | None] = {"route": m.route, "model": m.model}
    if "route" not in by or "model" not in by:
        reason = "needs groups by route and model to compare the models of one route"
        return LeverPlan(SWITCH_MODEL, reason, evidence)
    candidates = [
        a
        for a in alts
        if a.route == m.route and a.model != m.model and a.count >= min_requests and a.e2e.p95 is not None
    ]
    best = min(candidates, key=lambda a: (a.e2e.p95 or 0, a.model, a.provider)) if candidates else None
    evidence["cost_per_request_usd"] = m.usage.cost_usd(m.provider, m.model, prices)
    if best is not None:
        evidence.update(
            {
                "alternative": f"{best.model} at {best.provider}",
                "alternative_cost_per_request_usd": best.usage.cost_usd(best.provider, best.model, prices),
                "alternative_requests": best.count,
                "alternative_e2e_p50_ns": best.e2e.p50,
                "alternative_e2e_p95_ns": best.e2e.p95,
                "alternative_ttft_p50_ns": best.ttft.p50,
                "alternative_ttft_p95_ns": best.ttft.p95,
            }
        )
    if best is None or m.e2e.p95 is None or (best.e2e.p95 or 0) >= m.e2e.p95:
        reason = f"no other model with {min_requests}+ requests on this route is faster at p95"
        return LeverPlan(SWITCH_MODEL, reason, evidence)
    return LeverPlan(
        SWITCH_MODEL,
        None,
        evidence,
        confidence(best.count, 1.0, min_requests, "medium"),
        (
            f"this route's requests on {best.model} take what its {best.count} requests already "
            "served there took (the same mix of prompts and answers)",
            "answer quality is not measured here",
        ),
        f"switch to {best.model} at {best.provider}",
        (best.e2e, best.ttft),
    )


# Verdicts -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Change:
    """After − before, in ns (negative: faster); None where either side is unknown."""

    e2e_p50: int | None = None
    e2e_p95: int | None = None
    ttft_p50: int | None = None
    ttft_p95: int | None = None


@dataclass(frozen=True)
class LeverAdvice:
    lever: str
    title: str
    recommended: bool
    summary: str
    """What to do and what it buys, or why not, in one line."""
    change: Change | None
    after: Change | None
    """Estimated values after the change (absolute ns, in the same fields)."""
    evidence: Mapping[str, str | int | float | None]
    confidence: str
    assumptions: tuple[str, ...]
    endpoints: tuple[EndpointNetwork, ...] = ()


def _diff(after: int | None, before: int | None) -> int | None:
    return after - before if after is not None and before is not None else None


def _saving_share(change: int | None, before: int | None) -> float:
    if change is None or before is None or before <= 0:
        return 0.0
    return -change / before


def judge(plan: GroupPlan, after: Mapping[str, tuple[Percentiles, Percentiles]]) -> list[LeverAdvice]:
    """Ranked advice for one group. ``after`` maps an evaluated lever to its end-to-end and TTFT
    percentiles after the change (measured by replaying the rows); a lever planned with
    ``measured_after`` brings its own."""
    m = plan.measures
    verdicts = []
    for lever in plan.levers:
        result = lever.measured_after or after.get(lever.lever)
        if lever.reason is not None or result is None:
            reason = lever.reason or "no rows to replay"
            verdicts.append(
                LeverAdvice(
                    lever.lever,
                    TITLES[lever.lever],
                    False,
                    reason,
                    None,
                    None,
                    {"dominant": m.dominant, "requests": m.count, **lever.evidence},
                    lever.confidence,
                    lever.assumptions,
                    lever.endpoints,
                )
            )
            continue
        e2e_after, ttft_after = result
        change = Change(
            _diff(e2e_after.p50, m.e2e.p50),
            _diff(e2e_after.p95, m.e2e.p95),
            _diff(ttft_after.p50, m.ttft.p50),
            _diff(ttft_after.p95, m.ttft.p95),
        )
        best = max(_saving_share(change.e2e_p95, m.e2e.p95), _saving_share(change.ttft_p95, m.ttft.p95))
        recommended = best >= MIN_SAVING_SHARE
        if recommended:
            summary = f"{lever.action}: {_effect(change)}"
        elif best > 0:
            summary = f"{lever.action} would cut p95 by {best:.1%} only ({_effect(change)})"
        else:
            summary = f"{lever.action} would not cut p95 end-to-end time or TTFT"
        verdicts.append(
            LeverAdvice(
                lever.lever,
                TITLES[lever.lever],
                recommended,
                summary,
                change,
                Change(e2e_after.p50, e2e_after.p95, ttft_after.p50, ttft_after.p95),
                {"dominant": m.dominant, "requests": m.count, **lever.evidence},
                lever.confidence,
                lever.assumptions,
                lever.endpoints,
            )
        )
    return rank(verdicts)


def rank(verdicts: Sequence[LeverAdvice]) -> list[LeverAdvice]:
    """Recommended levers first, by p95 end-to-end saving, then p95 TTFT saving; then the rest."""

    def key(v: LeverAdvice) -> tuple[int, float, float, int]:
        change = v.change or Change()
        e2e = change.e2e_p95 if change.e2e_p95 is not None else math.inf
        ttft = change.ttft_p95 if change.ttft_p95 is not None else math.inf
        return (0 if v.recommended else 1, e2e, ttft, LEVERS.index(v.lever))

    return sorted(verdicts, key=key)


def _effect(change: Change) -> str:
    parts = [
        f"{label} {_signed(value)}"
        for label, value in (("p95 end-to-end", change.e2e_p95), ("p95 TTFT", change.ttft_p95))
        if value is not None and value != 0
    ]
    return ", ".join(parts) or "no change"


def _signed(ns: int) -> str:
    return ("+" if ns > 0 else "−") + format_ns(abs(ns))


__all__ = [
    "CONFIDENCE_LEVELS",
    "DEFAULT_PREFIX_SHARE",
    "HIGH_CONFIDENCE_SAMPLES",
    "HIGH_COVERAGE",
    "IDLE_GAP_NS",
    "LEVERS",
    "LITTLE_REUSE",
    "LONG_OUTPUT_RATIO",
    "MIN_REUSE_SAMPLES",
    "MIN_SAVING_SHARE",
    "NETWORK_REUSE",
    "NO_CAP",
    "PARALLEL_CALLS",
    "PART_MIN_SHARE",
    "PREFIX_CACHING",
    "QUEUE_ALTERNATIVE",
    "REUSE_GAP",
    "SHORTEN_OUTPUTS",
    "SWITCH_MODEL",
    "TITLES",
    "Alternative",
    "Change",
    "EndpointNetwork",
    "GroupMeasures",
    "GroupPlan",
    "LeverAdvice",
    "LeverPlan",
    "MeanUsage",
    "Percentiles",
    "PrefillSums",
    "ReuseSplit",
    "WhatIf",
    "confidence",
    "decode_saving_ns",
    "judge",
    "network_saving_ns",
    "parallel_saving_ns",
    "plan_group",
    "prefill_saving_ns",
    "queue_change_ns",
    "rank",
]
