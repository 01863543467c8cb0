"""Request dependencies as ``Annotated`` aliases; the objects live on ``app.state``."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Annotated

from fastapi import Depends, Request

from latencylens_collector.ingest import Clock, Ingestor
from latencylens_collector.settings import Settings
from latencylens_collector.storage import Store

RETRY_AFTER_SECONDS = 5
"""Seconds a client should wait before retrying when storage is unavailable."""


def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


def get_store(request: Request) -> Store:
    store: Store = request.app.state.store
    return store


def get_ingestor(request: Request) -> Ingestor:
    ingestor: Ingestor = request.app.state.ingestor
    return ingestor


def get_now(request: Request) -> datetime:
    """Current time from the app's clock, so time windows are testable."""
    clock: Clock = request.app.state.clock
    return datetime.fromtimestamp(clock() / 1e9, tz=timezone.utc)


DEFAULT_PROJECT = "default"


def get_project(request: Request) -> str:
    """The project the caller may see and write; every query filters on it."""
    return DEFAULT_PROJECT


SettingsDep = Annotated[Settings, Depends(get_settings)]
StoreDep = Annotated[Store, Depends(get_store)]
IngestorDep = Annotated[Ingestor, Depends(get_ingestor)]
NowDep = Annotated[datetime, Depends(get_now)]
ProjectDep = Annotated[str, Depends(get_project)]
"""The caller's project: pass it to every query and every insert."""
