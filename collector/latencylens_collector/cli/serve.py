"""``latencylens serve`` and ``latencylens migrate``: run the service, or only prepare its storage."""

from __future__ import annotations

import argparse
from typing import Any

from latencylens_collector.cli.errors import FAILED, USAGE, CliError
from latencylens_collector.cli.output import show
from latencylens_collector.settings import DEFAULT_DATABASE, DEFAULT_HOST, DEFAULT_PORT, Settings, env_var


def register(sub: Any) -> None:
    serve = sub.add_parser(
        "serve",
        help="run the collector (OTLP/HTTP on /v1/traces and the query API)",
        description="Run the collector: receives OTLP/HTTP traces, stores them in ClickHouse and "
        "serves the query API. Migrations are applied at start-up.",
    )
    serve.add_argument("--host", help=f"interface to listen on (default {DEFAULT_HOST})")
    serve.add_argument("--port", type=int, help=f"port to listen on (default {DEFAULT_PORT})")
    storage_options(serve)
    serve.add_argument("--log-level", default="info", help="uvicorn log level (default info)")
    serve.set_defaults(handler=_serve)

    migrate = sub.add_parser(
        "migrate",
        help="apply pending ClickHouse migrations and exit",
        description="Create the database and apply pending migrations; safe to run repeatedly.",
    )
    storage_options(migrate)
    migrate.set_defaults(handler=_migrate)


def storage_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dsn",
        help="ClickHouse DSN: chdb:///abs/dir or http(s)://user:pass@host:8123 "
        f"(env {env_var('clickhouse_dsn')}; default embedded chdb in ./.latencylens/data)",
    )
    parser.add_argument(
        "--database", help=f"ClickHouse database (env {env_var('database')}; default {DEFAULT_DATABASE})"
    )


def serve_refusal(settings: Settings) -> str | None:
    """Why ``serve`` must not start with these settings (keyless on a public interface), or None."""
    from latencylens_collector.auth import KeyStore, LocalModeError, check_listen_address

    store = KeyStore(settings.metadata_url)
    try:
        check_listen_address(settings.host, store.enabled(), settings.allow_unauthenticated)
    except LocalModeError as exc:
        return str(exc)
    finally:
        store.close()
    return None


def _serve(args: argparse.Namespace) -> int:
    from latencylens_collector.api.server import run_server

    settings = Settings(clickhouse_dsn=args.dsn, database=args.database, host=args.host, port=args.port)
    refusal = serve_refusal(settings)
    if refusal:
        raise CliError(refusal, USAGE)
    from latencylens_collector.storage.store import DirectoryInUse, Store

    try:
        Store(settings).claim()  # a chdb directory another process runs: one line, not a service
    except DirectoryInUse as exc:
        raise CliError(str(exc)) from None
    run_server(settings, args.log_level)  # with the connection limits and deadlines
    return 0


def _migrate(args: argparse.Namespace) -> int:
    from latencylens_collector.storage.store import StorageError, Store

    settings = Settings(clickhouse_dsn=args.dsn, database=args.database)
    try:
        store = Store.connect(settings)
        applied = store.migrate()
    except StorageError as exc:
        raise CliError(str(exc), FAILED) from None
    for migration in applied:
        show(f"applied {migration.version:04d}_{migration.name}")
    if not applied:
        show(f"database {settings.database} is up to date")
    store.close()
    return 0
