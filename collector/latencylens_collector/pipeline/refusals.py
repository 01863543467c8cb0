"""Telling ClickHouse's refusals apart: wait and retry the batch, or find the spans it will never take.

A failed write is *transient* when ClickHouse cannot take any batch now: unreachable, read-only,
too many parts, out of disk, a timeout, the schema missing. The whole batch stays spooled and is
retried with back-off; splitting it would not help.

Any other failure may be the data's (a constraint, a value ClickHouse cannot take, a span that
makes row building fail). :class:`Triage` then splits the batch in halves until every failing
piece is one span: those spans are *refused*, each with ClickHouse's reason, and the rest are
stored. Invariants: every span of the batch ends stored or refused (never neither); pieces are
written in span order, each with its own deduplication token (``<batch>-<lo>-<hi>``), so a piece
replayed after a crash is dropped by ClickHouse rather than stored twice; a transient failure
mid-way leaves the remaining pieces for the next attempt. Work is bounded per :meth:`Triage.step`
(k refused spans among n cost at most 2·k·log2(n) + 1 writes in all), so one batch of bad spans
cannot hold the single writer, and every other export behind it, for long.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Final

from latencylens_collector.analysis.records import SpanRow
from latencylens_collector.storage.store import StorageUnavailable

UNREACHABLE: Final = "UNREACHABLE"
"""Name of the refusal when ClickHouse could not be reached at all."""
INTERNAL: Final = "INTERNAL"
"""Name of a failure that is not ClickHouse's (row building raised): split like a data error."""
MAX_MESSAGE_CHARS: Final = 2000
"""ClickHouse's text is kept for the spool and the log, cut to this length."""

TRANSIENT_CODES: Final[dict[int, str]] = {
    60: "UNKNOWN_TABLE",
    81: "UNKNOWN_DATABASE",
    159: "TIMEOUT_EXCEEDED",
    164: "READONLY",
    173: "CANNOT_ALLOCATE_MEMORY",
    202: "TOO_MANY_SIMULTANEOUS_QUERIES",
    203: "NO_FREE_CONNECTION",
    209: "SOCKET_TIMEOUT",
    210: "NETWORK_ERROR",
    218: "TABLE_IS_DROPPED",
    225: "NO_ZOOKEEPER",
    236: "ABORTED",
    242: "TABLE_IS_READ_ONLY",
    243: "NOT_ENOUGH_SPACE",
    252: "TOO_MANY_PARTS",
    279: "ALL_CONNECTION_TRIES_FAILED",
    285: "TOO_FEW_LIVE_REPLICAS",
    319: "UNKNOWN_STATUS_OF_INSERT",
    394: "QUERY_WAS_CANCELLED",
    425: "SYSTEM_ERROR",
    999: "KEEPER_EXCEPTION",
}
"""ClickHouse error codes that say "not now" for any batch (ClickHouse's ``ErrorCodes.cpp``).
``MEMORY_LIMIT_EXCEEDED`` (241) is not among them on purpose: a smaller piece may fit."""

_CODE = re.compile(r"\bCode:\s*(\d+)")
_NAME = re.compile(r"\(([A-Z][A-Z0-9_]+)\)")


@dataclass(frozen=True)
class Refusal:
    """Why a write failed, classified."""

    transient: bool
    name: str
    """ClickHouse's name of the error (``TOO_MANY_PARTS``), :data:`UNREACHABLE` or :data:`INTERNAL`:
    short and free of data, so it may be shown in answers and used as a metric label."""
    code: int | None = None
    message: str = ""
    """ClickHouse's full text (may quote the data): for the log and the spool file only."""


def classify(exc: BaseException) -> Refusal:
    """The refusal an exception from a write stands for."""
    message = (str(exc) or type(exc).__name__)[:MAX_MESSAGE_CHARS]
    if isinstance(exc, StorageUnavailable):
        return Refusal(True, UNREACHABLE, None, message)
    code, name = _code_and_name(exc)
    if code is None and name is None:
        return Refusal(False, INTERNAL, None, message)
    name = name or TRANSIENT_CODES.get(code or 0) or f"CODE_{code}"
    return Refusal(code in TRANSIENT_CODES, name, code, message)


def _code_and_name(exc: BaseException) -> tuple[int | None, str | None]:
    """ClickHouse's code and name: from the driver's exception (the cause of a StorageError) when it
    carries them, else parsed from the text (``Code: 469. DB::Exception: … (VIOLATED_CONSTRAINT)``)."""
    seen: BaseException | None = exc
    while seen is not None:
        code, name = getattr(seen, "code", None), getattr(seen, "name", None)
        if isinstance(code, int):
            return code, name if isinstance(name, str) and name else None
        seen = seen.__cause__
    text = str(exc)
    code_match = _CODE.search(text)
    names = _NAME.findall(text)
    if code_match is None:
        return None, None
    return int(code_match.group(1)), names[-1] if names else None


Write = Callable[[Sequence[SpanRow], str], None]
"""Writes spans with a deduplication token; raises on failure."""


@dataclass
class Triage:
    """One batch on its way into ClickHouse: the pieces still to write, and the spans refused so far.

    Keep the object between :meth:`step` calls; its progress lives only in memory, so a crash
    starts the batch over, which the per-piece tokens and the spans table's deduplication absorb.
    """

    batch_id: str
    spans: Sequence[SpanRow]
    pending: list[tuple[int, int]] = field(default_factory=list)
    """Half-open index ranges still to write, the next one last."""
    refused: dict[int, Refusal] = field(default_factory=dict)
    stored: int = 0
    writes: int = 0

    def __post_init__(self) -> None:
        if not self.pending and self.spans and not self.stored and not self.refused:
            self.pending = [(0, len(self.spans))]

    @property
    def done(self) -> bool:
        return not self.pending

    def token(self, lo: int, hi: int) -> str:
        """The whole batch keeps its id (a replay of an acknowledged batch is deduplicated against
        the first attempt); a piece gets an id of its own, so pieces never dedupe each other."""
        return self.batch_id if (lo, hi) == (0, len(self.spans)) else f"{self.batch_id}-{lo}-{hi}"

    def step(self, write: Write, max_writes: int) -> Refusal | None:
        """Write pieces until none is left or ``max_writes`` were tried. Returns the transient
        refusal that stopped it (its piece stays pending), or None."""
        for _ in range(max(1, max_writes)):
            if not self.pending:
                return None
            lo, hi = self.pending.pop()
            self.writes += 1
            try:
                write(self.spans[lo:hi], self.token(lo, hi))
            except Exception as exc:
                refusal = classify(exc)
                if refusal.transient:
                    self.pending.append((lo, hi))
                    return refusal
                if hi - lo == 1:
                    self.refused[lo] = refusal
                else:
                    middle = (lo + hi) // 2
                    self.pending.extend(((middle, hi), (lo, middle)))
                continue
            self.stored += hi - lo
        return None

    def refused_spans(self) -> list[tuple[SpanRow, Refusal]]:
        return [(self.spans[index], refusal) for index, refusal in sorted(self.refused.items())]
