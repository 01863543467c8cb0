"""Deciding a caller's project, and whether a keyless collector may listen on an address."""

from __future__ import annotations

import ipaddress
from typing import Final

from latencylens_collector.analysis.records import DEFAULT_PROJECT
from latencylens_collector.auth.store import KeyStore

LOOPBACK_HOSTS: Final = frozenset({"localhost", "127.0.0.1", "::1"})
BEARER: Final = "bearer "


class Unauthorized(Exception):
    """No valid API key; the message says what was wrong (never echoes the key)."""


class LocalModeError(Exception):
    """A collector without API keys was asked to listen beyond this machine."""


def presented_key(authorization: str | None, x_api_key: str | None = None) -> str | None:
    """The key from ``Authorization: Bearer <key>``, else from ``x-api-key``."""
    if authorization and authorization[: len(BEARER)].lower() == BEARER:
        key = authorization[len(BEARER) :].strip()
        if key:
            return key
    if x_api_key and x_api_key.strip():
        return x_api_key.strip()
    return None


def resolve_project(
    authorization_header: str | None, keys: KeyStore | None = None, x_api_key: str | None = None
) -> str:
    """The project of a caller from its ``Authorization: Bearer`` (or ``x-api-key``) header;
    shared by OTLP/HTTP, the query API and OTLP/gRPC. Without a key store the collector is in
    local mode and every caller is ``default``. Raises :class:`Unauthorized` for a missing or
    invalid key."""
    return project_for(keys, presented_key(authorization_header, x_api_key))


def project_for(keys: KeyStore | None, raw_key: str | None) -> str:
    """The caller's project. Local mode (no key store, or no key ever created): ``default``.
    With keys: the key's project; raises :class:`Unauthorized` for a missing, unknown or revoked key."""
    if keys is None or not keys.enabled():
        return DEFAULT_PROJECT
    if raw_key is None:
        raise Unauthorized(
            "missing API key: send 'Authorization: Bearer <key>' or 'x-api-key: <key>' "
            "(create one with 'latencylens keys create --project NAME')"
        )
    project = keys.authenticate(raw_key)
    if project is None:
        raise Unauthorized("invalid or revoked API key")
    return project


def is_loopback(host: str) -> bool:
    if host.lower() in LOOPBACK_HOSTS:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_listen_address(host: str, keys_enabled: bool, allow_unauthenticated: bool = False) -> None:
    """Refuse to serve keyless (everyone is project ``default``) on a non-loopback interface."""
    if keys_enabled or allow_unauthenticated or is_loopback(host):
        return
    raise LocalModeError(
        f"refusing to listen on {host}: no API keys exist, so anyone who can reach the collector "
        "could read and write all data. Create a key first ('latencylens keys create --project "
        "NAME'), listen on 127.0.0.1, or set LATENCYLENS_ALLOW_UNAUTHENTICATED=true when a private "
        "network already restricts access."
    )
