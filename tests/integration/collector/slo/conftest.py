"""Fixtures of the SLO tests: a metadata database per test and an evaluation rig over real chdb."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from slo_support import BASE_NS, Chat, FakeClock, span_rows

from latencylens_collector.metadata import db
from latencylens_collector.pipeline.ingest import Ingestor
from latencylens_collector.slo.definitions import SloDefinition
from latencylens_collector.slo.evaluator import Evaluation, Evaluator
from latencylens_collector.slo.notifier import Notifier, Target
from latencylens_collector.slo.records import SloRecord
from latencylens_collector.slo.repository import SloRepository
from latencylens_collector.storage.store import Store

PUBLIC_URL = "https://lens.example.test"


@pytest.fixture
def metadata_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'metadata.db'}"


@dataclass
class Rig:
    """The evaluator over a migrated chdb database and SQLite metadata, with a hand-driven clock."""

    store: Store
    repository: SloRepository
    clock: FakeClock
    evaluator: Evaluator
    sleeps: list[float] = field(default_factory=list)

    def traffic(self, starts: Sequence[int], chat: Chat, service: str = "chat-api") -> None:
        rows = [row for start in starts for row in span_rows(start, chat, service=service)]
        Ingestor(self.store).ingest(rows)

    def create(self, body: dict[str, Any], project: str = "default") -> SloRecord:
        return self.repository.create(project, SloDefinition.model_validate(body), self.clock())

    def evaluate(self, slo: SloRecord) -> Evaluation:
        return self.evaluator.evaluate(slo, self.clock())


@pytest.fixture
def make_rig(store: Store, metadata_url: str) -> Iterator[Callable[..., Rig]]:
    engines = []

    def make(targets: Sequence[Target] = ()) -> Rig:
        engine = db.make_engine(metadata_url)
        engines.append(engine)
        db.upgrade(engine)
        repository = SloRepository(engine)
        clock = FakeClock(BASE_NS)
        sleeps: list[float] = []
        notifier = Notifier(targets, sleep=sleeps.append, timeout_s=5)
        evaluator = Evaluator(repository, store, notifier, clock, PUBLIC_URL)
        return Rig(store, repository, clock, evaluator, sleeps)

    yield make
    for engine in engines:
        engine.dispose()
