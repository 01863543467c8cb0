"""``latencylens``: the command line's entry point, its argument parser and how it ends.

Each command lives in its own module with ``register(subparsers)``, which adds its parser and sets
``handler`` (a function of the parsed arguments returning an exit code). Failures are raised as
:class:`~latencylens_collector.cli.errors.CliError` and printed here, as one ``error: ...`` line
with the exit code of :mod:`latencylens_collector.cli.errors`; usage errors look the same.

:func:`main` is the ``latencylens`` console script. This package ships in every install of
``latencylens``, its dependencies only with the ``server`` extra: this module (and the two it
imports) needs only the standard library until :func:`main` loads the commands, so an install
without the extra gets one line naming it.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import Any, Final, NoReturn

from latencylens_collector.cli.errors import EXIT_CODES_HELP, OK, USAGE, CliError
from latencylens_collector.cli.output import error_line

COMMAND_MODULES: tuple[str, ...] = (
    "latencylens_collector.cli.serve",
    "latencylens_collector.cli.queries",
    "latencylens_collector.cli.advise",
    "latencylens_collector.cli.slo",
    "latencylens_collector.cli.keys",
    "latencylens_collector.cli.spool",
    "latencylens_collector.cli.replay",
    "latencylens_collector.cli.demo",
)
"""Modules that add commands, in the order ``--help`` lists them."""
INTERRUPTED = 130
"""Exit code after Ctrl-C (128 + SIGINT), as shells report it."""
MISSING_SERVER_MESSAGE: Final = "The latencylens command needs the service: pip install 'latencylens[server]'"
"""Printed (exit code 2) when a dependency of the service is not installed."""
OWN_PACKAGES: Final = frozenset({"latencylens", "latencylens_collector"})
"""A missing module of these is a broken install or a bug, never a missing extra: it is raised."""


class Parser(argparse.ArgumentParser):
    """argparse with the command line's error spelling and the exit codes under every ``--help``."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("epilog", EXIT_CODES_HELP)
        super().__init__(**kwargs)

    def error(self, message: str) -> NoReturn:
        print(error_line(f"{message} (see '{self.prog} --help')"), file=sys.stderr)
        raise SystemExit(USAGE)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="latencylens",
        description="Where did the time go in this LLM request? Collector, storage and queries.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True, parser_class=Parser)
    for module_name in COMMAND_MODULES:
        importlib.import_module(module_name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns its exit code (see :mod:`latencylens_collector.cli.errors`)."""
    try:
        parser = build_parser()
    except ModuleNotFoundError as exc:
        if exc.name is None or exc.name.partition(".")[0] in OWN_PACKAGES:
            raise
        print(MISSING_SERVER_MESSAGE, file=sys.stderr)
        return USAGE
    args = parser.parse_args(argv)
    try:
        code = int(args.handler(args) or OK)
        sys.stdout.flush()
    except CliError as exc:
        print(error_line(exc.message), file=sys.stderr)
        return exc.code
    except BrokenPipeError:
        # The reader stopped early (``latencylens slow --json | head``): that is its choice, not an
        # error; standard output goes to devnull so the interpreter's last flush is quiet too.
        _silence_stdout()
        return OK
    except KeyboardInterrupt:
        return INTERRUPTED
    return code


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass  # not a real file (captured output): nothing will flush to a closed pipe


if __name__ == "__main__":
    raise SystemExit(main())
