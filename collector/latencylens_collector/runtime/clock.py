"""The injectable clock of one process (collector intake, API time windows, SLO evaluation).

Only for times that stay in this process: another process's clock may be ahead or behind.
"""

from __future__ import annotations

from collections.abc import Callable

Clock = Callable[[], int]
"""Returns the current time in integer ns since the epoch."""

__all__ = ["Clock"]
