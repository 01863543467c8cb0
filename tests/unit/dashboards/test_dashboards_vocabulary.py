"""The Grafana dashboards speak the vocabulary of analysis/vocabulary.py: each part's series or
column is shown under its label, the percentiles are the ones the UI shows, times are UTC."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from latencylens_collector.analysis import vocabulary
from latencylens_collector.analysis.attribution import COMPONENTS

DASHBOARDS = sorted((Path(__file__).resolve().parents[3] / "dashboards" / "json").glob("*.json"))
QUANTILE_OF = {"0.5": "p50", "0.9": "p90", "0.95": "p95", "0.99": "p99"}


def _panels(path: Path) -> list[dict[str, Any]]:
    return json.loads(path.read_text(encoding="utf-8"))["panels"]


def _sql(panel: dict[str, Any]) -> str:
    return "\n".join(target.get("rawSql", "") for target in panel.get("targets", []))


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.stem)
def test_dashboards_show_times_in_utc(path: Path) -> None:
    assert json.loads(path.read_text(encoding="utf-8"))["timezone"] == vocabulary.TIME_ZONE.lower()


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.stem)
def test_every_part_column_is_shown_under_its_label(path: Path) -> None:
    checked = 0
    for panel in _panels(path):
        selected = set(re.findall(r"\bAS (\w+)", _sql(panel)))
        names = {
            override["matcher"]["options"]: {prop["id"]: prop.get("value") for prop in override["properties"]}
            for override in panel.get("fieldConfig", {}).get("overrides", [])
            if override["matcher"]["id"] == "byName"
        }
        for part in selected & set(COMPONENTS):
            labels = [
                props["displayName"] for key, props in names.items() if key == part and "displayName" in props
            ]
            assert labels == [vocabulary.PART_LABELS[part]], f"{panel['title']}: {part} shown as {labels}"
            checked += 1
    assert checked >= 10


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.stem)
def test_percentiles_are_the_ones_every_surface_shows(path: Path) -> None:
    for panel in _panels(path):
        for quantile, alias in re.findall(r"quantile\(([\d.]+)\)\([^)]*\) AS (\w+)", _sql(panel)):
            shown = QUANTILE_OF[quantile]
            assert shown in vocabulary.PERCENTILES, f"{panel['title']}: {alias} is {shown}"
            if re.fullmatch(r"\w*p\d\d", alias):  # an alias naming a percentile names the right one
                assert alias.endswith(shown), f"{panel['title']}: {alias} is {shown}"


def test_dominant_part_is_named_by_its_label() -> None:
    breakdown = next(path for path in DASHBOARDS if path.stem == "latencylens-breakdown")
    slowest = next(panel for panel in _panels(breakdown) if panel["title"] == "Slowest requests")
    names = re.search(r"arrayElement\(\[([^\]]*)\]", _sql(slowest))
    assert names is not None
    assert re.findall(r"'([^']*)'", names.group(1)) == [vocabulary.PART_LABELS[part] for part in COMPONENTS]
