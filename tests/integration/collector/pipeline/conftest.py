"""Fixtures of the ingest-pipeline tests."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest

from latencylens_collector.pipeline import Pipeline
from latencylens_collector.pipeline.ingest import Ingestor
from latencylens_collector.settings import Settings
from latencylens_collector.storage.store import Store


@pytest.fixture
def start_pipeline(make_settings: Callable[..., Settings]) -> Iterator[Callable[..., tuple[Pipeline, Store]]]:
    """Starts a real pipeline (queue, writer, chdb) on a fresh database: ``start(ingestor=...,
    monotonic=..., **settings)``; each is stopped after the test."""
    started: list[tuple[Pipeline, Store]] = []

    def start(
        ingestor: type[Ingestor] = Ingestor,
        monotonic: Callable[[], float] = time.monotonic,
        **settings_overrides: object,
    ) -> tuple[Pipeline, Store]:
        settings = make_settings(**settings_overrides)
        store = Store(settings)
        store.migrate()
        pipeline = Pipeline(settings, ingestor(store), monotonic)
        pipeline.start()
        started.append((pipeline, store))
        return pipeline, store

    yield start
    for pipeline, store in started:
        pipeline.stop()
        store.close()
