"""Liveness."""

from __future__ import annotations

from fastapi import APIRouter

from latencylens_collector.models import Health

router = APIRouter(tags=["health"])


@router.get("/healthz", summary="Liveness check", description="Answers while the process serves HTTP.")
def healthz() -> Health:
    return Health()
