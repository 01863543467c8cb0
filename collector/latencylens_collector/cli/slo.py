"""``latencylens slo ...``: SLOs, their budget and alerts, through a running collector's API.

``slo migrate`` is the exception: it upgrades the metadata database directly (for a PostgreSQL
database prepared before the service starts).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import datetime, timedelta, timezone
from typing import Any

from latencylens import API_KEY_ENV
from latencylens_collector.cli.main import DEFAULT_URL
from latencylens_collector.settings import env_var

_MS = 1_000_000


def register(subparsers: Any) -> None:
    slo = subparsers.add_parser(
        "slo",
        help="manage latency SLOs, their error budget and alerts",
        description="List, create and delete SLOs, see their status, budget and alert history, "
        "and silence their notifications, through a running collector.",
    )
    slo.set_defaults(handler=lambda args: _usage(slo))
    sub = slo.add_subparsers(dest="slo_command", metavar="ACTION")

    def action(name: str, help_text: str, handler: Any) -> argparse.ArgumentParser:
        parser = sub.add_parser(name, help=help_text, description=help_text)
        parser.set_defaults(handler=handler)
        if name != "migrate":
            parser.add_argument(
                "--url", default=DEFAULT_URL, help=f"collector base URL (default {DEFAULT_URL})"
            )
            parser.add_argument("--json", action="store_true", help="print the raw JSON response")
            parser.add_argument("--api-key", help=f"sent as 'Authorization: Bearer' (env {API_KEY_ENV})")
        return parser

    action("list", "list SLOs with status, value, budget and burn rates", _list)
    action("show", "one SLO", _show).add_argument("slo_id", type=int)
    create = action("create", "create SLOs from a YAML file or from options", _create)
    create.add_argument("--file", help="YAML file with `slos: [...]` (same format as LATENCYLENS_SLO_FILE)")
    create.add_argument("--name")
    create.add_argument("--metric", choices=("ttft", "e2e", "itl"), default="ttft")
    for field in ("service", "route", "model", "provider"):
        create.add_argument(f"--{field}", help=f"only requests with this {field}")
    create.add_argument("--threshold-ms", type=float, help="latency threshold in ms")
    create.add_argument("--quantile", type=float, help="percentile objective, e.g. 0.95")
    create.add_argument("--window", default="5m", help="percentile window (default 5m)")
    create.add_argument("--for", dest="for_", default="10m", help="percentile hold duration (default 10m)")
    create.add_argument("--target", type=float, help="ratio objective, e.g. 0.99")
    create.add_argument("--period", default="30d", help="ratio period (default 30d)")
    create.add_argument("--min-requests", type=int, default=20)
    action("delete", "delete an SLO", _delete).add_argument("slo_id", type=int)
    alerts = action("alerts", "alert history, newest first", _alerts)
    alerts.add_argument("--slo-id", type=int)
    alerts.add_argument("--limit", type=int, default=20)
    action("history", "transitions of one alert", _history).add_argument("alert_id", type=int)
    silence = action("silence", "silence an SLO's notifications", _silence)
    silence.add_argument("slo_id", type=int)
    silence.add_argument("--hours", type=float, default=1.0, help="for how long (default 1 h)")
    silence.add_argument("--reason", default="")
    action("silences", "list silences", _silences)
    migrate = action("migrate", "apply the migrations of the metadata database (SLOs, API keys)", _migrate)
    migrate.add_argument("--metadata-url", help=f"SQLAlchemy URL (env {env_var('metadata_url')})")


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2


def _call(args: argparse.Namespace, method: str, path: str, **kwargs: Any) -> Any:
    """The JSON answer, or None after printing the error."""
    import httpx

    url = args.url.rstrip("/") + path
    try:
        key = args.api_key or os.environ.get(API_KEY_ENV)
        auth = {"Authorization": f"Bearer {key}"} if key else {}
        response = httpx.request(method, url, headers=auth, timeout=30, **kwargs)
    except httpx.HTTPError as exc:
        print(f"error: cannot reach the collector at {args.url}: {exc}", file=sys.stderr)
        return None
    if response.status_code >= 400:
        print(f"error: {method} {path} answered {response.status_code}: {response.text}", file=sys.stderr)
        return None
    return response.json() if response.content else {}


def _emit(args: argparse.Namespace, body: Any, render: Any) -> int:
    if body is None:
        return 1
    if args.json:
        print(json.dumps(body, indent=2))
    else:
        render(body)
    return 0


def _ms(ns: int | None) -> str:
    return "-" if ns is None else f"{ns / _MS:.0f} ms"


def objective_text(objective: dict[str, Any]) -> str:
    if objective.get("type") == "percentile":
        return (
            f"p{objective['quantile'] * 100:g} ≤ {_ms(objective['threshold_ns'])} "
            f"over {objective['window']} for {objective['for']}"
        )
    return f"{objective['target'] * 100:g}% ≤ {_ms(objective['threshold_ns'])} over {objective['period']}"


def _print_slos(body: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="SLOs")
    for column in (
        "id",
        "name",
        "metric",
        "objective",
        "status",
        "value",
        "budget left",
        "burn 1h/5m/6h/30m",
    ):
        table.add_column(column)
    for slo in body["slos"]:
        budget = slo["budget_remaining"]
        burns = slo["burn_rates"]
        table.add_row(
            str(slo["id"]),
            slo["name"],
            slo["metric"],
            objective_text(slo["objective"]),
            slo["status"],
            _ms(slo["value_ns"]),
            "-" if budget is None else f"{budget:.1%}",
            "/".join(f"{burns[w]:.1f}" if w in burns else "-" for w in ("1h", "5m", "6h", "30m")),
        )
    Console().print(table)


def _list(args: argparse.Namespace) -> int:
    return _emit(args, _call(args, "GET", "/api/slos"), _print_slos)


def _show(args: argparse.Namespace) -> int:
    return _emit(
        args, _call(args, "GET", f"/api/slos/{args.slo_id}"), lambda slo: _print_slos({"slos": [slo]})
    )


def definitions_from_args(args: argparse.Namespace) -> list[dict[str, Any]]:
    """SLO bodies from ``--file`` or from the options. Raises ValueError when incomplete."""
    if args.file:
        from latencylens_collector.slo.definitions import load_file

        return [
            entry.model_dump(mode="json", by_alias=True, exclude={"project"})
            for entry in load_file(args.file)
        ]
    if not args.name or args.threshold_ms is None or (args.quantile is None) == (args.target is None):
        raise ValueError("give --file, or --name, --threshold-ms and one of --quantile / --target")
    threshold_ns = round(args.threshold_ms * _MS)
    objective: dict[str, Any] = (
        {
            "type": "percentile",
            "quantile": args.quantile,
            "threshold_ns": threshold_ns,
            "window": args.window,
            "for": args.for_,
        }
        if args.quantile is not None
        else {"type": "ratio", "target": args.target, "threshold_ns": threshold_ns, "period": args.period}
    )
    filters = {f: getattr(args, f) for f in ("service", "route", "model", "provider") if getattr(args, f)}
    return [
        {
            "name": args.name,
            "metric": args.metric,
            "filter": filters,
            "objective": objective,
            "min_requests": args.min_requests,
        }
    ]


def _create(args: argparse.Namespace) -> int:
    try:
        bodies = definitions_from_args(args)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    created = []
    for body in bodies:
        answer = _call(args, "POST", "/api/slos", json=body)
        if answer is None:
            return 1
        created.append(answer)
    return _emit(args, {"slos": created}, _print_slos)


def _delete(args: argparse.Namespace) -> int:
    return _emit(args, _call(args, "DELETE", f"/api/slos/{args.slo_id}"), lambda _: print("deleted"))


def _print_alerts(body: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="Alerts")
    for column in ("id", "slo", "state", "started", "fired", "resolved", "value", "burn", "cause"):
        table.add_column(column)
    for alert in body["alerts"]:
        delta = alert["dominant_delta_ns"]
        cause = alert["dominant_component"] or "-"
        if delta is not None:
            cause += f" {'+' if delta >= 0 else '-'}{abs(delta) / _MS:.0f} ms"
        table.add_row(
            str(alert["id"]),
            alert["slo_name"],
            alert["state"],
            alert["started_at"] or "-",
            alert["fired_at"] or "-",
            alert["resolved_at"] or "-",
            _ms(alert["value_ns"]),
            "-" if alert["burn_rate"] is None else f"{alert['burn_rate']:.1f}×",
            cause,
        )
    Console().print(table)


def _alerts(args: argparse.Namespace) -> int:
    params: dict[str, Any] = {"limit": args.limit}
    if args.slo_id is not None:
        params["slo_id"] = args.slo_id
    return _emit(args, _call(args, "GET", "/api/alerts", params=params), _print_alerts)


def _history(args: argparse.Namespace) -> int:
    def render(body: dict[str, Any]) -> None:
        for t in body["transitions"]:
            print(f"{t['at']}  {t['state']:<9} {t['note']}")

    return _emit(args, _call(args, "GET", f"/api/alerts/{args.alert_id}/history"), render)


def _silence(args: argparse.Namespace) -> int:
    until = datetime.now(timezone.utc) + timedelta(hours=args.hours)
    body = {"slo_id": args.slo_id, "until": until.isoformat(), "reason": args.reason}
    answer = _call(args, "POST", "/api/silences", json=body)
    return _emit(args, answer, lambda s: print(f"silence {s['id']} on SLO {s['slo_id']} until {s['until']}"))


def _silences(args: argparse.Namespace) -> int:
    def render(body: dict[str, Any]) -> None:
        for s in body["silences"]:
            state = "active" if s["active"] else "expired"
            print(f"{s['id']:>4}  SLO {s['slo_id']:<5} until {s['until']}  {state:<8} {s['reason']}")

    return _emit(args, _call(args, "GET", "/api/silences"), render)


def _migrate(args: argparse.Namespace) -> int:
    from sqlalchemy.exc import SQLAlchemyError

    from latencylens_collector.metadata import db
    from latencylens_collector.settings import Settings, redact_dsn

    settings = Settings(metadata_url=args.metadata_url)
    engine = db.make_engine(settings.metadata_url)
    try:
        db.upgrade(engine)
        revision = db.current_revision(engine)
    except SQLAlchemyError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        engine.dispose()
    print(f"metadata database {redact_dsn(settings.metadata_url)} at revision {revision}")
    return 0
