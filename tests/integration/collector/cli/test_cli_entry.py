"""The ``latencylens`` console script is the collector's command line, and says which extra to
install when the service's dependencies are missing (an install of the SDK alone)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from latencylens_collector.cli import main as cli_main

REPO = Path(__file__).resolve().parents[4]
SERVER_ONLY_MODULES = (
    "fastapi",
    "uvicorn",
    "clickhouse_connect",
    "pyarrow",
    "sqlalchemy",
    "alembic",
    "rich",
    "prometheus_client",
    "grpc",
    "yaml",
    "pydantic_settings",
    "httpx",
)
"""Modules of the ``server`` extra that the SDK never needs: blocked, they stand for an SDK-only install."""


def run_blocked(blocked: tuple[str, ...], argv: list[str]) -> subprocess.CompletedProcess[str]:
    """Run the command line in a fresh interpreter in which importing ``blocked`` fails."""
    code = (
        "import sys\n"
        f"for name in {blocked!r}: sys.modules[name] = None\n"
        "from latencylens_collector.cli.main import main\n"
        f"sys.exit(main({argv!r}))\n"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)


def test_the_console_script_is_the_collectors_command_line() -> None:
    import tomllib

    scripts = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
    assert scripts["latencylens"] == "latencylens_collector.cli.main:main"
    result = subprocess.run(
        [sys.executable, "-m", "latencylens_collector", "--help"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: latencylens")


def test_without_the_service_dependencies_it_says_which_extra_to_install() -> None:
    result = run_blocked(SERVER_ONLY_MODULES, ["slow"])
    assert result.returncode == 2
    assert result.stderr.strip() == cli_main.MISSING_SERVER_MESSAGE


def test_a_missing_module_of_its_own_is_raised_not_taken_for_a_missing_extra() -> None:
    result = run_blocked(("latencylens_collector.cli.serve",), ["slow"])
    assert result.returncode == 1
    assert "ModuleNotFoundError" in result.stderr
    assert "latencylens_collector.cli.serve" in result.stderr
    assert cli_main.MISSING_SERVER_MESSAGE not in result.stderr
