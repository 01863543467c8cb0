"""Finishing a spooled batch, for the writer thread and for ``latencylens spool replay`` alike.

The writer replays one batch a step at a time between live flushes; the command line, with no
collector running, replays the whole spool at once with :func:`replay_spool`. Both end a batch with
:func:`settle`: refused spans kept in ``failed/`` with their reasons, the batch file removed.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from latencylens_collector.pipeline.refusals import Refusal, Triage, Write
from latencylens_collector.pipeline.spool import FAILED_DIR, Spool, SpooledBatch
from latencylens_collector.runtime import metrics

_log = logging.getLogger(__name__)


def settle(spool: Spool, batch: SpooledBatch, triage: Triage) -> Counter[str]:
    """Keep the spans ``triage`` found refused (with their reasons), then remove the batch's file;
    returns refused spans per reason. Call once the triage is done."""
    refused = triage.refused_spans()
    reasons: Counter[str] = Counter(refusal.name for _, refusal in refused)
    if refused:
        kept = spool.keep_refused(batch, refused)
        for name, count in reasons.items():
            metrics.SPANS_REFUSED.labels(reason=name).inc(count)
        _log.error(
            "ClickHouse refused %d of %d spans of a spooled batch (%s), kept in %s: %s",
            len(refused),
            len(batch.spans),
            ", ".join(f"{name} ×{count}" for name, count in reasons.items()),
            kept,
            refused[0][1].message,
        )
    spool.remove(batch.path)
    return reasons


@dataclass
class ReplayReport:
    """What one pass over the spool did."""

    batches: int = 0
    stored: int = 0
    refused: Counter[str] = field(default_factory=Counter)
    unreadable: int = 0
    stopped: Refusal | None = None
    """The refusal for now that ended the pass early (the rest stays pending), if any."""


def replay_spool(
    spool: Spool, write: Write, on_batch: Callable[[ReplayReport], None] | None = None
) -> ReplayReport:
    """Replay every pending batch of an open spool, oldest first, until done or ClickHouse turns
    writes away for now."""
    report = ReplayReport()
    for path in spool.pending():
        try:
            batch = spool.read(path)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            _log.error("unreadable spool file %s moved to %s/: %s", path.name, FAILED_DIR, exc)
            spool.quarantine(path)
            report.unreadable += 1
            continue
        triage = Triage(batch.batch_id, batch.spans)
        while not triage.done:
            stopped = triage.step(write, 2 * len(batch.spans) + 1)
            if stopped is not None:
                report.stopped = stopped
                return report
        # Counted before the file goes, so whoever sees the spool empty also sees its spans counted.
        metrics.SPANS_WRITTEN.labels(source="spool").inc(triage.stored)
        report.refused.update(settle(spool, batch, triage))
        report.batches += 1
        report.stored += triage.stored
        if on_batch is not None:
            on_batch(report)
    return report
