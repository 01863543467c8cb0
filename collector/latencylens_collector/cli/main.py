"""``latencylens`` command line: run the collector, migrate, list slow requests, run the demo."""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from latencylens_collector.analysis.attribution import (
    APPLICATION_COMPONENTS,
    DECODE,
    INFERENCE,
    MODEL_UNATTRIBUTED,
    NETWORK,
    PREFILL,
    QUEUE,
    SERVER_OTHER,
)
from latencylens_collector.cli.queries import DEFAULT_URL, headers
from latencylens_collector.settings import (
    DEFAULT_DATABASE,
    DEFAULT_HOST,
    DEFAULT_PORT,
    Settings,
    env_var,
)

_MS = 1e6
FULL_ID_WIDTH = 140
MEDIUM_WIDTH = 110
"""Narrower consoles show trace ids shortened (the JSON output always has them in full)."""
# Table columns after e2e: (header, components summed into it).
SLOW_COLUMNS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("app", APPLICATION_COMPONENTS),
    ("network", (NETWORK,)),
    ("queue", (QUEUE,)),
    ("prefill", (PREFILL,)),
    ("decode", (DECODE,)),
    ("inference", (INFERENCE,)),
    ("server other", (SERVER_OTHER,)),
    ("unattributed", (MODEL_UNATTRIBUTED,)),
)
OPTIONAL_SLOW_COLUMNS: frozenset[str] = frozenset({"inference", "server other"})
"""Shown only when a listed request has them: only providers that do not split prefill from
decode report them."""


COMMAND_MODULES: tuple[str, ...] = (
    "latencylens_collector.cli.slo",
    "latencylens_collector.cli.keys",
    "latencylens_collector.cli.queries",
)
"""Modules that add subcommands: each has ``register(subparsers)``, which adds its parsers and sets
``handler`` (a function of the parsed args returning an exit code) with ``set_defaults``."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="latencylens",
        description="Where did the time go in this LLM request? Collector, storage and queries.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    serve = sub.add_parser(
        "serve",
        help="run the collector (OTLP/HTTP on /v1/traces and the query API)",
        description="Run the collector: receives OTLP/HTTP traces, stores them in ClickHouse and "
        "serves the query API. Migrations are applied at start-up.",
    )
    serve.add_argument("--host", help=f"interface to listen on (default {DEFAULT_HOST})")
    serve.add_argument("--port", type=int, help=f"port to listen on (default {DEFAULT_PORT})")
    _storage_options(serve)
    serve.add_argument("--log-level", default="info", help="uvicorn log level (default info)")

    migrate = sub.add_parser(
        "migrate",
        help="apply pending ClickHouse migrations and exit",
        description="Create the database and apply pending migrations; safe to run repeatedly.",
    )
    _storage_options(migrate)

    slow = sub.add_parser(
        "slow",
        help="list the slowest requests with their time breakdown",
        description="Ask a running collector for its slowest requests and print where their time went "
        "(milliseconds per component along the critical path).",
    )
    slow.add_argument("--url", default=DEFAULT_URL, help=f"collector base URL (default {DEFAULT_URL})")
    slow.add_argument("--since", help="window start: ISO-8601 or unix seconds (default 24 h ago)")
    slow.add_argument("--until", help="window end: ISO-8601 or unix seconds (default now)")
    slow.add_argument("--service", help="only requests of this service")
    slow.add_argument("--model", help="only requests whose primary model is this")
    slow.add_argument("--route", help="only requests whose root span has this name")
    slow.add_argument("--provider", help="only requests whose primary provider is this")
    slow.add_argument("--cursor", help="next page: the cursor printed under the previous one")
    slow.add_argument("--api-key", help="API key sent as 'Authorization: Bearer' (env LATENCYLENS_API_KEY)")
    slow.add_argument("--min-duration-ms", type=float, help="only requests at least this long")
    slow.add_argument("--limit", type=int, default=20, help="at most this many requests (default 20)")
    slow.add_argument("--json", action="store_true", help="print the raw JSON response instead of a table")

    demo = sub.add_parser(
        "demo",
        help="send traffic through an instrumented demo app and show the breakdown",
        description="Start a local collector, run an instrumented demo app against a simulated model "
        "provider and print where the time went.",
    )
    demo.add_argument("--requests", type=int, default=20, help="number of demo requests (default 20)")
    demo.add_argument("--no-serve", action="store_true", help="exit after printing instead of serving")
    demo.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"collector port (default {DEFAULT_PORT})"
    )
    demo.add_argument("--data-dir", help="directory for the embedded database (default ./.latencylens/data)")
    for module_name in COMMAND_MODULES:
        importlib.import_module(module_name).register(sub)
    return parser


def _storage_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dsn",
        help="ClickHouse DSN: chdb:///abs/dir or http(s)://user:pass@host:8123 "
        f"(env {env_var('clickhouse_dsn')}; default embedded chdb in ./.latencylens/data)",
    )
    parser.add_argument(
        "--database", help=f"ClickHouse database (env {env_var('database')}; default {DEFAULT_DATABASE})"
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    handlers = {"serve": _serve, "migrate": _migrate, "slow": _slow, "demo": _demo}
    handler = getattr(args, "handler", None) or handlers[args.command]
    return int(handler(args) or 0)


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from latencylens_collector.api.app import create_app
    from latencylens_collector.cli.keys import serve_refusal

    settings = Settings(clickhouse_dsn=args.dsn, database=args.database, host=args.host, port=args.port)
    refusal = serve_refusal(settings)
    if refusal:
        print(f"error: {refusal}", file=sys.stderr)
        return 2
    uvicorn.run(create_app(settings), host=settings.host, port=settings.port, log_level=args.log_level)
    return 0


def _migrate(args: argparse.Namespace) -> int:
    from latencylens_collector.storage.store import StorageError, Store

    settings = Settings(clickhouse_dsn=args.dsn, database=args.database)
    try:
        store = Store.connect(settings)
        applied = store.migrate()
    except StorageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for migration in applied:
        print(f"applied {migration.version:04d}_{migration.name}")
    if not applied:
        print(f"database {settings.database} is up to date")
    store.close()
    return 0


def _slow(args: argparse.Namespace) -> int:
    import httpx

    params = {
        "since": args.since,
        "until": args.until,
        "service": args.service,
        "model": args.model,
        "route": args.route,
        "provider": args.provider,
        "min_duration_ms": args.min_duration_ms,
        "limit": args.limit,
        "cursor": args.cursor,
    }
    url = args.url.rstrip("/") + "/api/requests"
    try:
        query = {k: v for k, v in params.items() if v is not None}
        response = httpx.get(url, params=query, headers=headers(args), timeout=30)
    except httpx.HTTPError as exc:
        print(f"error: cannot reach the collector at {args.url}: {exc}", file=sys.stderr)
        return 1
    if response.status_code != 200:
        print(f"error: {url} answered {response.status_code}: {response.text}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(response.json(), indent=2))
        return 0
    from rich.console import Console

    body = response.json()
    render_slow_table(body["requests"], Console())
    if body.get("next_cursor"):
        print(f"more: --cursor {body['next_cursor']}")
    return 0


def render_slow_table(requests: Sequence[Mapping[str, Any]], console: Any) -> None:
    """Print requests (``RequestSummary`` dicts) as a table of milliseconds per component.

    Narrow consoles get shortened trace ids and lose the start and model columns, so the numbers
    always fit; ``--json`` has everything.
    """
    from rich import box
    from rich.table import Table

    if not requests:
        console.print("no requests in this window")
        return
    width = int(getattr(console, "width", 0) or 0)
    wide, narrow = width >= FULL_ID_WIDTH, width < MEDIUM_WIDTH
    columns = [
        (header, names)
        for header, names in SLOW_COLUMNS
        if header not in OPTIONAL_SLOW_COLUMNS
        or any(request.get("parts", {}).get(name, 0) for request in requests for name in names)
    ]
    caption = "app = retrieval + tool + other application time; unattributed = model time not split"
    if any(header in OPTIONAL_SLOW_COLUMNS for header, _ in columns):
        caption += (
            "; inference = prefill + decode, not split by the provider; server other = its server"
            " time outside queue and inference"
        )
    table = Table(
        title="Slowest requests (ms on the critical path)",
        caption=caption,
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
    table.add_column("trace id", no_wrap=True)
    if not narrow:
        table.add_column("start (UTC)", no_wrap=True)
    table.add_column("service / name", overflow="fold")
    if not narrow:
        table.add_column("model", overflow="fold")
    for header in ("e2e", *(header for header, _ in columns)):
        table.add_column(header, justify="right", no_wrap=True)
    for request in requests:
        parts = request.get("parts", {})
        trace_id = str(request["trace_id"])
        cells = [trace_id if wide else trace_id[: 8 if narrow else 12] + "…"]
        if not narrow:
            cells.append(_short_time(str(request["start_time"])))
        cells.append(f"{request['service']} / {request['name']}")
        if not narrow:
            cells.append(request.get("model") or "-")
        cells.append(_ms(request["e2e_ns"]))
        cells.extend(_ms(sum(parts.get(name, 0) for name in names)) for _, names in columns)
        table.add_row(*cells)
    console.print(table)


def _ms(ns: int) -> str:
    return f"{ns / _MS:.1f}"


def _short_time(iso: str) -> str:
    try:
        return datetime.fromisoformat(iso.replace("Z", "+00:00")).strftime("%m-%d %H:%M:%S")
    except ValueError:
        return iso


def _demo(args: argparse.Namespace) -> int:
    try:
        demo = importlib.import_module("latencylens_collector.demo")
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.startswith("latencylens_collector.demo"):
            print("error: the demo is not available in this installation", file=sys.stderr)
            return 2
        print(
            f"error: the demo needs a package that is not installed: {exc.name} "
            "(pip install 'latencylens[demo]')",
            file=sys.stderr,
        )
        return 2
    result = demo.main(args, render_slow_table)
    return int(result or 0)


if __name__ == "__main__":
    raise SystemExit(main())
