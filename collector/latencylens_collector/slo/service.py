"""The SLO feature inside the collector: metadata database, evaluator, notifier and scheduler.

Started and stopped by the app's lifespan; routes reach it as ``app.state.slo``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from sqlalchemy.exc import SQLAlchemyError

from latencylens_collector.metadata import db
from latencylens_collector.runtime.scheduler import Scheduler
from latencylens_collector.settings import Settings, redact_dsn
from latencylens_collector.slo.definitions import load_file
from latencylens_collector.slo.evaluator import Evaluator
from latencylens_collector.slo.exposition import SLO_COLLECTOR
from latencylens_collector.slo.notifier import Notifier, targets_from
from latencylens_collector.slo.repository import SloRepository
from latencylens_collector.storage.store import Store

_log = logging.getLogger(__name__)


class SloUnavailable(Exception):
    """The metadata database could not be reached or migrated."""


class SloService:
    def __init__(
        self,
        settings: Settings,
        store: Store,
        clock: Callable[[], int] | None = None,
        notifier: Notifier | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.clock = clock or time.time_ns
        """Stamps SLO definitions and silences; evaluations end their windows on ``clock`` when
        given, else on the store's clock (the one request rows are stamped with)."""
        self.engine = db.make_engine(settings.metadata_url)
        self.repository = SloRepository(self.engine)
        self.notifier = notifier or Notifier(
            targets_from(settings.slo_webhook_urls, settings.slo_slack_webhook_urls)
        )
        self.evaluator = Evaluator(self.repository, store, self.notifier, clock, settings.public_url)
        interval = settings.slo_eval_interval_s
        self.scheduler = (
            Scheduler(self.evaluator.run_once, interval, name="latencylens-slo") if interval > 0 else None
        )
        self._ready = False
        self._ready_lock = threading.Lock()

    def ensure_ready(self) -> None:
        """Apply the metadata migrations once (retried on the next call after a failure)."""
        if self._ready:
            return
        with self._ready_lock:
            if self._ready:
                return
            try:
                db.upgrade(self.engine)
            except SQLAlchemyError as exc:
                url = redact_dsn(self.settings.metadata_url)
                raise SloUnavailable(f"metadata database {url} unavailable: {exc}") from exc
            self._ready = True

    def load_file(self) -> int:
        """Upsert the SLOs of LATENCYLENS_SLO_FILE; returns how many."""
        if not self.settings.slo_file:
            return 0
        entries = load_file(self.settings.slo_file)
        now_ns = self.clock()
        for entry in entries:
            self.repository.upsert(entry.project, entry, now_ns, source="file")
        return len(entries)

    def start(self) -> None:
        """Migrate, load the SLO file, register for /metrics, start evaluating.

        A metadata database that is down is logged and retried by later API calls; a broken SLO
        file stops start-up, because silently running without its SLOs would hide breaches.
        """
        try:
            self.ensure_ready()
        except SloUnavailable as exc:
            _log.warning("SLOs not available at start-up: %s", exc)
        if self._ready:
            loaded = self.load_file()
            if loaded:
                _log.info("loaded %d SLOs from %s", loaded, self.settings.slo_file)
        SLO_COLLECTOR.add_source(self)
        if self.scheduler is not None:
            self.scheduler.start()

    def stop(self) -> None:
        if self.scheduler is not None:
            self.scheduler.stop()
        SLO_COLLECTOR.remove_source(self)
        self.engine.dispose()


def start_slo_service(settings: Settings, store: Store, clock: Callable[[], int] | None) -> SloService:
    service = SloService(settings, store, clock)
    service.start()
    return service
