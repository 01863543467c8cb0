"""Scrape-time metric families cut to one project and to a bounded number of series.

Label values people choose (service and model names, SLO names) must not decide how large
``/metrics`` is: one export with 5,000 service names grew it from 0.5 MB to 18 MB, and every
scrape and every Prometheus series paid for it. So, per project and per family:

- label values are cut to :data:`MAX_LABEL_CHARS` characters;
- the ``top`` label sets that matter most keep series of their own: for a histogram the most
  observations (volume), for a gauge the highest or lowest value as its :class:`Rule` says (the
  highest burn rates, the lowest remaining budgets);
- the rest are combined under the label value :data:`OTHER`: histogram buckets, counts and sums
  added (so totals stay exact), gauges by the family's rule (the worst of the rest).

Families without a rule pass through unchanged. Pure functions over prometheus_client
:class:`Metric` objects; no I/O.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from prometheus_client.core import Metric
from prometheus_client.samples import Sample

OTHER: Final = "other"
MAX_LABEL_CHARS: Final = 100
PROJECT_LABEL: Final = "project"
_CUT_MARK: Final = "…"

Combine = Callable[[Iterable[float]], float]


@dataclass(frozen=True)
class Rule:
    """How one family is bounded: ``keys`` are the labels people name; ``combine`` merges values
    of the same sample; ``highest_first`` orders gauges (histograms rank by their ``_count``)."""

    keys: tuple[str, ...]
    combine: Combine = sum
    highest_first: bool = True


def cut(value: str) -> str:
    """A label value of at most :data:`MAX_LABEL_CHARS` characters."""
    return value if len(value) <= MAX_LABEL_CHARS else value[: MAX_LABEL_CHARS - 1] + _CUT_MARK


def for_project(families: Iterable[Metric], project: str) -> list[Metric]:
    """Only the samples labelled with ``project`` (families that have no project label are left
    out: they are not the project's)."""
    kept = []
    for family in families:
        samples = [s for s in family.samples if s.labels.get(PROJECT_LABEL) == project]
        if samples:
            kept.append(_family_like(family, samples))
    return kept


def bounded(families: Iterable[Metric], rules: Mapping[str, Rule], top: int) -> list[Metric]:
    """Each family with a rule cut to ``top`` label sets per project plus :data:`OTHER`."""
    return [
        _bound(family, rules[family.name], max(1, top)) if family.name in rules else family
        for family in families
    ]


Key = tuple[str, tuple[str, ...]]
"""(project, values of the rule's keys): one label set that keeps or loses its own series."""
SampleId = tuple[str, tuple[tuple[str, str], ...]]


def _bound(family: Metric, rule: Rule, top: int) -> Metric:
    groups: dict[Key, dict[SampleId, list[float]]] = defaultdict(lambda: defaultdict(list))
    for sample in family.samples:
        if sample.name.endswith("_created"):
            continue  # a creation time cannot be added up; custom families have none anyway
        labels = {name: cut(value) if name in rule.keys else value for name, value in sample.labels.items()}
        key = (labels.get(PROJECT_LABEL, ""), tuple(labels.get(name, "") for name in rule.keys))
        groups[key][(sample.name, tuple(sorted(labels.items())))].append(sample.value)
    merged = {
        key: {sid: rule.combine(values) for sid, values in samples.items()} for key, samples in groups.items()
    }
    by_project: dict[str, list[Key]] = defaultdict(list)
    for key in merged:
        by_project[key[0]].append(key)
    kept: dict[SampleId, float] = {}
    rest: dict[SampleId, list[float]] = defaultdict(list)
    for keys in by_project.values():
        ranked = sorted(keys, key=lambda key: (_rank(family, rule, merged[key]), key[1]))
        for position, key in enumerate(ranked):
            for (name, items), value in merged[key].items():
                if position < top:
                    kept[(name, items)] = value
                else:
                    other = tuple((n, OTHER if n in rule.keys else v) for n, v in items)
                    rest[(name, other)].append(value)
    combined = {**kept, **{sid: rule.combine(values) for sid, values in rest.items()}}
    samples = [Sample(name, dict(items), value) for (name, items), value in combined.items()]
    return _family_like(family, samples)


def _rank(family: Metric, rule: Rule, samples: Mapping[SampleId, float]) -> float:
    """Sort key of a label set (smaller first): minus its volume for a histogram, else its value
    (negated when the highest come first)."""
    if family.type == "histogram":
        return -sum(value for (name, _), value in samples.items() if name.endswith("_count"))
    values = list(samples.values())
    return -max(values) if rule.highest_first else min(values)


def _family_like(family: Metric, samples: list[Sample]) -> Metric:
    copy = Metric(family.name, family.documentation, family.type, family.unit)
    copy.samples = samples
    return copy
