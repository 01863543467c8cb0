"""What an SLO says: the metric, which requests count, and the objective — validated once here.

The same models validate the API body, the CLI's input and the YAML file, so the three cannot
accept different things. Durations are integer ns on the wire; windows are written ``5m``, ``1h``,
``30d`` (:func:`~latencylens_collector.queries.times.parse_duration`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, field_validator

from latencylens_collector.analysis.records import DEFAULT_PROJECT
from latencylens_collector.queries.times import parse_duration


def _duration_text(value: object) -> object:
    if isinstance(value, str):
        parse_duration(value)
    return value


def _threshold_ns(value: object) -> object:
    """Thresholds are ns; a duration string such as ``"800ms"`` is accepted for hand-written files."""
    if isinstance(value, str) and not value.strip().isdigit():
        return parse_duration(value)
    return value


class SloFilter(BaseModel):
    """Which requests an SLO covers; an absent field matches everything."""

    model_config = ConfigDict(extra="forbid")

    service: str | None = None
    route: str | None = Field(default=None, description="Root span name, e.g. `POST /chat`.")
    model: str | None = None
    provider: str | None = None


class PercentileObjective(BaseModel):
    """``quantile`` of the metric over ``window`` must stay ≤ ``threshold_ns``; an alert fires once it
    has been above for ``for``."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    type: Literal["percentile"] = "percentile"
    quantile: float = Field(gt=0, lt=1)
    threshold_ns: int = Field(gt=0)
    window: str = "5m"
    for_: str = Field(default="10m", alias="for")

    _check_threshold = field_validator("threshold_ns", mode="before")(_threshold_ns)
    _check_durations = field_validator("window", "for_", mode="before")(_duration_text)

    @property
    def window_ns(self) -> int:
        return parse_duration(self.window)

    @property
    def for_ns(self) -> int:
        return parse_duration(self.for_)


class RatioObjective(BaseModel):
    """At least ``target`` of requests have the metric ≤ ``threshold_ns`` over ``period``."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["ratio"] = "ratio"
    target: float = Field(gt=0, lt=1)
    threshold_ns: int = Field(gt=0)
    period: str = "30d"

    _check_threshold = field_validator("threshold_ns", mode="before")(_threshold_ns)
    _check_durations = field_validator("period", mode="before")(_duration_text)

    @property
    def period_ns(self) -> int:
        return parse_duration(self.period)


Objective = Annotated[PercentileObjective | RatioObjective, Field(discriminator="type")]


class SloDefinition(BaseModel):
    """An SLO as written by a person: the body of ``POST /api/slos`` and one entry of the YAML file."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=200)
    metric: Literal["ttft", "e2e", "itl"] = "ttft"
    filter: SloFilter = Field(default_factory=SloFilter)
    objective: Objective
    min_requests: int = Field(default=20, ge=1, description="Below this many requests nothing fires.")

    def objective_json(self) -> dict[str, Any]:
        return self.objective.model_dump(by_alias=True)


class SloFileEntry(SloDefinition):
    """A YAML entry may name the project it belongs to (default: ``default``)."""

    project: str = DEFAULT_PROJECT


class SloFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    slos: list[SloFileEntry] = Field(default_factory=list)


_OBJECTIVE: TypeAdapter[PercentileObjective | RatioObjective] = TypeAdapter(Objective)


def objective_from_json(data: dict[str, Any]) -> PercentileObjective | RatioObjective:
    return _OBJECTIVE.validate_python(data)


def load_file(path: str | Path) -> list[SloFileEntry]:
    """SLOs of a YAML file: ``slos: [{name, metric, filter, objective, min_requests, project?}]``."""
    document = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    return SloFile.model_validate(document).slos
