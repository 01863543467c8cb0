"""The Grafana dashboards: valid JSON for the ClickHouse plugin, and every panel's SQL runs on the real
schema (embedded ClickHouse) and returns rows for seeded requests.

Grafana's macros are expanded the way the plugin does (frontend: ``$__conditionalAll`` and template
variables; backend: ``$__timeFilter`` and friends), so what runs here is what Grafana would send.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
import yaml

from latencylens import semconv
from latencylens_collector.analysis.attribution import COMPONENTS
from latencylens_collector.analysis.records import SpanRow
from latencylens_collector.pipeline.ingest import Ingestor
from latencylens_collector.storage.store import Store

REPO = Path(__file__).resolve().parents[3]
DASHBOARDS = sorted((REPO / "dashboards" / "json").glob("*.json"))
PROVISIONING = REPO / "dashboards" / "provisioning"
UI_CSS = REPO / "collector" / "latencylens_collector" / "ui" / "static" / "app.css"
PLUGIN = "grafana-clickhouse-datasource"
MS = 1_000_000
BASE_NS = int(datetime(2025, 1, 15, 12, 0, tzinfo=timezone.utc).timestamp()) * 1_000_000_000
# Grafana's time range for the test: 11:00 to 13:00 UTC, 60 s intervals.
FROM_S = BASE_NS // 1_000_000_000 - 3600
TO_S = BASE_NS // 1_000_000_000 + 3600
INTERVAL_S = 60


def panels() -> Iterator[tuple[str, dict[str, Any]]]:
    for path in DASHBOARDS:
        for panel in json.loads(path.read_text())["panels"]:
            yield f"{path.stem}:{panel['title']}", panel


# --- seeding: three requests through the real ingest path -------------------------------------------


def _span(
    trace: int, span: int, parent: int, name: str, kind: str, start_ms: float, dur_ms: float, **attrs: Any
) -> SpanRow:
    attributes = {key: str(value) for key, value in attrs.items()}
    if kind != "request":
        attributes[semconv.SPAN_KIND] = kind
    return SpanRow(
        trace_id=trace.to_bytes(16, "big"),
        span_id=span.to_bytes(8, "big"),
        parent_span_id=parent.to_bytes(8, "big"),
        service="chat-api",
        name=name,
        span_kind="internal",
        kind=kind,
        start_ns=BASE_NS + round(start_ms * MS),
        duration_ns=round(dur_ms * MS),
        attributes=attributes,
    )


def _model_attrs(
    model: str, provider: str, queue_ms: int, prefill_ms: int, decode_ms: int, out: int
) -> dict[str, Any]:
    return {
        semconv.GEN_AI_REQUEST_MODEL: model,
        semconv.GEN_AI_PROVIDER_NAME: provider,
        semconv.PROVIDER_QUEUE_NS: queue_ms * MS,
        semconv.PROVIDER_PREFILL_NS: prefill_ms * MS,
        semconv.PROVIDER_DECODE_NS: decode_ms * MS,
        semconv.PROVIDER_SERVER_TOTAL_NS: (queue_ms + prefill_ms + decode_ms) * MS,
        semconv.STREAM_FIRST_CONTENT_NS: (queue_ms + prefill_ms + 5) * MS,
        semconv.STREAM_LAST_CHUNK_NS: (queue_ms + prefill_ms + decode_ms + 5) * MS,
        semconv.GEN_AI_USAGE_INPUT_TOKENS: 100,
        semconv.GEN_AI_USAGE_OUTPUT_TOKENS: out,
        semconv.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: 40,
    }


def seed_rows() -> list[SpanRow]:
    """Three requests in two minutes: retrieval, a tool call and a streamed model call each."""
    rows = []
    for trace, (offset_ms, model, provider) in enumerate(
        [(0, "llama-3.3-70b", "groq"), (30_000, "llama-3.3-70b", "groq"), (90_000, "gpt-4o-mini", "openai")],
        start=1,
    ):
        rows += [
            _span(trace, 1, 0, "POST /chat", "request", offset_ms, 300),
            _span(trace, 2, 1, "retrieve", "retrieval", offset_ms + 5, 40),
            _span(trace, 3, 1, "order_status", "tool", offset_ms + 50, 20),
            _span(
                trace,
                4,
                1,
                "chat " + model,
                "model",
                offset_ms + 80,
                210,
                **_model_attrs(model, provider, 30, 10, 150, 300),
            ),
        ]
    return rows


def tgi_rows() -> list[SpanRow]:
    """A fourth request, at 12:01:00, to TGI, which reports prefill + decode as one number.

    The SDK's TGI adapter wrote these from the reconstructed headers x-queue-time 15, x-inference-time
    1217, x-total-time 1234 ms. Root 0–1400 ms, model call 50–1350 ms (1300 ms): app 100, network
    1300 − 1234 = 66, queue 15, inference 1217, server other 1234 − 15 − 1217 = 2.
    """
    attrs = {
        semconv.GEN_AI_REQUEST_MODEL: "llama-3.1-8b",
        semconv.GEN_AI_PROVIDER_NAME: "tgi",
        semconv.PROVIDER_QUEUE_NS: 15 * MS,
        semconv.PROVIDER_INFERENCE_NS: 1217 * MS,
        semconv.PROVIDER_SERVER_TOTAL_NS: 1234 * MS,
        semconv.GEN_AI_USAGE_INPUT_TOKENS: 28,
        semconv.GEN_AI_USAGE_OUTPUT_TOKENS: 100,
    }
    return [
        _span(4, 1, 0, "POST /ask", "request", 60_000, 1400),
        _span(4, 2, 1, "chat llama-3.1-8b", "model", 60_050, 1300, **attrs),
    ]


@pytest.fixture
def seeded(store: Store) -> Store:
    assert Ingestor(store).ingest(seed_rows()) == 3
    return store


# --- the plugin's macro expansion ----------------------------------------------------------------------


def _macro_args(sql: str, open_paren: int) -> tuple[list[str], int]:
    """Top-level arguments of the call whose '(' is at ``open_paren``, and the index after its ')'."""
    depth, args, start = 0, [], open_paren + 1
    for i in range(open_paren, len(sql)):
        char = sql[i]
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                args.append(sql[start:i])
                return args, i + 1
        elif char == "," and depth == 1:
            args.append(sql[start:i])
            start = i + 1
    raise AssertionError(f"unbalanced macro call in {sql!r}")


def _replace_calls(sql: str, name: str, render: Any) -> str:
    marker = f"$__{name}("
    while (at := sql.find(marker)) != -1:
        args, end = _macro_args(sql, at + len(marker) - 1)
        sql = sql[:at] + render([a.strip() for a in args]) + sql[end:]
    return sql


def expand(sql: str, variables: dict[str, list[str]], database: str) -> str:
    """Grafana + plugin expansion. A variable with an empty list is "All"."""

    def conditional_all(args: list[str]) -> str:
        var = re.sub(r"[${}]", "", args[1]).split(":")[0]
        return "1=1" if not variables[var] else args[0]

    sql = _replace_calls(sql, "conditionalAll", conditional_all)

    def variable(match: re.Match[str]) -> str:
        name, fmt = match.group("name") or match.group("bare"), match.group("fmt")
        values = variables[name]
        if fmt == "singlequote" or len(values) > 1:
            return ",".join("'" + v.replace("'", "\\'") + "'" for v in values)
        return values[0]

    sql = re.sub(r"\$\{(?P<name>[a-z_]+)(?::(?P<fmt>[a-z]+))?\}|\$(?P<bare>(?!__)[a-z_]+)", variable, sql)
    sql = _replace_calls(
        sql, "timeFilter", lambda a: f"{a[0]} >= toDateTime({FROM_S}) AND {a[0]} <= toDateTime({TO_S})"
    )
    sql = _replace_calls(
        sql, "timeInterval", lambda a: f"toStartOfInterval(toDateTime({a[0]}), INTERVAL {INTERVAL_S} second)"
    )
    assert "$" not in sql, f"unexpanded macro or variable left in: {sql}"
    # The datasource's defaultDatabase resolves unqualified table names; here the test's database does.
    return re.sub(r"\b(FROM|JOIN)\s+(requests|spans)\b", rf"\1 {database}.\2", sql)


SELECTIONS = {
    "all services and models": {
        "project": ["default"],
        "service": [],
        "model": [],
        "route": [],
        "provider": [],
    },
    "one service, one model": {
        "project": ["default"],
        "service": ["chat-api"],
        "model": ["llama-3.3-70b"],
        "route": [],
        "provider": [],
    },
}


# --- tests ---------------------------------------------------------------------------------------------


def test_dashboards_exist_and_use_the_clickhouse_plugin_sql_editor() -> None:
    assert [p.name for p in DASHBOARDS] == ["latencylens-breakdown.json", "latencylens-overview.json"]
    uids = set()
    for name, panel in panels():
        assert panel["datasource"]["type"] == PLUGIN, name
        (target,) = panel["targets"]
        assert target["editorType"] == "sql" and target["rawSql"].strip(), name
        assert target["queryType"] in {"timeseries", "table"}, name
        assert "$__timeFilter(start_time)" in target["rawSql"], name
    for path in DASHBOARDS:
        dashboard = json.loads(path.read_text())
        uids.add(dashboard["uid"])
        ids = [p["id"] for p in dashboard["panels"]]
        assert len(ids) == len(set(ids)), path
    assert uids == {"latencylens-overview", "latencylens-breakdown"}


@pytest.mark.parametrize("selection", SELECTIONS)
def test_dashboards_every_panel_query_returns_rows_on_seeded_data(seeded: Store, selection: str) -> None:
    variables = SELECTIONS[selection]
    for name, panel in panels():
        sql = expand(panel["targets"][0]["rawSql"], variables, seeded.database)
        rows = seeded.query(sql)
        assert rows, f"{name}: no rows for {selection}\n{sql}"
        assert all(v is not None for v in rows[0].values()), (name, rows[0])


def test_dashboards_numbers_match_the_seeded_requests(seeded: Store) -> None:
    results = {
        name: seeded.query(
            expand(panel["targets"][0]["rawSql"], SELECTIONS["all services and models"], seeded.database)
        )
        for name, panel in panels()
    }
    assert results["latencylens-overview:Requests"] == [{"requests": 3}]
    # Every request lasts 300 ms, so every percentile is 300 ms.
    assert results["latencylens-overview:End-to-end p95"][0]["e2e_p95"] == pytest.approx(300 * MS)
    # TTFT = first content at queue 30 + prefill 10 + 5 ms = 45 ms in all three.
    assert results["latencylens-overview:TTFT p95"][0]["ttft_p95"] == pytest.approx(45 * MS)
    # Decode rate = 300 tokens / 0.150 s reported decode = 2000 tokens/s.
    decode_rate = results["latencylens-overview:Decode rate (median, tok/s)"][0]["tokens_per_second"]
    assert decode_rate == pytest.approx(2000)
    # Two requests at 12:00:00 and 12:00:30 share the 12:00 interval, the third is at 12:01:30.
    assert len(results["latencylens-overview:End-to-end latency percentiles"]) == 2
    shares = {
        r["model_provider"]: r
        for r in results["latencylens-breakdown:Share of end-to-end time by model and provider"]
    }
    assert set(shares) == {"llama-3.3-70b · groq", "gpt-4o-mini · openai"}
    for row in shares.values():
        # Critical path of 300 ms: retrieval 40, tool 20, model call 210 = queue 30 + prefill 10 +
        # decode 150 + network 20 (210 − 190 server), and the rest (30 ms) is the app's own time.
        assert sum(row[c] for c in COMPONENTS) == pytest.approx(1.0)
        assert row["decode"] == pytest.approx(150 / 300)
        assert row["network"] == pytest.approx(20 / 300)
        assert row["app_other"] == pytest.approx(30 / 300)
    by_model = {r["model"]: r for r in results["latencylens-breakdown:By model and provider"]}
    assert by_model["llama-3.3-70b"]["requests"] == 2
    assert by_model["llama-3.3-70b"]["cached_token_ratio"] == pytest.approx(40 / 100)
    slowest = results["latencylens-breakdown:Slowest requests"]
    assert {r["dominant"] for r in slowest} == {"decode"}
    assert {r["trace_id"] for r in slowest} == {f"{n:032x}" for n in (1, 2, 3)}
    span_names = {r["name"]: r for r in results["latencylens-breakdown:Span names by p95 duration"]}
    assert span_names["retrieve"]["p95"] == pytest.approx(40 * MS)


@pytest.mark.parametrize("selection", SELECTIONS)
def test_dashboards_show_unsplit_inference_and_the_servers_other_time(store: Store, selection: str) -> None:
    assert Ingestor(store).ingest(seed_rows() + tgi_rows()) == 4
    results = {}
    for name, panel in panels():  # every panel still runs, with the fourth request in
        rows = store.query(expand(panel["targets"][0]["rawSql"], SELECTIONS[selection], store.database))
        assert rows, f"{name}: no rows for {selection}"
        results[name] = rows
    if selection != "all services and models":
        return  # one model selected: the TGI request is filtered out; the queries still ran
    shares = {
        r["model_provider"]: r
        for r in results["latencylens-breakdown:Share of end-to-end time by model and provider"]
    }
    tgi = shares["llama-3.1-8b · tgi"]
    # Shares of its 1400 ms: inference 1217, network 66, queue 15, server other 2, app 100.
    assert tgi["inference"] == pytest.approx(1217 / 1400)
    assert tgi["server_other"] == pytest.approx(2 / 1400)
    assert tgi["network"] == pytest.approx(66 / 1400)
    assert tgi["prefill"] == tgi["decode"] == tgi["model_unattributed"] == 0
    assert sum(tgi[c] for c in COMPONENTS) == pytest.approx(1.0)
    assert shares["llama-3.3-70b · groq"]["inference"] == 0
    slowest = {r["trace_id"]: r["dominant"] for r in results["latencylens-breakdown:Slowest requests"]}
    assert slowest[f"{4:032x}"] == "inference"
    routes = {r["route"]: r for r in results["latencylens-breakdown:By route"]}
    assert routes["POST /ask"]["inference"] == pytest.approx(1217 / 1400)
    # The 12:01 interval holds the TGI request and the third seeded one (12:01:30, no inference):
    # the means are half the TGI call's parts.
    series = results["latencylens-overview:Where the time goes (mean per request)"]
    assert [(r["inference"], r["server_other"]) for r in series if r["inference"]] == [(1217 * MS / 2, MS)]


def test_dashboards_filters_narrow_the_results(seeded: Store) -> None:
    (panel,) = [p for name, p in panels() if name == "latencylens-overview:Requests"]
    only_gpt = {"project": ["default"], "service": [], "model": ["gpt-4o-mini"], "route": [], "provider": []}
    assert seeded.query(expand(panel["targets"][0]["rawSql"], only_gpt, seeded.database)) == [{"requests": 1}]
    other_project = {"project": ["elsewhere"], "service": [], "model": [], "route": [], "provider": []}
    assert seeded.query(expand(panel["targets"][0]["rawSql"], other_project, seeded.database)) == [
        {"requests": 0}
    ]


def test_dashboards_variable_queries_run(seeded: Store) -> None:
    for path in DASHBOARDS:
        for var in json.loads(path.read_text())["templating"]["list"]:
            if var["type"] != "query":
                continue
            sql = expand(var["query"]["rawSql"], {"project": ["default"]}, seeded.database)
            assert seeded.query(sql), (path.name, var["name"])


def test_dashboards_component_colours_match_the_web_ui() -> None:
    palette = dict(re.findall(r"--c-([a-z_]+):\s*(#[0-9a-fA-F]{6})", UI_CSS.read_text()))
    assert set(palette) >= set(COMPONENTS)
    seen = 0
    for name, panel in panels():
        for override in panel["fieldConfig"]["overrides"]:
            field = override["matcher"]["options"]
            for prop in override["properties"]:
                if prop["id"] == "color" and field in COMPONENTS:
                    assert prop["value"]["fixedColor"].lower() == palette[field].lower(), (name, field)
                    seen += 1
    # the time series (mean per request, share of end-to-end, p95 per part) and the share-by-model bars
    assert seen == 4 * len(COMPONENTS)


def test_dashboards_provisioning_points_at_the_dashboards() -> None:
    datasources = yaml.safe_load((PROVISIONING / "datasources" / "latencylens-clickhouse.yaml").read_text())
    (source,) = datasources["datasources"]
    assert source["type"] == PLUGIN and source["uid"] == "latencylens-clickhouse"
    assert source["jsonData"]["protocol"] == "native" and source["jsonData"]["port"] == 9000
    providers = yaml.safe_load((PROVISIONING / "dashboards" / "latencylens.yaml").read_text())
    (provider,) = providers["providers"]
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    mounts = compose["services"]["grafana"]["volumes"]
    assert f"./dashboards/json:{provider['options']['path']}:ro" in mounts
    assert "./dashboards/provisioning:/etc/grafana/provisioning:ro" in mounts
    grafana_env = compose["services"]["grafana"]["environment"]
    for placeholder in re.findall(
        r"\$\{(\w+)\}", (PROVISIONING / "datasources" / "latencylens-clickhouse.yaml").read_text()
    ):
        assert placeholder in grafana_env, placeholder
    for path in DASHBOARDS:
        for var in json.loads(path.read_text())["templating"]["list"]:
            if var["type"] == "datasource":
                assert var["current"]["value"] == source["uid"]
