"""A store whose schema stops at an earlier migration: how a database made by an older version
looks, so a test can store rows in it and then apply the migrations that follow."""

from __future__ import annotations

import shutil
from pathlib import Path

from latencylens_collector.settings import Settings
from latencylens_collector.storage.migrations import apply_migrations, migrations_dir
from latencylens_collector.storage.store import Store


def store_migrated_up_to(settings: Settings, last: int, folder: Path) -> Store:
    """A store of ``settings`` with migrations 1…``last`` applied (copied into ``folder``)."""
    before = folder / f"up_to_{last:04d}"
    before.mkdir()
    for path in migrations_dir().glob("00*.sql"):
        if int(path.name[:4]) <= last:
            shutil.copy(path, before)
    store = Store(settings)
    apply_migrations(store, before)
    return store
