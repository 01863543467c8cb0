"""Host-header allow-list for a collector without API keys: DNS rebinding cannot reach the API.

Without keys every caller is the ``default`` project, and the collector trusts that only this
machine can reach it. A web page can break that trust: its own name made to resolve to 127.0.0.1
(DNS rebinding), the visitor's browser sends it requests that reach the collector, with the page's
name in ``Host``. So, while no key exists, a request is served only when its ``Host`` is
``localhost``, the listen address, a name of ``allowed_hosts``, or an IP address (a rebinding page
can only send its own name); any other is answered 421. Once keys exist the key decides, as
for any request. ``allowed_hosts = *`` turns the check off.
"""

from __future__ import annotations

import ipaddress
import json
import time
from collections.abc import Callable
from typing import Final

import anyio
from starlette.types import ASGIApp, Receive, Scope, Send

from latencylens_collector.auth import LOOPBACK_HOSTS
from latencylens_collector.settings import Settings, env_var

ANY_HOST: Final = "*"
KEYS_CHECK_S: Final = 2.0
"""How long "no keys yet" is believed before the key store is asked again (keys never go away)."""


def allowed_host_names(settings: Settings) -> frozenset[str] | None:
    """Host names served in local mode, lower case; None when the check is off."""
    extra = {name.strip().lower().rstrip(".") for name in settings.allowed_hosts}
    if ANY_HOST in extra:
        return None
    return frozenset({*LOOPBACK_HOSTS, settings.host.lower().strip("[]"), *extra} - {""})


def host_name(header: str) -> str:
    """The name in a ``Host`` header, without port, brackets or a trailing dot, in lower case."""
    value = header.strip().lower()
    if value.startswith("["):  # [::1]:4318
        return value[1:].split("]", 1)[0]
    if value.count(":") == 1:
        value = value.split(":", 1)[0]
    return value.rstrip(".")


def is_ip_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


class HostAllowList:
    """ASGI middleware refusing, while no API key exists, requests whose ``Host`` is not allowed."""

    def __init__(
        self,
        app: ASGIApp,
        settings: Settings,
        keys_enabled: Callable[[], bool],
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.app = app
        self.allowed = allowed_host_names(settings)
        self._keys_enabled = keys_enabled
        self._monotonic = monotonic
        self._keys_on = False
        self._keys_checked_at = float("-inf")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.allowed is None:
            await self.app(scope, receive, send)
            return
        header = next((value for key, value in scope["headers"] if key == b"host"), None)
        name = host_name(header.decode("latin-1")) if header is not None else ""
        if not name or name in self.allowed or is_ip_address(name) or await self._keys_in_use():
            await self.app(scope, receive, send)
            return
        await _misdirected(send, name)

    async def _keys_in_use(self) -> bool:
        """Whether keys exist; only asked for requests naming another host (the key store is a
        database), and believed for :data:`KEYS_CHECK_S` when the answer is no."""
        if not self._keys_on and self._monotonic() - self._keys_checked_at >= KEYS_CHECK_S:
            self._keys_on = await anyio.to_thread.run_sync(self._keys_enabled)
            self._keys_checked_at = self._monotonic()
        return self._keys_on


async def _misdirected(send: Send, name: str) -> None:
    detail = (
        f"this collector has no API keys and serves only localhost and its own address, not host "
        f"{name!r}; add the name to {env_var('allowed_hosts')} (or create an API key)"
    )
    body = json.dumps({"detail": detail}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 421, "headers": headers})
    await send({"type": "http.response.body", "body": body})
