# ruff: noqa: E501  (outputs at 200 columns are compared whole)
"""Whole outputs of the commands at 80 and 200 columns, on real requests in a real collector.

At 80 columns (and in a pipe, which gets 80) a table too wide is split into blocks of whole
columns, each led by the row's key or number; at 200 it is one grid. Either way every trace id,
time and number is printed whole. The requests are those of ``cli_data``: SLOW_ID (2000 ms) and
FAST_ID (1000 ms), with the arithmetic there.
"""

from __future__ import annotations

from typing import Any

import pytest
from cli_data import FAST_ID, SLOW_ID, Loaded, load_two_requests

from latencylens_collector.analysis.costs import price_data_version
from latencylens_collector.cli.main import main
from latencylens_collector.cli.output import utc
from latencylens_collector.metadata import db
from latencylens_collector.slo.repository import SloRepository

S = 1_000_000_000
MS = 1_000_000


@pytest.fixture
def loaded(collector) -> Loaded:
    return load_two_requests(collector.url)


def output(argv: list[str], columns: int, capsys: Any, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("COLUMNS", str(columns))
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert err == ""
    return out


def assert_within(text: str, columns: int) -> None:
    for line in text.splitlines():
        assert len(line) <= columns, line


def test_slow(loaded: Loaded, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    start = loaded.start
    narrow = output(["slow", "--url", loaded.url], 80, capsys, monkeypatch)
    assert (
        narrow
        == f"""Slowest requests (ms on the critical path)

#  trace id                          start
─  ────────────────────────────────  ───────────────────────
1  {SLOW_ID}  {start}
2  {FAST_ID}  {start}

#  service / name                  model                       e2e    app
─  ──────────────────────────────  ───────────────────────  ──────  ─────
1  shop / POST /chat               llama-3.3-70b-versatile  2000.0  600.0
2  support-assistant / POST /chat  m-small                  1000.0  300.0

#  network  queue  prefill  decode  model, unattributed
─  ───────  ─────  ───────  ──────  ───────────────────
1    460.0  100.0     40.0   800.0                  0.0
2    230.0   50.0     20.0   400.0                  0.0
app = retrieval + tool + app, other; model, unattributed = model time not split
"""
    )
    assert_within(narrow, 80)
    wide = output(["slow", "--url", loaded.url], 200, capsys, monkeypatch)
    rule = "  ".join("─" * w for w in (32, 23, 30, 23, 6, 5, 7, 5, 7, 6, 19))
    assert wide == (
        "Slowest requests (ms on the critical path)\n\n"
        "trace id                          start                    service / name                  "
        "model                       e2e    app  network  queue  prefill  decode  model, unattributed\n"
        f"{rule}\n"
        f"{SLOW_ID}  {start}  shop / POST /chat               "
        "llama-3.3-70b-versatile  2000.0  600.0    460.0  100.0     40.0   800.0                  0.0\n"
        f"{FAST_ID}  {start}  support-assistant / POST /chat  "
        "m-small                  1000.0  300.0    230.0   50.0     20.0   400.0                  0.0\n"
        "app = retrieval + tool + app, other; model, unattributed = model time not split\n"
    )


def test_slow_since_a_duration_ago(loaded: Loaded, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's ``latencylens slow --since 1h``: the service reads ``1h`` as an hour ago."""
    out = output(["slow", "--url", loaded.url, "--since", "1h"], 200, capsys, monkeypatch)
    assert SLOW_ID in out and FAST_ID in out  # both started 10 minutes ago
    out = output(["slow", "--url", loaded.url, "--since", "5m"], 200, capsys, monkeypatch)
    assert out == "no requests in this window\n"


# cost: llama-3.3-70b-versatile at groq, $0.59 / M input (no cache-read price: cached input at the
# input price) and $0.79 / M output: 500 × 0.59e-6 + 101 × 0.79e-6 = $0.00037479
EXPLAIN_HEAD = """shop / POST /chat
trace id: {trace_id}
start: {start}
model: llama-3.3-70b-versatile (groq)

{sentence}
dominant: decode 800.0 ms (40%, reported)
tokens: 500 in (100 cached) → 101 out
cost: $0.0003748 ({price_data})

Critical path (ms)

   e2e  retrieval   tool  app, other  network  queue  prefill  decode
──────  ─────────  ─────  ──────────  ───────  ─────  ───────  ──────
2000.0      200.0  100.0       300.0    460.0  100.0     40.0   800.0

Spans (ms; share = of the critical path)

span                            kind       duration    self  critical  share
──────────────────────────────  ─────────  ────────  ──────  ────────  ─────
POST /chat                      request      2000.0   300.0     300.0    15%
  retrieve docs                 retrieval     200.0   200.0     200.0    10%
  chat llama-3.3-70b-versatile  model        1400.0  1400.0    1400.0    70%
  execute_tool lookup           tool          100.0   100.0     100.0     5%
"""
# The root's self time is 2000 − (200 + 1400 + 100) = 300 ms of application work; each span owns
# its whole self time on the critical path (nothing overlaps), 300 / 2000 = 15% and so on.


def test_explain_by_prefix(loaded: Loaded, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    sentence = (
        "Generating output tokens (decode) on llama-3.3-70b-versatile (groq) took 800 ms of the "
        "request's 2.00 s (40%); as reported by groq."
    )
    narrow = output(["explain", SLOW_ID[:6], "--url", loaded.url], 80, capsys, monkeypatch)
    assert narrow == EXPLAIN_HEAD.format(
        trace_id=SLOW_ID,
        start=loaded.start,
        price_data=price_data_version(),
        sentence="Generating output tokens (decode) on llama-3.3-70b-versatile (groq) took 800 ms\n"
        "of the request's 2.00 s (40%); as reported by groq.",
    )
    assert_within(narrow, 80)
    wide = output(["explain", SLOW_ID, "--url", loaded.url], 200, capsys, monkeypatch)
    assert wide == EXPLAIN_HEAD.format(
        trace_id=SLOW_ID, start=loaded.start, sentence=sentence, price_data=price_data_version()
    )


def test_stats(loaded: Loaded, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    """Percentiles are ClickHouse's quantileBFloat16: a float32 cut to 8 significant bits, so one
    request's 2000 ms reads 1996.5 and 1000 ms 998.2; TTFT 600 (300 × 2) → 599.8, 300 → 299.9; ITL
    (700 − 300) × 2 / 100 gaps = 8.0 and 4.0. tok/s: 101 tokens over 0.8 s of decode = 126.25 and
    over 0.4 s = 252.5 (rounded half to even). Cached 100 / 500 = 20%. Shares of 2000 ms: decode
    800 = 40%, network 460 = 23%, app, other 300 = 15%. Cost: llama-3.3-70b-versatile at Groq
    (genai-prices: $0.59 / M input, cached input alike, $0.79 / M output), 500 input and 101 output
    tokens: 500 × 0.59 + 101 × 0.79 = 374.79 µ$ → $0.000375; m-small has no price."""
    since, until = utc(loaded.start_ns - 3600 * S), utc(loaded.start_ns + 3600 * S)
    window = ["--since", since.replace(" UTC", "Z"), "--until", until.replace(" UTC", "Z")]
    argv = ["stats", "--by", "model", "--url", loaded.url, *window]
    title = f"Requests {since} – {until} (ms)"
    narrow = output(argv, 80, capsys, monkeypatch)
    assert (
        narrow
        == f"""{title}

model                    n  e2e p50  e2e p95  e2e p99  ttft p95  itl p95
───────────────────────  ─  ───────  ───────  ───────  ────────  ───────
llama-3.3-70b-versatile  1   1996.5   1996.5   1996.5     599.8      8.0
m-small                  1    998.2    998.2    998.2     299.9      4.0

model                    top shares                               tok/s  cached
───────────────────────  ───────────────────────────────────────  ─────  ──────
llama-3.3-70b-versatile  decode 40%, network 23%, app, other 15%    126     20%
m-small                  decode 40%, network 23%, app, other 15%    252     20%

model                        $/req    $ total  no price
───────────────────────  ─────────  ─────────  ────────
llama-3.3-70b-versatile  $0.000375  $0.000375         0
m-small                   no price   no price         1
share = the component's part of all time on the critical path
tok/s = mean decode rate (output tokens / decode time)
$/req, $ total = mean and sum of the cost of requests with a price; no price =
requests whose model, provider or token counts have none (left out of both)
"""
    )
    wide = output(argv, 200, capsys, monkeypatch)
    assert (
        wide
        == f"""{title}

model                    n  e2e p50  e2e p95  e2e p99  ttft p95  itl p95  top shares                               tok/s  cached      $/req    $ total  no price
───────────────────────  ─  ───────  ───────  ───────  ────────  ───────  ───────────────────────────────────────  ─────  ──────  ─────────  ─────────  ────────
llama-3.3-70b-versatile  1   1996.5   1996.5   1996.5     599.8      8.0  decode 40%, network 23%, app, other 15%    126     20%  $0.000375  $0.000375         0
m-small                  1    998.2    998.2    998.2     299.9      4.0  decode 40%, network 23%, app, other 15%    252     20%   no price   no price         1
share = the component's part of all time on the critical path
tok/s = mean decode rate (output tokens / decode time)
$/req, $ total = mean and sum of the cost of requests with a price; no price = requests whose model, provider or token counts have none (left out of both)
"""
    )


def test_slo_list_and_alerts(start_collector, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    collector = start_collector(slo_eval_interval_s=0)
    argv = ["--url", collector.url]
    create = ["slo", "create", *argv, "--name", "chat TTFT p95 under 800 ms", "--route", "POST /chat"]
    assert main([*create, "--quantile", "0.95", "--threshold-ms", "800"]) == 0
    capsys.readouterr()
    # An alert as the evaluator leaves it, written through the service's own repository.
    repository = SloRepository(db.make_engine(collector.settings.metadata_url))
    [slo] = repository.slos("default")
    started = 1_767_225_600 * S  # 2026-01-01 00:00:00 UTC
    alert = repository.open_new_alert(slo, started)
    repository.record_transition(alert.id, "pending", started, "p95 TTFT above 800.0 ms")
    repository.record_transition(alert.id, "firing", started + 600 * S, "p95 TTFT 1234.5 ms > 800.0 ms")
    repository.update_alert(
        alert.id,
        fired_at_ns=started + 600 * S,
        value_ns=1_234_500_000,
        dominant_component="queue",
        dominant_delta_ns=412_300_000,
    )
    slos = output(["slo", "list", *argv], 80, capsys, monkeypatch)
    assert (
        slos
        == """SLOs

id  name                        metric  objective                       status
──  ──────────────────────────  ──────  ──────────────────────────────  ───────
 1  chat TTFT p95 under 800 ms  ttft    p95 ≤ 800.0 ms over 5m for 10m  no_data

id  value ms  budget left  burn 1h/5m/6h/30m
──  ────────  ───────────  ─────────────────
 1         -            -            -/-/-/-
"""
    )
    alerts_narrow = output(["slo", "alerts", *argv], 80, capsys, monkeypatch)
    assert (
        alerts_narrow
        == """Alerts (newest first)

id  slo                         state   started
──  ──────────────────────────  ──────  ───────────────────────
 1  chat TTFT p95 under 800 ms  firing  2026-01-01 00:00:00 UTC

id  fired                    resolved  value ms  burn  cause
──  ───────────────────────  ────────  ────────  ────  ───────────────
 1  2026-01-01 00:10:00 UTC  -           1234.5     -  queue +412.3 ms
"""
    )
    alerts_wide = output(["slo", "alerts", *argv], 200, capsys, monkeypatch)
    assert (
        alerts_wide
        == """Alerts (newest first)

id  slo                         state   started                  fired                    resolved  value ms  burn  cause
──  ──────────────────────────  ──────  ───────────────────────  ───────────────────────  ────────  ────────  ────  ───────────────
 1  chat TTFT p95 under 800 ms  firing  2026-01-01 00:00:00 UTC  2026-01-01 00:10:00 UTC  -           1234.5     -  queue +412.3 ms
"""
    )
    history = output(["slo", "history", "1", *argv], 80, capsys, monkeypatch)
    assert (
        history
        == """Alert history (oldest first)

at                       state    note
───────────────────────  ───────  ─────────────────────────────
2026-01-01 00:00:00 UTC  pending  p95 TTFT above 800.0 ms
2026-01-01 00:10:00 UTC  firing   p95 TTFT 1234.5 ms > 800.0 ms
"""
    )
