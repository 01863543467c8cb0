"""What an SLO says: the metric, which requests count, and the objective — validated once here.

The same models validate the API body, the CLI's input and the YAML file, so the three cannot
accept different things. Durations are integer ns on the wire; windows are written ``5m``, ``1h``,
``30d``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Final, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, field_validator

METRIC_COLUMNS: Final = {"ttft": "ttft_ns", "e2e": "e2e_ns", "itl": "itl_ns"}
"""SLO metric → column of ``requests`` it is measured on (the only column names SQL ever sees)."""

_UNIT_NS: Final = {
    "ns": 1,
    "us": 1_000,
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60 * 1_000_000_000,
    "h": 3600 * 1_000_000_000,
    "d": 86_400 * 1_000_000_000,
    "w": 7 * 86_400 * 1_000_000_000,
}
_DURATION = re.compile(r"^\s*(\d+)\s*(ns|us|ms|s|m|h|d|w)\s*$")


def parse_duration(text: str) -> int:
    """``"5m"`` → 300_000_000_000 ns. Whole numbers and one unit only, so windows read unambiguously."""
    match = _DURATION.match(text)
    if match is None:
        raise ValueError(f"invalid duration {text!r}: use a whole number and one of {', '.join(_UNIT_NS)}")
    return int(match.group(1)) * _UNIT_NS[match.group(2)]


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

    project: str = "default"


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
