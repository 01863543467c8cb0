"""``latencylens demo``: the demo workload (``latencylens_collector.demo``), its table printed here."""

from __future__ import annotations

import argparse
import importlib
from typing import Any

from latencylens_collector.cli.errors import USAGE, CliError
from latencylens_collector.settings import DEFAULT_PORT


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
    demo.add_argument("--data-dir", help="directory for the embedded database (default ./.latencylens/data)")
    demo.set_defaults(handler=_demo)


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
    from latencylens_collector.cli.queries import print_requests

    return int(demo.main(args, print_requests) or 0)
