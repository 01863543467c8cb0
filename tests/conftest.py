"""Shared fixtures: one embedded ClickHouse (chdb) per test session, one database per test.

chdb binds a single data directory per process, so every store and collector in the session uses
the same directory and tests are isolated by database name instead.

Fixtures:
    chdb_dsn         (session) DSN of the session's chdb directory.
    make_settings    factory: ``make_settings(**overrides)`` -> Settings with a fresh database.
    store            a migrated Store on a fresh database (no HTTP server).
    start_collector  factory: ``start_collector(**settings_overrides)`` -> RunningCollector;
                     stopped at teardown.
    collector        a RunningCollector on a fresh database: ``.url``, ``.store``, ``.settings``.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from collector_settings import collector_settings

from latencylens_collector.settings import Settings
from latencylens_collector.settings import chdb_dsn as _chdb_dsn

# Helpers whose asserts should show both sides when a check fails, like a test's own.
pytest.register_assert_rewrite("convergence_support")

if TYPE_CHECKING:  # imported by the fixtures that use them: unit tests need neither (seconds saved)
    from latencylens_collector.api.server import ServiceThread
    from latencylens_collector.storage.store import Store

SERVER_URL_ENV = "LATENCYLENS_TEST_CLICKHOUSE_URL"
"""Set to an http(s) ClickHouse DSN to run the server-only tests; they are skipped otherwise."""

_database_numbers = itertools.count()


@dataclass
class RunningCollector:
    """A real collector (uvicorn in a thread) listening on 127.0.0.1."""

    url: str
    store: Store
    settings: Settings
    service: ServiceThread


@pytest.fixture(scope="session")
def chdb_dsn(tmp_path_factory: pytest.TempPathFactory) -> str:
    return _chdb_dsn(Path(tmp_path_factory.mktemp("chdb")) / "data")


@pytest.fixture
def make_settings(chdb_dsn: str, tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Settings]:
    def make(**overrides: Any) -> Settings:
        # A test that restarts a collector on the same data passes the first one's database.
        database = overrides.pop("database", None) or f"test_{os.getpid()}_{next(_database_numbers)}"
        folder = tmp_path_factory.mktemp(f"metadata_{database}")
        return collector_settings(chdb_dsn, database, folder, **overrides)

    return make


@pytest.fixture
def store(make_settings: Callable[..., Settings]) -> Iterator[Store]:
    from latencylens_collector.storage.store import Store

    the_store = Store(make_settings())
    the_store.migrate()
    yield the_store
    the_store.close()


@pytest.fixture
def start_collector(make_settings: Callable[..., Settings]) -> Iterator[Callable[..., RunningCollector]]:
    from latencylens_collector.api.server import ServiceThread

    started: list[ServiceThread] = []

    def start(**settings_overrides: Any) -> RunningCollector:
        settings = make_settings(**settings_overrides)
        service = ServiceThread(settings).start()
        started.append(service)
        return RunningCollector(url=service.url, store=service.store, settings=settings, service=service)

    yield start
    for service in started:
        service.stop()
        service.store.close()


@pytest.fixture
def collector(start_collector: Callable[..., RunningCollector]) -> RunningCollector:
    return start_collector()


@pytest.fixture
def clickhouse_server_url() -> str:
    """DSN of a real ClickHouse server, or skip."""
    url = os.environ.get(SERVER_URL_ENV)
    if not url:
        pytest.skip(f"{SERVER_URL_ENV} not set: no ClickHouse server to test against")
    return url
