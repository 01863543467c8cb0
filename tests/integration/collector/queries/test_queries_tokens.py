"""Unknown and estimated token counts: null (never 0) in the API, ``-`` / ``~`` in the CLI, and left
out of aggregates, whether these read request rows or the hourly rollup."""

from __future__ import annotations

import time
from datetime import datetime, timezone

import httpx
import pytest
from queries_data import S, request_row, trace_id

from latencylens_collector import queries
from latencylens_collector.cli.main import main
from latencylens_collector.storage import rollup

HOUR = 3600 * S
PARTS = {"network": 100, "decode": 300}


@pytest.fixture
def loaded(collector):
    """Four requests of model m in one closed hour, two hours ago:

    1. reported: 1000 input (250 cached) → 100 output;
    2. no call reported usage: every count unknown;
    3. input 3000 and output 60 reported, cached count not reported;
    4. an instrumentation's estimate: 500 input (500 "cached") → 6 output.
    """
    t0 = (time.time_ns() // HOUR - 2) * HOUR
    collector.store.upsert_requests(
        [
            request_row(1, t0, PARTS, model="m", input_tokens=1000, output_tokens=100, cached=250, tps=400.0),
            request_row(2, t0 + S, PARTS, model="m", input_tokens=None, output_tokens=None, cached=None),
            request_row(3, t0 + 2 * S, PARTS, model="m", input_tokens=3000, output_tokens=60, cached=None),
            request_row(
                4, t0 + 3 * S, PARTS, model="m", input_tokens=500, output_tokens=6, cached=500, estimated=True
            ),
        ]
    )
    collector.t0 = t0
    return collector


def detail(url: str, n: int) -> dict:
    response = httpx.get(f"{url}/api/requests/{trace_id(n).hex()}")
    assert response.status_code == 200, response.text
    return response.json()


def test_the_api_says_null_for_unknown_counts_and_flags_estimates(loaded) -> None:
    reported, unknown, partly, estimated = (detail(loaded.url, n) for n in (1, 2, 3, 4))
    assert (reported["input_tokens"], reported["output_tokens"], reported["cache_read_input_tokens"]) == (
        1000,
        100,
        250,
    )
    assert reported["tokens_estimated"] is False
    assert (unknown["input_tokens"], unknown["output_tokens"], unknown["cache_read_input_tokens"]) == (
        None,
        None,
        None,
    )
    assert unknown["tokens_estimated"] is False
    assert partly["cache_read_input_tokens"] is None and partly["input_tokens"] == 3000
    assert estimated["tokens_estimated"] is True and estimated["output_tokens"] == 6
    listed = httpx.get(f"{loaded.url}/api/requests", params={"since": str(loaded.t0 // S)}).json()
    by_id = {row["trace_id"]: row for row in listed["requests"]}
    assert by_id[trace_id(2).hex()]["input_tokens"] is None
    assert by_id[trace_id(4).hex()]["tokens_estimated"] is True


@pytest.mark.parametrize("use", ["never", "always"])
def test_aggregates_leave_unknown_and_estimated_counts_out(loaded, use: str) -> None:
    """Cached-token ratio over requests whose input and cached counts were both reported: only
    request 1, 250 / 1000 = 0.25. Counting unknown as 0 and the estimate in would give
    (250 + 0 + 0 + 500) / (1000 + 0 + 3000 + 500) = 0.1667."""
    store = loaded.store
    if use == "always":
        built = rollup.refresh(store, settle_s=0)
        assert loaded.t0 // S in {b.hour_s for b in built}
    result = queries.stats(
        store,
        "default",
        now=datetime.now(timezone.utc),
        since=str(loaded.t0 // S),
        until=str(loaded.t0 // S + 3600),
        by=["model"],
        rollup=use,  # type: ignore[arg-type]
    )
    [group] = result.groups
    assert group.count == 4
    assert group.cached_token_ratio == pytest.approx(0.25)
    assert group.output_tokens_per_second == pytest.approx(400.0)  # the only request with a rate


def test_the_cli_shows_unknown_and_estimated_counts(loaded, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    lines = {}
    for n in (1, 2, 4):
        assert main(["explain", trace_id(n).hex(), "--url", loaded.url]) == 0
        lines[n] = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("tokens:"))
    assert lines[1] == "tokens: 1,000 in (250 cached) → 100 out"
    assert lines[2].startswith("tokens: - in (- cached) → - out") and "unknown" in lines[2]
    assert lines[4].startswith("tokens: ~500 in (~500 cached) → ~6 out") and "estimated" in lines[4]
