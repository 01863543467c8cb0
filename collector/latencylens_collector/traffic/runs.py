"""A replay run's identity: its id and the service name its spans are exported under."""

from __future__ import annotations

import secrets
from datetime import datetime, timezone


def new_run_id(now: datetime | None = None) -> str:
    """``20261201T101502-3fa2``: when it started (UTC, to the second) and 4 random hex digits."""
    moment = now or datetime.now(timezone.utc)
    return f"{moment.astimezone(timezone.utc):%Y%m%dT%H%M%S}-{secrets.token_hex(2)}"


def service_name(run_id: str) -> str:
    """The ``service.name`` of a run's spans, so every view can pick it out (``--service``)."""
    return f"replay-{run_id}"


__all__ = ["new_run_id", "service_name"]
