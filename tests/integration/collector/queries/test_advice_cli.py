"""``latencylens advise`` against a running collector seeded with the known-truth workload, read at
80 columns (tests/support/advice_workload.py has the hand-worked numbers)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from advice_service import SeededAdvice, seeded_collector

from latencylens_collector.cli.main import main


@pytest.fixture(scope="module")
def seeded(chdb_dsn: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeededAdvice]:
    with seeded_collector(chdb_dsn, Path(tmp_path_factory.mktemp("advice_cli")), "advice_cli") as running:
        yield running


@pytest.fixture
def columns_80(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")


def advise(seeded: SeededAdvice, capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(["advise", "--url", seeded.url, *args]) == 0
    return capsys.readouterr().out


def test_table_at_80_columns_ranks_the_planted_levers(seeded, capsys, columns_80) -> None:
    out = advise(seeded, capsys)
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 80, [line for line in lines if len(line) > 80]
    assert lines[0] == "What to change first: 8 group(s) by route, model with 20+ requests"
    # /story: capping at 200 tokens takes p95 from 10 105 to 2105 ms (−8000 ms), TTFT unchanged.
    story = out[out.index("POST /story / m-writer") :]
    assert story.startswith("POST /story / m-writer: 40 requests, decode is 97% of end-to-end time")
    assert "now (ms): e2e p50 2105.0, p95 10105.0; TTFT p50 115.0, p95 115.0" in story
    assert "cost per request: no price" in story  # m-writer is no model the price data knows
    # gpt-4o's mean request: 500 × $2.50 / M + 100 × $10 / M (test_advice_api.py works it out)
    assert "cost per request: $0.00225" in out[out.index("POST /answer / gpt-4o:") :]
    assert "Costs: genai-prices " in out
    row = next(line for line in story.splitlines() if line.lstrip().startswith("1  shorten_outputs"))
    assert row.split() == ["1", "shorten_outputs", "+0.0", "-8000.0", "+0.0", "+0.0", "medium"]
    assert "1. Shorten or cap long outputs: cap outputs at 200 tokens (p50; p95 is 1000)" in story
    # /summarize: −150 ms of prefill on every uncached request, in e2e and TTFT alike.
    summarize = out[out.index("POST /summarize / m-reader") :]
    row = next(line for line in summarize.splitlines() if line.lstrip().startswith("1  prefix_caching"))
    assert row.split() == ["1", "prefix_caching", "-150.0", "-150.0", "-150.0", "-150.0", "medium"]
    assert "prefill per 1k uncached tokens 50.0 ms" in " ".join(summarize.split())
    # /answer on gpt-4o-mini has nothing worth 5 % of p95
    fast = out[out.index("POST /answer / gpt-4o-mini") :]
    assert "No lever cuts p95 by 5 % or more." in fast.split("\n\n")[0] + fast


def test_all_says_why_the_other_levers_do_not_apply(seeded, capsys, columns_80) -> None:
    out = advise(seeded, capsys, "--all", "--route", "POST /summarize")
    assert max(len(line) for line in out.splitlines()) <= 80
    flat = " ".join(out.split())
    assert "Does not apply:" in out
    assert (
        "- shorten_outputs: outputs are even (p95 20 tokens, p50 20; below 1.5×): no long tail to cap" in flat
    )
    assert "- queue_alternative: queue is 9% of end-to-end time (below 20%)" in flat


def test_json_and_group_by(seeded, capsys) -> None:
    body = json.loads(advise(seeded, capsys, "--json", "--by", "route", "--min-requests", "45"))
    assert body["by"] == ["route"] and body["min_requests"] == 45
    assert [(g["key"], g["count"]) for g in body["groups"]] == [({"route": "POST /answer"}, 50)]


def test_bad_group_by_is_one_error_line(seeded, capsys) -> None:
    assert main(["advise", "--url", seeded.url, "--by", "colour"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "allowed: service, route, model, provider" in err
