"""Projects and API keys: who may write and read which project's data.

Without any key the collector runs in local mode: every caller is project ``default`` and
``latencylens serve`` listens on loopback only. Once a key exists, every ingest and query request
needs one (``Authorization: Bearer <key>`` or ``x-api-key: <key>``) and sees its key's project only.
"""

from __future__ import annotations

from latencylens_collector.auth.access import (
    LOOPBACK_HOSTS,
    LocalModeError,
    Unauthorized,
    check_listen_address,
    presented_key,
    project_for,
    resolve_project,
)
from latencylens_collector.auth.store import ApiKey, KeyStore

__all__ = [
    "LOOPBACK_HOSTS",
    "ApiKey",
    "KeyStore",
    "LocalModeError",
    "Unauthorized",
    "check_listen_address",
    "presented_key",
    "project_for",
    "resolve_project",
]
