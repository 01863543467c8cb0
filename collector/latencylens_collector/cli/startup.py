"""What ``latencylens serve`` checks before it serves, and the banner it prints once it does.

Every misconfiguration that would leave a service unable to store a span ends the command at once
with one ``error:`` line saying what to do (:class:`~latencylens_collector.cli.errors.CliError`):
settings that do not parse (a DSN that is not ClickHouse's), a directory it cannot write, a chdb
directory another process runs, a port already taken (the HTTP port or the gRPC one).
"""

from __future__ import annotations

import argparse
import errno
import re
import socket
import tempfile
from pathlib import Path

from latencylens_collector import __version__
from latencylens_collector.cli.errors import FAILED, USAGE, CliError
from latencylens_collector.settings import Settings, chdb_path, env_var, is_chdb, legacy_locations

LISTENING = "listening on "
"""How the gRPC receiver's status starts when it listens (``api.lifespan``)."""


def settings_or_exit(**arguments: object) -> Settings:
    """``Settings(**arguments)``, a setting that does not parse being a usage error."""
    from pydantic_settings import SettingsError

    try:
        return Settings(**arguments)  # type: ignore[arg-type]
    except SettingsError as exc:
        raise CliError(str(exc), USAGE) from None


def metadata_options(parser: argparse.ArgumentParser) -> None:
    """``--metadata-url`` and ``--data-dir`` of the commands that open the metadata database
    themselves (keys, slo migrate): by default the same database ``serve`` uses."""
    parser.add_argument(
        "--metadata-url",
        help=f"SQLAlchemy URL of the metadata database (env {env_var('metadata_url')}; default "
        "metadata.db in the data directory)",
    )
    parser.add_argument(
        "--data-dir",
        help=f"the service's data directory (env {env_var('data_dir')}; default ./.latencylens/data)",
    )


def writable_directories(settings: Settings) -> list[Path]:
    """Directories the service writes: the chdb directory, the SQLite metadata database's, the spool."""
    directories = [chdb_path(settings.clickhouse_dsn)] if is_chdb(settings.clickhouse_dsn) else []
    sqlite = sqlite_file(settings.metadata_url)
    if sqlite is not None:
        directories.append(sqlite.parent)
    if settings.spool_dir is not None:
        directories.append(settings.spool_dir)
    return directories


def sqlite_file(url: str) -> Path | None:
    """The file of a SQLite URL (None for another database or an in-memory one)."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or not parsed.database or parsed.database == ":memory:":
        return None
    return Path(parsed.database).expanduser().resolve()


def check_writable(directories: list[Path]) -> None:
    """Create each directory and a file in it, or end with what to do."""
    for directory in directories:
        try:
            directory.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryFile(dir=directory):
                pass
        except OSError as exc:
            reason = exc.strerror or str(exc)
            raise CliError(
                f"cannot write to {directory} ({reason}): choose a directory you can write to with "
                f"--data-dir (or {env_var('data_dir')})",
                FAILED,
            ) from None


def claim_storage(settings: Settings) -> None:
    """Take the chdb directory (a second ``serve`` on it ends here, not in a loop of lock errors)."""
    from latencylens_collector.storage.store import DirectoryInUse, Store

    try:
        Store(settings).claim()
    except DirectoryInUse as exc:
        raise CliError(str(exc), FAILED) from None


def listen(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` for uvicorn to serve on, or end with what to do."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise CliError(_bind_problem(exc, f"port {port} on {host}", "--port"), FAILED) from None
    sock.set_inheritable(True)
    return sock


def check_grpc_port(settings: Settings) -> None:
    """End at once when the OTLP/gRPC port is taken (the receiver would otherwise start without it)."""
    if not settings.grpc_enabled or settings.grpc_port == 0:
        return
    family = socket.AF_INET6 if ":" in settings.host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        # SO_REUSEADDR as gRPC sets it: connections of a stopped server (TIME_WAIT) do not count,
        # a listening socket does (gRPC's SO_REUSEPORT needs it on both sockets).
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((settings.host, settings.grpc_port))
        except OSError as exc:
            where = f"OTLP/gRPC port {settings.grpc_port} on {settings.host}"
            raise CliError(
                _bind_problem(exc, where, "--grpc-port") + ", or turn gRPC off with --no-grpc"
            ) from None


def _bind_problem(exc: OSError, where: str, option: str) -> str:
    if exc.errno == errno.EADDRINUSE:
        return (
            f"{where} is in use (another latencylens serve?): stop that process or choose another port "
            f"with {option}"
        )
    if exc.errno == errno.EACCES:
        return f"{where} needs privileges this user lacks: choose a port above 1023 with {option}"
    if exc.errno in (errno.EADDRNOTAVAIL, socket.EAI_NONAME) or isinstance(exc, socket.gaierror):
        return f"cannot listen on {where}: no such interface here; check --host"
    return f"cannot listen on {where}: {exc.strerror or exc}"


def without_password(url: str) -> str:
    """A URL or DSN with its password left out (the user name stays)."""
    return re.sub(r"(://[^:/@]+):[^@]*@", r"\1@", url)


def banner(settings: Settings, port: int, grpc: str) -> list[str]:
    """Where everything is, as printed once the service listens. ``grpc``: the receiver's status."""
    base = f"http://{_url_host(settings.host)}:{port}"
    if is_chdb(settings.clickhouse_dsn):
        storage = f"{chdb_path(settings.clickhouse_dsn)} (embedded ClickHouse), database {settings.database}"
    else:
        storage = (
            f"{without_password(settings.clickhouse_dsn)} (ClickHouse server), database {settings.database}"
        )
    sqlite = sqlite_file(settings.metadata_url)
    metadata = str(sqlite) if sqlite is not None else without_password(settings.metadata_url)
    spool = str(settings.spool_dir) if settings.spool_dir is not None else f"off ({env_var('spool_dir')}=off)"
    access = (
        "on"
        if settings.access_log
        else "off (--access-log or LATENCYLENS_ACCESS_LOG=true to log each request)"
    )
    ingest = {
        "engine": "engine (ClickHouse decodes OTLP/protobuf; OTLP/JSON in Python)",
        "python": "python (--ingest-path auto: ClickHouse decodes under load)",
    }.get(settings.ingest_path, "auto (ClickHouse decodes OTLP/protobuf under load, else Python)")
    lines = [
        f"LatencyLens collector {__version__}",
        f"  web UI      {base}/",
        f"  API docs    {base}/docs",
        f"  OTLP/HTTP   {base}/v1/traces",
        f"  OTLP/gRPC   {_grpc_line(grpc)}",
        f"  storage     {storage}",
        f"  ingest      {ingest}",
        f"  metadata    {metadata}",
        f"  spool       {spool}",
        f"  access log  {access}",
    ]
    lines += [f"  note: {line}" for line in legacy_locations(settings)]
    lines.append("Press Ctrl-C to stop.")
    return lines


def _grpc_line(status: str) -> str:
    if status.startswith(LISTENING):
        return status[len(LISTENING) :]
    return "off (--no-grpc)" if status == "disabled" else status


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host
