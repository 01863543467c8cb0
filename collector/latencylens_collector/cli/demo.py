"""``latencylens demo``: the demo workload (``latencylens_collector.demo``), its table printed here."""

from __future__ import annotations

import argparse
import importlib
from typing import Any

from latencylens_collector.cli.errors import USAGE, CliError
from latencylens_collector.cli.serve import DEFAULT_GRPC_PORT, grpc_options
from latencylens_collector.settings import DEFAULT_DATA_DIR, DEFAULT_PORT, env_var


def register(sub: Any) -> None:
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
    grpc_options(demo, default_port=f"{DEFAULT_GRPC_PORT} with the default --port, else a free one")
    demo.add_argument(
        "--data-dir",
        help="data directory: the embedded ClickHouse, the metadata database and the spool "
        f"(env {env_var('data_dir')}; default ./{DEFAULT_DATA_DIR.as_posix()})",
    )
    demo.set_defaults(handler=_demo)


def demo_grpc_port(args: argparse.Namespace) -> int:
    """The gRPC port the demo asks for: as given; else OTLP's 4317 beside the default HTTP port,
    and a free one beside any other, so a second demo on another ``--port`` never collides."""
    if args.grpc_port is not None:
        return int(args.grpc_port)
    return int(DEFAULT_GRPC_PORT) if args.port == DEFAULT_PORT else 0


def _demo(args: argparse.Namespace) -> int:
    try:
        demo = importlib.import_module("latencylens_collector.demo")
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.startswith("latencylens_collector.demo"):
            raise CliError("the demo is not available in this installation", USAGE) from None
        raise CliError(
            f"the demo needs a package that is not installed: {exc.name} (pip install 'latencylens[demo]')",
            USAGE,
        ) from None
    from latencylens_collector.cli import startup
    from latencylens_collector.cli.queries import print_requests

    settings = startup.settings_or_exit(
        data_dir=args.data_dir,
        port=args.port,
        grpc_port=demo_grpc_port(args),
        grpc_enabled=False if args.no_grpc else None,
    )
    startup.check_writable(startup.writable_directories(settings))
    startup.claim_storage(settings)
    if settings.port:
        startup.listen(settings.host, settings.port).close()  # taken: one line, not a traceback
    startup.check_grpc_port(settings)
    return int(demo.main(args, print_requests, settings) or 0)
