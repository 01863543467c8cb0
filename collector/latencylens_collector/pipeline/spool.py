"""Acknowledged batches ClickHouse does not have yet, kept on local disk until it does.

One file per batch, ``<sequence>-<batch id>-<spans>.spool``: written to a temporary name, fsync'ed,
renamed and the directory fsync'ed, so a file under its final name is always complete and survives
a crash or power loss. Files are replayed oldest first and deleted only after ClickHouse has the
batch; a crash between the insert and the delete replays the batch again, which the batch id (the
insert deduplication token) and the spans table's ReplacingMergeTree absorb.

Spans ClickHouse refuses for good (a constraint, a value it cannot take: see
:mod:`~latencylens_collector.pipeline.refusals`) are kept in ``failed/``, one file per batch with
each span's reason; they are never deleted by the collector. Opening the spool (a restart) moves
them back into the replay order, and so does ``latencylens spool replay``; spans refused again
return to ``failed/``. A file that cannot be read at all also goes to ``failed/``, as it is.

The directory (pending and failed files together) holds at most ``max_bytes``; a batch that does
not fit is refused (:class:`SpoolFull`), and so is every batch while the disk itself is full.
A lock file keeps a second collector from replaying the same directory concurrently.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any, Final

from latencylens_collector.analysis.records import SpanRow
from latencylens_collector.pipeline.refusals import Refusal
from latencylens_collector.runtime import metrics

SUFFIX: Final = ".spool"
FORMAT_VERSION: Final = 1
FAILED_DIR: Final = "failed"
"""Spans ClickHouse refused for good (and unreadable files), kept for an operator and for replay."""
QUARANTINE_DIR: Final = FAILED_DIR
"""Where unreadable files go: the same ``failed/`` (the name older code and tests use)."""
LOCK_FILE: Final = ".lock"
_TMP_PREFIX: Final = ".tmp-"
_SPACE_ERRORS: Final = frozenset({errno.ENOSPC, errno.EDQUOT})


class SpoolError(Exception):
    """The spool cannot be used; the message says why (with its path, for the log), ``reason``
    says it in a few words without the path (for /readyz)."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class SpoolFull(OSError):
    """The batch does not fit in the spool's byte budget, or the disk is full."""


@dataclass(frozen=True)
class SpooledBatch:
    path: Path
    batch_id: str
    spans: list[SpanRow]


@dataclass(frozen=True)
class SpoolCounts:
    """What the spool holds, from its file names and sizes (cheap enough for every /readyz)."""

    pending_batches: int = 0
    pending_spans: int = 0
    failed_batches: int = 0
    failed_spans: int = 0
    bytes: int = 0


@dataclass(frozen=True)
class FailedBatch:
    """One file of ``failed/``, read for ``latencylens spool status``."""

    name: str
    spans: int
    reasons: dict[str, int] = field(default_factory=dict)
    """Refusal name → spans; ``UNREADABLE`` for a file that could not be read."""
    example: str = ""
    """ClickHouse's text for the first refused span."""
    refused_at_ns: int | None = None


UNREADABLE: Final = "UNREADABLE"


class Spool:
    """A directory of pending batches, owned by one process at a time."""

    def __init__(self, directory: Path, max_bytes: int | None = None) -> None:
        self.directory = directory
        self.failed_directory = directory / FAILED_DIR
        self.max_bytes = max_bytes if max_bytes and max_bytes > 0 else None
        self._lock_file: IO[bytes] | None = None
        self._sequence = 0
        self._counts = _Counts()
        self._full = False
        """The last batch did not fit (the byte budget or the disk); cleared once a write succeeds or
        space is freed."""
        self._refreshed_at = 0.0
        self._mutex = threading.Lock()

    # --- lifecycle ------------------------------------------------------------------------------
    def open(self) -> int:
        """Create the directory, take its lock, forget half-written files (never acknowledged) and
        move failed batches back into the replay order; returns how many spans were moved back.

        Raises :class:`SpoolError` when the directory is unusable or another process holds it."""
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            lock = (self.directory / LOCK_FILE).open("ab")
        except OSError as exc:
            raise SpoolError(f"cannot use spool directory {self.directory}: {exc}", "not usable") from exc
        try:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            lock.close()
            raise SpoolError(
                f"spool directory {self.directory} is in use by another process", "in use by another process"
            ) from exc
        self._lock_file = lock
        for directory in (self.directory, self.failed_directory):
            for stale in directory.glob(f"{_TMP_PREFIX}*"):
                stale.unlink(missing_ok=True)
        _, requeued = requeue_failed(self.directory)
        self.refresh()
        return requeued

    def close(self) -> None:
        if self._lock_file is not None:
            fcntl.flock(self._lock_file.fileno(), fcntl.LOCK_UN)
            self._lock_file.close()
            self._lock_file = None

    @property
    def is_open(self) -> bool:
        return self._lock_file is not None

    def problem(self) -> str | None:
        """Why a batch could not be spooled now, in a few words, or None when it could."""
        if not self.is_open:
            return "not open"
        if self.is_full:
            return "full"
        if not os.access(self.directory, os.W_OK):
            return "not writable"
        return None

    @property
    def is_full(self) -> bool:
        """At the byte budget, or the last batch did not fit (until a write succeeds or space is freed)."""
        over = self.max_bytes is not None and self._counts.bytes >= self.max_bytes
        return over or self._full

    # --- accounting -----------------------------------------------------------------------------
    def refresh(self) -> SpoolCounts:
        """Recount from the directory (another process, ``latencylens spool replay``, may have
        moved failed batches back)."""
        counts = count_files(self.directory)
        with self._mutex:
            if counts.bytes < self._counts.bytes:
                self._full = False  # space was freed
            self._counts = _Counts.of(counts)
            self._refreshed_at = time.monotonic()
            self._publish()
        return counts

    def refresh_if_older_than(self, seconds: float) -> None:
        if self.is_open and time.monotonic() - self._refreshed_at >= seconds:
            self.refresh()

    @property
    def counts(self) -> SpoolCounts:
        return self._counts.frozen()

    @property
    def pending_spans(self) -> int:
        return self._counts.pending_spans

    @property
    def failed_spans(self) -> int:
        return self._counts.failed_spans

    # --- batches --------------------------------------------------------------------------------
    def write(self, batch_id: str, spans: Sequence[SpanRow]) -> Path:
        """Store a batch durably (fsync'ed file and directory); raises :class:`SpoolFull` or
        another OSError."""
        if not self.is_open:
            raise OSError("spool not open")
        with self._mutex:
            self._sequence += 1
            sequence = time.time_ns() * 1000 + self._sequence % 1000
        payload = _document(batch_id, spans)
        if self.max_bytes is not None and self._counts.bytes + len(payload) > self.max_bytes:
            self._full = True
            raise SpoolFull(
                errno.ENOSPC,
                f"spool full: {self._counts.bytes} of {self.max_bytes} bytes used, batch of {len(payload)}",
            )
        path = self.directory / _file_name(sequence, batch_id, len(spans))
        self._write_file(path, payload)
        with self._mutex:
            self._counts.pending_batches += 1
            self._counts.pending_spans += len(spans)
            self._counts.bytes += len(payload)
            self._publish()
        return path

    def pending(self) -> list[Path]:
        """Spooled batch files, oldest first."""
        return sorted(self.directory.glob(f"*{SUFFIX}"))

    def read(self, path: Path) -> SpooledBatch:
        """Raises ValueError (or OSError) when the file is not a readable batch."""
        return read_batch(path)

    def remove(self, path: Path) -> None:
        """Forget a batch that ClickHouse now has (and whose refused spans are kept)."""
        size = _size(path)
        path.unlink(missing_ok=True)
        with self._mutex:
            self._counts.pending_batches -= 1
            self._counts.pending_spans -= span_count(path)
            self._counts.bytes -= size
            self._full = False
            self._publish()

    def keep_refused(self, batch: SpooledBatch, refused: Sequence[tuple[SpanRow, Refusal]]) -> Path:
        """Write the spans ClickHouse refused, with their reasons, to ``failed/`` (the caller then
        removes the batch). The file gets a batch id of its own, derived from the batch's, so the
        deduplication tokens of its later replay cannot match pieces of the batch already stored;
        writing it twice (a crash before the batch's removal) gives the same file."""
        batch_id = hashlib.sha256(f"{batch.batch_id}:refused".encode()).hexdigest()[:32]
        spans = [span for span, _ in refused]
        by_reason: dict[tuple[str, int | None, str], list[int]] = {}
        for index, (_, refusal) in enumerate(refused):
            by_reason.setdefault((refusal.name, refusal.code, refusal.message), []).append(index)
        extra = {
            "refused_at_ns": time.time_ns(),
            "refused": [
                {"name": name, "code": code, "message": message, "spans": indexes}
                for (name, code, message), indexes in by_reason.items()
            ],
        }
        payload = _document(batch_id, spans, extra)
        self.failed_directory.mkdir(exist_ok=True)
        sequence = batch.path.name.split("-", 1)[0]
        path = self.failed_directory / f"{sequence}-{batch_id}-{len(spans)}{SUFFIX}"
        replaced = _size(path)
        self._write_file(path, payload)  # refused spans may take the spool past its budget: kept anyway
        with self._mutex:
            if not replaced:
                self._counts.failed_batches += 1
                self._counts.failed_spans += len(spans)
            self._counts.bytes += len(payload) - replaced
            self._publish()
        return path

    def quarantine(self, path: Path) -> Path:
        """Move a file that cannot be read as a batch to ``failed/``, as it is, for an operator."""
        self.failed_directory.mkdir(exist_ok=True)
        target = self.failed_directory / path.name
        os.replace(path, target)
        _fsync_dir(self.failed_directory)
        spans = span_count(path)
        with self._mutex:
            self._counts.pending_batches -= 1
            self._counts.pending_spans -= spans
            self._counts.failed_batches += 1
            self._counts.failed_spans += spans
            self._publish()
        return target

    # --- internals ------------------------------------------------------------------------------
    def _write_file(self, final: Path, payload: bytes) -> None:
        tmp = final.parent / f"{_TMP_PREFIX}{final.name}"
        try:
            with tmp.open("wb") as file:
                file.write(payload)
                file.flush()
                os.fsync(file.fileno())
            os.replace(tmp, final)
            _fsync_dir(final.parent)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            if exc.errno in _SPACE_ERRORS:
                self._full = True
                raise SpoolFull(exc.errno, f"disk full while spooling: {exc}") from exc
            raise
        self._full = False

    def _publish(self) -> None:
        metrics.SPOOL_PENDING_SPANS.set(max(0, self._counts.pending_spans))
        metrics.SPOOL_FAILED_SPANS.set(max(0, self._counts.failed_spans))
        metrics.SPOOL_BYTES.set(max(0, self._counts.bytes))


@dataclass
class _Counts:
    """The mutable :class:`SpoolCounts` an open spool keeps up to date."""

    pending_batches: int = 0
    pending_spans: int = 0
    failed_batches: int = 0
    failed_spans: int = 0
    bytes: int = 0

    @classmethod
    def of(cls, counts: SpoolCounts) -> _Counts:
        return cls(**asdict(counts))

    def frozen(self) -> SpoolCounts:
        return SpoolCounts(**{key: max(0, value) for key, value in asdict(self).items()})


# --- the directory, without owning it (status and replay from the command line) --------------------
def count_files(directory: Path) -> SpoolCounts:
    """Batches, spans and bytes of a spool directory, from file names and sizes."""
    pending = list(directory.glob(f"*{SUFFIX}"))
    failed = list((directory / FAILED_DIR).glob(f"*{SUFFIX}"))
    return SpoolCounts(
        pending_batches=len(pending),
        pending_spans=sum(map(span_count, pending)),
        failed_batches=len(failed),
        failed_spans=sum(map(span_count, failed)),
        bytes=sum(map(_size, [*pending, *failed])),
    )


def failed_batches(directory: Path) -> list[FailedBatch]:
    """Every file of ``failed/`` with its spans' reasons, oldest first."""
    found = []
    for path in sorted((directory / FAILED_DIR).glob(f"*{SUFFIX}")):
        try:
            document = json.loads(path.read_bytes())
            refused = document.get("refused") or []
            reasons = Counter({str(item["name"]): len(item["spans"]) for item in refused})
            example = str(refused[0]["message"]) if refused else ""
            at = document.get("refused_at_ns")
            found.append(FailedBatch(path.name, len(document["spans"]), dict(reasons), example, at))
        except (OSError, ValueError, KeyError, TypeError):
            found.append(FailedBatch(path.name, span_count(path), {UNREADABLE: span_count(path)}))
    return found


def requeue_failed(directory: Path) -> tuple[int, int]:
    """Move every file of ``failed/`` back into the replay order (a rename each, safe while a
    collector runs: it notices within seconds); returns (batches, spans) moved."""
    failed = sorted((directory / FAILED_DIR).glob(f"*{SUFFIX}"))
    for path in failed:
        os.replace(path, directory / path.name)
    if failed:
        _fsync_dir(directory)
    return len(failed), sum(map(span_count, failed))


def is_locked(directory: Path) -> bool:
    """Whether a running collector holds the spool."""
    lock_path = directory / LOCK_FILE
    if not lock_path.exists():
        return False
    with lock_path.open("ab") as lock:
        try:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return True
        fcntl.flock(lock.fileno(), fcntl.LOCK_UN)
        return False


def read_batch(path: Path) -> SpooledBatch:
    """Raises ValueError (or OSError, KeyError, TypeError) when the file is not a readable batch."""
    document = json.loads(path.read_bytes())
    if document.get("version") != FORMAT_VERSION:
        raise ValueError(f"unknown spool format {document.get('version')!r} in {path.name}")
    return SpooledBatch(path, str(document["batch_id"]), [_decode(item) for item in document["spans"]])


def span_count(path: Path) -> int:
    try:
        return int(path.name.removesuffix(SUFFIX).rsplit("-", 1)[1])
    except (IndexError, ValueError):
        return 0


def _file_name(sequence: int, batch_id: str, spans: int) -> str:
    return f"{sequence:023d}-{batch_id}-{spans}{SUFFIX}"


def _document(batch_id: str, spans: Sequence[SpanRow], extra: dict[str, Any] | None = None) -> bytes:
    document = {"version": FORMAT_VERSION, "batch_id": batch_id, "spans": [_encode(s) for s in spans]}
    document.update(extra or {})
    return json.dumps(document, separators=(",", ":")).encode()


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
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
