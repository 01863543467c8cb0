"""Alert lifecycle as one pure function: pending → firing → resolved, one open alert per SLO.

Dedupe follows from the shape: while an alert is open, a breach that persists yields no step, so
nothing new is stored or sent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

PENDING: Final = "pending"
FIRING: Final = "firing"
RESOLVED: Final = "resolved"
OPEN_STATES: Final = frozenset({PENDING, FIRING})


@dataclass(frozen=True)
class Step:
    """One transition to record."""

    state: str
    note: str


def advance(
    state: str | None, started_at_ns: int | None, breached: bool | None, now_ns: int, for_ns: int
) -> list[Step]:
    """Transitions of the SLO's open alert (``state`` None: there is none) after one evaluation.

    ``breached`` None means too few requests to judge: nothing new fires, and an open alert is
    resolved because the breach can no longer be confirmed.
    """
    if state is None:
        if not breached:
            return []
        steps = [Step(PENDING, "condition true")]
        if for_ns <= 0:
            steps.append(Step(FIRING, "condition true (no hold duration)"))
        return steps
    if state not in OPEN_STATES:
        raise ValueError(f"alert in state {state!r} is not open")
    if breached is None:
        return [Step(RESOLVED, "too few requests to evaluate")]
    if not breached:
        note = "condition cleared" if state == FIRING else "condition cleared before firing"
        return [Step(RESOLVED, note)]
    if state == PENDING and started_at_ns is not None and now_ns - started_at_ns >= for_ns:
        return [Step(FIRING, f"condition true for {(now_ns - started_at_ns) // 1_000_000_000} s")]
    return []
