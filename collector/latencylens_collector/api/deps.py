"""Request dependencies as ``Annotated`` aliases; the objects live on ``app.state``."""

from __future__ import annotations

import threading
from datetime import datetime, timezone
from typing import Annotated

from fastapi import Depends, FastAPI, HTTPException, Request

from latencylens_collector.auth import KeyStore, Unauthorized, resolve_project
from latencylens_collector.runtime.clock import Clock
from latencylens_collector.settings import Settings
from latencylens_collector.storage.store import Store


def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


def get_store(request: Request) -> Store:
    store: Store = request.app.state.store
    return store


def get_now(request: Request) -> datetime:
    """Current time from the app's clock, so time windows are testable."""
    clock: Clock = request.app.state.clock
    return datetime.fromtimestamp(clock() / 1e9, tz=timezone.utc)


_KEY_STORE_LOCK = threading.Lock()


def app_key_store(app: FastAPI) -> KeyStore:
    """The app's API-key store (``app.state.keys``), opened from its settings on first use; the
    gRPC receiver passes it to :func:`resolve_project` too."""
    state = app.state
    keys: KeyStore | None = getattr(state, "keys", None)
    if keys is None:
        with _KEY_STORE_LOCK:
            keys = getattr(state, "keys", None)
            if keys is None:
                settings: Settings = state.settings
                keys = KeyStore(settings.metadata_url)
                state.keys = keys
    return keys


def get_key_store(request: Request) -> KeyStore:
    return app_key_store(request.app)


def get_project(request: Request) -> str:
    """The project the caller may see and write; every query filters on it. 401 without a valid
    key once keys exist."""
    headers = request.headers
    try:
        return resolve_project(headers.get("authorization"), get_key_store(request), headers.get("x-api-key"))
    except Unauthorized as exc:
        raise HTTPException(status_code=401, detail=str(exc), headers={"WWW-Authenticate": "Bearer"}) from exc


SettingsDep = Annotated[Settings, Depends(get_settings)]
StoreDep = Annotated[Store, Depends(get_store)]
NowDep = Annotated[datetime, Depends(get_now)]
ProjectDep = Annotated[str, Depends(get_project)]
"""The caller's project: pass it to every query and every insert."""
