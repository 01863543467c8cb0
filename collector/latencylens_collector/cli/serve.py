"""``latencylens serve`` and ``latencylens migrate``: run the service, or only prepare its storage."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from latencylens_collector.cli.errors import FAILED, USAGE, CliError
from latencylens_collector.cli.output import show
from latencylens_collector.settings import (
    DEFAULT_DATA_DIR,
    DEFAULT_DATABASE,
    DEFAULT_HOST,
    DEFAULT_PORT,
    Settings,
    env_var,
)

DEFAULT_GRPC_PORT = Settings.model_fields["grpc_port"].default


def register(sub: Any) -> None:
    serve = sub.add_parser(
        "serve",
        help="run the collector (OTLP/HTTP and gRPC, the query API and the web UI)",
        description="Run the collector: receives OTLP traces over HTTP and gRPC, stores them in "
        "ClickHouse and serves the query API and the web UI. Migrations are applied at start-up. "
        "Prints where everything is once it listens; a misconfiguration ends it at once with one line.",
    )
    serve.add_argument(
        "--host", help=f"interface to listen on (env {env_var('host')}; default {DEFAULT_HOST})"
    )
    serve.add_argument(
        "--port", type=int, help=f"OTLP/HTTP, API and UI port (env {env_var('port')}; default {DEFAULT_PORT})"
    )
    grpc_options(serve)
    storage_options(serve)
    serve.add_argument(
        "--access-log",
        action="store_true",
        default=None,
        help=f"log every HTTP request, each OTLP export too (env {env_var('access_log')}=true; default off)",
    )
    serve.add_argument(
        "--ingest-path",
        choices=("python", "engine", "auto"),
        help="who decodes OTLP/protobuf exports: python (the collector), engine (ClickHouse, many "
        "exports per insert; OTLP/JSON stays with python) or auto (engine while enough exports wait "
        f"to fill an insert and no other project sends) (env {env_var('ingest_path')}; default auto)",
    )
    serve.add_argument("--log-level", default="info", help="uvicorn log level (default info)")
    serve.set_defaults(handler=_serve)

    migrate = sub.add_parser(
        "migrate",
        help="apply pending ClickHouse migrations and exit",
        description="Create the database and apply pending migrations; safe to run repeatedly.",
    )
    storage_options(migrate)
    migrate.set_defaults(handler=_migrate)


def grpc_options(parser: argparse.ArgumentParser, default_port: str | None = None) -> None:
    parser.add_argument(
        "--grpc-port",
        type=int,
        help=f"OTLP/gRPC port, 0 for a free one (env {env_var('grpc_port')}; "
        f"default {default_port or DEFAULT_GRPC_PORT})",
    )
    parser.add_argument(
        "--no-grpc",
        action="store_true",
        help=f"do not receive OTLP/gRPC (env {env_var('grpc_enabled')}=false)",
    )


def storage_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data-dir",
        help="data directory: the embedded ClickHouse, the metadata database and the spool "
        f"(env {env_var('data_dir')}; default ./{DEFAULT_DATA_DIR.as_posix()})",
    )
    parser.add_argument(
        "--dsn",
        help="ClickHouse DSN: chdb:///abs/dir or http(s)://user:pass@host:8123 "
        f"(env {env_var('clickhouse_dsn')}; default embedded chdb in the data directory)",
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
    from latencylens_collector.cli import startup

    settings = startup.settings_or_exit(
        data_dir=args.data_dir,
        clickhouse_dsn=args.dsn,
        database=args.database,
        host=args.host,
        port=args.port,
        grpc_port=args.grpc_port,
        grpc_enabled=False if args.no_grpc else None,
        access_log=args.access_log,
        ingest_path=args.ingest_path,
    )
    startup.check_writable(startup.writable_directories(settings))
    startup.claim_storage(settings)
    refusal = serve_refusal(settings)
    if refusal:
        raise CliError(refusal, USAGE)
    startup.check_grpc_port(settings)
    sock = startup.listen(settings.host, settings.port)
    port = sock.getsockname()[1]

    from latencylens_collector.api.server import run_server

    def started(grpc_status: str) -> None:
        show("\n".join(startup.banner(settings, port, grpc_status)))
        sys.stdout.flush()

    run_server(settings, args.log_level, sock=sock, on_started=started)
    return 0


def _migrate(args: argparse.Namespace) -> int:
    from latencylens_collector.cli.startup import settings_or_exit
    from latencylens_collector.storage.store import StorageError, Store

    settings = settings_or_exit(data_dir=args.data_dir, clickhouse_dsn=args.dsn, database=args.database)
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
