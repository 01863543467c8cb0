"""Batches that could not reach ClickHouse, kept on local disk until they can.

One file per batch, ``<sequence>-<batch id>-<spans>.spool``: written to a temporary name, fsync'ed,
renamed and the directory fsync'ed, so a file under its final name is always complete and survives
a crash or power loss. Files are replayed oldest first and deleted only after ClickHouse has the
batch; a crash between the insert and the delete replays the batch again, which the batch id (the
insert deduplication token) and the spans table's ReplacingMergeTree absorb.

A lock file keeps a second collector from replaying the same directory concurrently.
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any, Final

from latencylens_collector.analysis.records import SpanRow
from latencylens_collector.runtime import metrics

SUFFIX: Final = ".spool"
FORMAT_VERSION: Final = 1
QUARANTINE_DIR: Final = "failed"
"""Batches ClickHouse refused repeatedly (not for being unreachable) move here for an operator."""
_LOCK_FILE: Final = ".lock"
_TMP_PREFIX: Final = ".tmp-"


class SpoolError(Exception):
    """The spool cannot be used; the message says why."""


@dataclass(frozen=True)
class SpooledBatch:
    path: Path
    batch_id: str
    spans: list[SpanRow]


class Spool:
    """A directory of pending batches, owned by one process at a time."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._lock_file: IO[bytes] | None = None
        self._sequence = 0
        self._pending_spans = 0
        self._mutex = threading.Lock()

    # --- lifecycle ------------------------------------------------------------------------------
    def open(self) -> None:
        """Create the directory, take its lock and forget half-written files (never acknowledged).

        Raises :class:`SpoolError` when the directory is unusable or another process holds it."""
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            lock = (self.directory / _LOCK_FILE).open("ab")
        except OSError as exc:
            raise SpoolError(f"cannot use spool directory {self.directory}: {exc}") from exc
        try:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            lock.close()
            raise SpoolError(f"spool directory {self.directory} is in use by another process") from exc
        self._lock_file = lock
        for stale in self.directory.glob(f"{_TMP_PREFIX}*"):
            stale.unlink(missing_ok=True)
        self._pending_spans = sum(_span_count(path) for path in self.pending())
        metrics.SPOOL_PENDING_SPANS.set(self._pending_spans)

    def close(self) -> None:
        if self._lock_file is not None:
            fcntl.flock(self._lock_file.fileno(), fcntl.LOCK_UN)
            self._lock_file.close()
            self._lock_file = None

    @property
    def is_open(self) -> bool:
        return self._lock_file is not None

    def problem(self) -> str | None:
        """Why a batch could not be spooled now, or None when it could."""
        if not self.is_open:
            return "spool not open"
        if not os.access(self.directory, os.W_OK):
            return f"spool directory {self.directory} is not writable"
        return None

    # --- batches --------------------------------------------------------------------------------
    def write(self, batch_id: str, spans: list[SpanRow]) -> Path:
        """Store a batch durably (fsync'ed file and directory); raises OSError."""
        if not self.is_open:
            raise OSError("spool not open")
        with self._mutex:
            self._sequence += 1
            sequence = time.time_ns() * 1000 + self._sequence % 1000
        final = self.directory / f"{sequence:023d}-{batch_id}-{len(spans)}{SUFFIX}"
        tmp = self.directory / f"{_TMP_PREFIX}{final.name}"
        payload = json.dumps(
            {"version": FORMAT_VERSION, "batch_id": batch_id, "spans": [_encode(s) for s in spans]},
            separators=(",", ":"),
        ).encode()
        try:
            with tmp.open("wb") as file:
                file.write(payload)
                file.flush()
                os.fsync(file.fileno())
            os.replace(tmp, final)
            _fsync_dir(self.directory)
        except OSError:
            tmp.unlink(missing_ok=True)
            raise
        self._add_pending(len(spans))
        return final

    def pending(self) -> list[Path]:
        """Spooled batch files, oldest first."""
        return sorted(self.directory.glob(f"*{SUFFIX}"))

    @property
    def pending_spans(self) -> int:
        return self._pending_spans

    def read(self, path: Path) -> SpooledBatch:
        """Raises ValueError (or OSError) when the file is not a readable batch."""
        document = json.loads(path.read_bytes())
        if document.get("version") != FORMAT_VERSION:
            raise ValueError(f"unknown spool format {document.get('version')!r} in {path.name}")
        return SpooledBatch(path, str(document["batch_id"]), [_decode(item) for item in document["spans"]])

    def remove(self, path: Path) -> None:
        """Forget a batch that ClickHouse now has."""
        path.unlink(missing_ok=True)
        self._add_pending(-_span_count(path))

    def quarantine(self, path: Path) -> Path:
        """Move a batch that keeps failing out of the replay order, keeping it for inspection."""
        target_dir = self.directory / QUARANTINE_DIR
        target_dir.mkdir(exist_ok=True)
        target = target_dir / path.name
        os.replace(path, target)
        self._add_pending(-_span_count(path))
        return target

    def _add_pending(self, spans: int) -> None:
        with self._mutex:
            self._pending_spans = max(0, self._pending_spans + spans)
            metrics.SPOOL_PENDING_SPANS.set(self._pending_spans)


def _span_count(path: Path) -> int:
    try:
        return int(path.name.removesuffix(SUFFIX).rsplit("-", 1)[1])
    except (IndexError, ValueError):
        return 0


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


_ID_FIELDS: Final = ("trace_id", "span_id", "parent_span_id")


def _encode(row: SpanRow) -> dict[str, Any]:
    item = asdict(row)
    for key in _ID_FIELDS:
        item[key] = item[key].hex()
    return item


def _decode(item: dict[str, Any]) -> SpanRow:
    fields: dict[str, Any] = {
        key: bytes.fromhex(value) if key in _ID_FIELDS else value for key, value in item.items()
    }
    return SpanRow(**fields)
