"""The vocabulary is defined once (analysis/vocabulary.py): the glossary in docs/glossary.md is
exactly that definition, the API schema describes the parts with it, and it covers every part."""

from __future__ import annotations

import re
from pathlib import Path

from latencylens_collector.analysis import vocabulary
from latencylens_collector.analysis.attribution import COMPONENTS
from latencylens_collector.queries.responses import RequestSummary

REPO = Path(__file__).resolve().parents[4]
GLOSSARY = REPO / "docs" / "glossary.md"


def _docs_table() -> list[tuple[str, ...]]:
    text = GLOSSARY.read_text(encoding="utf-8")
    block = text.split("<!-- glossary:start -->", 1)[1].split("<!-- glossary:end -->", 1)[0]
    rows = [line for line in block.strip().splitlines() if line.startswith("|")]
    assert rows[0] == "| key | label | unit | meaning |" and set(rows[1]) <= {"|", "-"}
    cells = [tuple(cell.strip() for cell in row.strip("|").split(" | ")) for row in rows[2:]]
    return [(re.sub(r"^`(.*)`$", r"\1", key), *rest) for key, *rest in cells]


def test_docs_glossary_equals_the_definition() -> None:
    assert _docs_table() == vocabulary.glossary_rows()


def test_every_part_has_one_distinct_label() -> None:
    assert [term.key for term in vocabulary.PARTS] == list(COMPONENTS)
    labels = [term.label for term in vocabulary.PARTS]
    assert len(set(labels)) == len(labels)
    # The application group's label is not also a part's label (it was "app" for both).
    assert vocabulary.APPLICATION.label not in labels
    assert vocabulary.label("model_unattributed") == "model, unattributed"
    assert vocabulary.label("no-such-key") == "no-such-key"


def test_api_schema_describes_parts_with_their_labels() -> None:
    description = RequestSummary.model_fields["parts"].description or ""
    for term in vocabulary.PARTS:
        assert f'{term.key} ("{term.label}": {term.meaning})' in description


def test_ui_reads_the_same_definition() -> None:
    data = vocabulary.as_json()
    assert [part["key"] for part in data["parts"]] == list(COMPONENTS)  # type: ignore[index,union-attr]
    assert data["percentiles"] == ["p50", "p95", "p99"] and data["time_zone"] == "UTC"
