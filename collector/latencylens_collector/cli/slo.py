"""``latencylens slo ...``: SLOs, their budget and alerts, through a running service's API.

``slo migrate`` is the exception: it upgrades the metadata database directly (for a PostgreSQL
database prepared before the service starts). SLOs given as options are checked with the same
model the API uses before anything is sent, and a problem is named by its option
(``--quantile``), not by its place in the JSON body.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any, Final

from pydantic import ValidationError

from latencylens_collector.cli import startup
from latencylens_collector.cli.errors import FAILED, USAGE, CliError
from latencylens_collector.cli.http import ServiceClient, add_client_options
from latencylens_collector.cli.output import (
    MISSING,
    NS_PER_MS,
    Column,
    Table,
    ms,
    one_line,
    render,
    show,
    show_json,
    utc,
)

BURN_WINDOWS: Final = ("1h", "5m", "6h", "30m")
OPTION_OF_FIELD: Final = {
    "name": "--name",
    "metric": "--metric",
    "quantile": "--quantile",
    "target": "--target",
    "threshold_ns": "--threshold-ms",
    "window": "--window",
    "for": "--for",
    "period": "--period",
    "min_requests": "--min-requests",
}
"""Field of an SLO definition → the ``slo create`` option that sets it."""
FRACTION_HINT: Final = {"quantile": "0.95 for p95", "target": "0.99 for 99%"}


def register(subparsers: Any) -> None:
    slo = subparsers.add_parser(
        "slo",
        help="manage latency SLOs, their error budget and alerts",
        description="List, create and delete SLOs, see their status, budget and alert history, "
        "and silence their notifications, through a running service.",
    )
    slo.set_defaults(handler=lambda args: _usage(slo))
    sub = slo.add_subparsers(dest="slo_command", metavar="ACTION")

    def action(name: str, help_text: str, handler: Callable[[argparse.Namespace], int]) -> Any:
        parser = sub.add_parser(name, help=help_text, description=help_text)
        parser.set_defaults(handler=handler)
        if name != "migrate":
            add_client_options(parser)
        return parser

    action("list", "list SLOs with status, value, budget and burn rates", _list)
    action("show", "one SLO", _show).add_argument("slo_id", type=int)
    create = action("create", "create SLOs from a YAML file or from options", _create)
    create.add_argument("--file", help="YAML file with `slos: [...]` (same format as LATENCYLENS_SLO_FILE)")
    create.add_argument("--name", help="a name unique in the project")
    create.add_argument("--metric", choices=("ttft", "e2e", "itl"), default="ttft")
    for field in ("service", "route", "model", "provider"):
        create.add_argument(f"--{field}", help=f"only requests with this {field}")
    create.add_argument("--threshold-ms", type=float, help="latency threshold in ms")
    create.add_argument("--quantile", type=float, help="percentile objective as a fraction: 0.95 for p95")
    create.add_argument("--window", default="5m", help="percentile window (default 5m)")
    create.add_argument("--for", dest="for_", default="10m", help="percentile hold duration (default 10m)")
    create.add_argument("--target", type=float, help="ratio objective as a fraction: 0.99 for 99%%")
    create.add_argument("--period", default="30d", help="ratio period (default 30d)")
    create.add_argument("--min-requests", type=int, default=20, help="below this many nothing fires (20)")
    action("delete", "delete an SLO", _delete).add_argument("slo_id", type=int)
    alerts = action("alerts", "alert history, newest first", _alerts)
    alerts.add_argument("--slo-id", type=int, help="only alerts of this SLO")
    alerts.add_argument("--limit", type=int, default=20, help="at most this many (default 20)")
    action("history", "transitions of one alert", _history).add_argument("alert_id", type=int)
    silence = action("silence", "silence an SLO's notifications", _silence)
    silence.add_argument("slo_id", type=int)
    silence.add_argument("--hours", type=float, default=1.0, help="for how long (default 1 h)")
    silence.add_argument("--reason", default="")
    action("silences", "list silences", _silences)
    migrate = action("migrate", "apply the migrations of the metadata database (SLOs, API keys)", _migrate)
    startup.metadata_options(migrate)


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return USAGE


def _emit(args: argparse.Namespace, body: Any, render_text: Callable[[Any], str]) -> int:
    if args.json:
        show_json(body)
    else:
        show(render_text(body))
    return 0


def objective_text(objective: dict[str, Any]) -> str:
    """``p95 ≤ 800.0 ms over 5m for 10m`` or ``99% ≤ 1000.0 ms over 30d``."""
    if objective.get("type") == "percentile":
        return (
            f"p{objective['quantile'] * 100:g} ≤ {ms(objective['threshold_ns'])} ms "
            f"over {objective['window']} for {objective['for']}"
        )
    return f"{objective['target'] * 100:g}% ≤ {ms(objective['threshold_ns'])} ms over {objective['period']}"


def slos_table(body: dict[str, Any]) -> str:
    table = Table(
        "SLOs",
        [
            Column("id", numeric=True),
            Column("name", wraps=True),
            Column("metric"),
            Column("objective", wraps=True),
            Column("status"),
            Column("value ms", numeric=True),
            Column("budget left", numeric=True),
            Column("burn " + "/".join(BURN_WINDOWS), numeric=True),
        ],
    )
    for slo in body["slos"]:
        burns = slo["burn_rates"]
        table.add(
            slo["id"],
            slo["name"],
            slo["metric"],
            objective_text(slo["objective"]),
            slo["status"],
            ms(slo["value_ns"]),
            MISSING if slo["budget_remaining"] is None else f"{slo['budget_remaining']:.1%}",
            "/".join(f"{burns[w]:.1f}" if w in burns else MISSING for w in BURN_WINDOWS),
        )
    return render(table) if table.rows else "no SLOs"


def _list(args: argparse.Namespace) -> int:
    return _emit(args, ServiceClient.from_args(args).get("/api/slos"), slos_table)


def _show(args: argparse.Namespace) -> int:
    body = ServiceClient.from_args(args).get(f"/api/slos/{args.slo_id}")
    return _emit(args, body, lambda slo: slos_table({"slos": [slo]}))


def definitions_from_args(args: argparse.Namespace) -> list[dict[str, Any]]:
    """SLO bodies from ``--file`` or from the options, validated as the API validates them.

    Raises :class:`CliError` (usage) naming the option or file entry that is wrong.
    """
    from latencylens_collector.slo.definitions import SloDefinition

    if args.file:
        return [
            entry.model_dump(mode="json", by_alias=True, exclude={"project"}) for entry in _load(args.file)
        ]
    if not args.name or args.threshold_ms is None or (args.quantile is None) == (args.target is None):
        raise CliError("give --file, or --name, --threshold-ms and one of --quantile / --target", USAGE)
    threshold_ns = round(args.threshold_ms * NS_PER_MS)
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
    body = {
        "name": args.name,
        "metric": args.metric,
        "filter": filters,
        "objective": objective,
        "min_requests": args.min_requests,
    }
    try:
        SloDefinition.model_validate(body)
    except ValidationError as exc:
        raise CliError(_option_problems(exc), USAGE) from None
    return [body]


def _load(path: str) -> list[Any]:
    import yaml

    from latencylens_collector.slo.definitions import load_file

    try:
        return load_file(path)
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror or exc}", USAGE) from None
    except yaml.YAMLError as exc:
        raise CliError(f"{path} is not valid YAML: {one_line(str(exc))}", USAGE) from None
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in error['loc'])}: {error['msg']}" for error in exc.errors()
        )
        raise CliError(f"{path}: {problems}", USAGE) from None


def _option_problems(exc: ValidationError) -> str:
    """Validation errors as ``--quantile: must be less than 1 (got 95; a fraction: 0.95 for p95)``."""
    problems = []
    for error in exc.errors():
        field = next((str(p) for p in reversed(error["loc"]) if str(p) in OPTION_OF_FIELD), None)
        message = str(error["msg"]).replace("Input should be", "must be")
        got = error.get("input")
        if field is None:
            problems.append(message)
            continue
        if field == "threshold_ns" and isinstance(got, int):
            got = got / NS_PER_MS
        detail = f"got {got:g}" if isinstance(got, (int, float)) else f"got {got!r}"
        if field in FRACTION_HINT:
            detail += f"; a fraction: {FRACTION_HINT[field]}"
        problems.append(f"{OPTION_OF_FIELD[field]} {message} ({detail})")
    return "; ".join(problems)


def _create(args: argparse.Namespace) -> int:
    bodies = definitions_from_args(args)
    client = ServiceClient.from_args(args)
    created = [client.post("/api/slos", body) for body in bodies]
    return _emit(args, {"slos": created}, slos_table)


def _delete(args: argparse.Namespace) -> int:
    body = ServiceClient.from_args(args).delete(f"/api/slos/{args.slo_id}")
    return _emit(args, body, lambda _: f"deleted SLO {args.slo_id}")


def _cause(alert: dict[str, Any]) -> str:
    cause = alert["dominant_component"] or MISSING
    if alert["dominant_delta_ns"] is not None:
        cause += f" {ms(alert['dominant_delta_ns'], signed=True)} ms"
    return cause


def alerts_table(body: dict[str, Any]) -> str:
    table = Table(
        "Alerts (newest first)",
        [
            Column("id", numeric=True),
            Column("slo", wraps=True),
            Column("state"),
            Column("started"),
            Column("fired"),
            Column("resolved"),
            Column("value ms", numeric=True),
            Column("burn", numeric=True),
            Column("cause", wraps=True),
        ],
    )
    for alert in body["alerts"]:
        table.add(
            alert["id"],
            alert["slo_name"],
            alert["state"],
            utc(alert["started_at"]),
            utc(alert["fired_at"]),
            utc(alert["resolved_at"]),
            ms(alert["value_ns"]),
            MISSING if alert["burn_rate"] is None else f"{alert['burn_rate']:.1f}×",
            _cause(alert),
        )
    return render(table) if table.rows else "no alerts"


def _alerts(args: argparse.Namespace) -> int:
    params = {"limit": args.limit, "slo_id": args.slo_id}
    return _emit(args, ServiceClient.from_args(args).get("/api/alerts", params), alerts_table)


def history_table(body: dict[str, Any]) -> str:
    table = Table("Alert history (oldest first)", [Column("at"), Column("state"), Column("note", wraps=True)])
    for transition in body["transitions"]:
        table.add(utc(transition["at"]), transition["state"], transition["note"] or MISSING)
    return render(table) if table.rows else "no transitions"


def _history(args: argparse.Namespace) -> int:
    body = ServiceClient.from_args(args).get(f"/api/alerts/{args.alert_id}/history")
    return _emit(args, body, history_table)


def _silence(args: argparse.Namespace) -> int:
    if not args.hours > 0:
        raise CliError(f"--hours must be more than 0 (got {args.hours:g})", USAGE)
    until = datetime.now(timezone.utc) + timedelta(hours=args.hours)
    body = {"slo_id": args.slo_id, "until": until.isoformat(), "reason": args.reason}
    answer = ServiceClient.from_args(args).post("/api/silences", body)
    return _emit(args, answer, lambda s: f"silence {s['id']} on SLO {s['slo_id']} until {utc(s['until'])}")


def silences_table(body: dict[str, Any]) -> str:
    table = Table(
        "Silences",
        [
            Column("id", numeric=True),
            Column("slo", numeric=True),
            Column("until"),
            Column("state"),
            Column("reason", wraps=True),
        ],
    )
    for s in body["silences"]:
        table.add(
            s["id"],
            s["slo_id"],
            utc(s["until"]),
            "active" if s["active"] else "expired",
            s["reason"] or MISSING,
        )
    return render(table) if table.rows else "no silences"


def _silences(args: argparse.Namespace) -> int:
    return _emit(args, ServiceClient.from_args(args).get("/api/silences"), silences_table)


def _migrate(args: argparse.Namespace) -> int:
    from sqlalchemy.exc import SQLAlchemyError

    from latencylens_collector.cli.startup import settings_or_exit
    from latencylens_collector.metadata import db
    from latencylens_collector.settings import redact_dsn

    settings = settings_or_exit(metadata_url=args.metadata_url, data_dir=args.data_dir)
    engine = db.make_engine(settings.metadata_url)
    try:
        db.upgrade(engine)
        revision = db.current_revision(engine)
    except SQLAlchemyError as exc:
        raise CliError(
            f"metadata database {redact_dsn(settings.metadata_url)}: {one_line(str(exc))}", FAILED
        ) from None
    finally:
        engine.dispose()
    show(f"metadata database {redact_dsn(settings.metadata_url)} at revision {revision}")
    return 0
