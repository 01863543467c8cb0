"""Serving the app with uvicorn: in the foreground (``latencylens serve``) or in a background thread
(the demo, tests), with the same limits either way.

Every connection gets deadlines (headers, body, idle keep-alive) and their number is capped below
the process's open-file limit (:mod:`~latencylens_collector.api.connections`); repeated warnings
are rate-limited (:mod:`~latencylens_collector.runtime.logs`).
"""

from __future__ import annotations

import logging
import resource
import socket
import threading
import time
from collections.abc import Callable
from typing import Final

import uvicorn
from fastapi import FastAPI

from latencylens_collector.api.app import create_app
from latencylens_collector.api.connections import BodyDeadline, GuardedH11Protocol
from latencylens_collector.runtime import logs
from latencylens_collector.settings import Settings
from latencylens_collector.storage.store import Store

_log = logging.getLogger(__name__)

FD_RESERVE: Final = 256
"""Open files kept free of HTTP connections: ClickHouse, gRPC, the spool, logs, the metadata DB."""
MAX_HEADER_BYTES: Final = 16 * 1024
"""Largest request line plus headers (h11's limit on an incomplete event); larger gets 400."""
LOG_FORMAT: Final = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def connection_limit(requested: int) -> int:
    """``requested``, lowered to leave :data:`FD_RESERVE` of the process's open-file limit."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return max(1, requested)
    return max(1, min(requested, soft - FD_RESERVE))


def raise_open_file_limit(wanted: int) -> None:
    """Raise the soft open-file limit towards ``wanted`` (at most the hard limit), as servers do."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError) as exc:
            _log.warning("could not raise the open-file limit to %d: %s", target, exc)


def uvicorn_config(app: FastAPI, settings: Settings, log_level: str = "info") -> uvicorn.Config:
    """uvicorn's configuration for the app: h11 with a header deadline and a connection cap, the
    body deadline around the app, the idle keep-alive timeout."""
    limit = connection_limit(settings.max_connections)
    if limit < settings.max_connections:
        _log.warning(
            "serving at most %d connections (%d asked; the open-file limit leaves no more)",
            limit,
            settings.max_connections,
        )
    return uvicorn.Config(
        BodyDeadline(app, settings.body_timeout_s),
        host=settings.host,
        port=settings.port,
        log_level=log_level,
        access_log=settings.access_log,  # one line per OTLP export drowns everything else
        lifespan="on",
        http=GuardedH11Protocol.configured(settings.header_timeout_s, limit),
        timeout_keep_alive=settings.keep_alive_timeout_s,
        h11_max_incomplete_event_size=MAX_HEADER_BYTES,
    )


def limit_repeated_logs(root_handler: bool = False) -> tuple[logs.RepeatFilter, list[logging.Handler]]:
    """Rate-limit repeated warnings on the root and uvicorn handlers. With ``root_handler`` the root
    logger gets a stderr handler when it has none, so the collector's own warnings are formatted and
    limited too (instead of going to logging's unfiltered last resort)."""
    root = logging.getLogger()
    if root_handler and not root.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter(LOG_FORMAT))
        root.addHandler(handler)
    repeat = logs.RepeatFilter()
    return repeat, logs.install(repeat)


def run_server(
    settings: Settings,
    log_level: str = "info",
    sock: socket.socket | None = None,
    on_started: Callable[[str], None] | None = None,
) -> None:
    """Serve in the foreground until interrupted (``latencylens serve``), on ``sock`` when given
    (already bound, so a busy port was reported before); ``on_started`` is called with the OTLP/gRPC
    receiver's status once the app has started and the socket listens."""
    raise_open_file_limit(settings.max_connections + FD_RESERVE)
    app = create_app(settings)
    config = uvicorn_config(app, settings, log_level)  # configures logging
    repeat, handlers = limit_repeated_logs(root_handler=True)
    try:
        _Server(config, lambda: on_started(grpc_status(app)) if on_started else None).run(
            sockets=[sock] if sock is not None else None
        )
    finally:
        logs.uninstall(repeat, handlers)


def grpc_status(app: FastAPI) -> str:
    """The OTLP/gRPC receiver as :func:`~latencylens_collector.api.lifespan.start_intake` left it."""
    return str(getattr(app.state, "grpc_status", "not started"))


class _Server(uvicorn.Server):
    """uvicorn's server, calling ``on_started`` once start-up succeeded and it listens."""

    def __init__(self, config: uvicorn.Config, on_started: Callable[[], None]) -> None:
        super().__init__(config)
        self._on_started = on_started

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started and not self.should_exit:
            self._on_started()


class ServiceThread:
    """The collector on ``settings.host:settings.port`` (port 0 picks a free one) in a thread."""

    def __init__(self, settings: Settings, store: Store | None = None, log_level: str = "warning") -> None:
        self.settings = settings
        self.store = store if store is not None else Store(settings)
        self._log_level = log_level
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._log_limit: tuple[logs.RepeatFilter, list[logging.Handler]] | None = None
        self.port = settings.port
        self.app: FastAPI | None = None

    @property
    def url(self) -> str:
        return f"http://{self.settings.host}:{self.port}"

    @property
    def grpc_status(self) -> str:
        """The OTLP/gRPC receiver: ``listening on HOST:PORT``, ``disabled`` or why it is not listening."""
        return grpc_status(self.app) if self.app is not None else "not started"

    def start(self, timeout_s: float = 30.0) -> ServiceThread:
        """Listen, then serve in a thread; returns once the app has started (migrations applied).

        Raises RuntimeError when the address cannot be bound, TimeoutError when start-up hangs.
        """
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.settings.host, self.settings.port))
        except OSError as exc:
            sock.close()
            raise RuntimeError(f"cannot listen on {self.settings.host}:{self.settings.port}: {exc}") from exc
        self.port = sock.getsockname()[1]
        self.app = app = create_app(self.settings, self.store)
        config = uvicorn_config(app, self.settings, self._log_level)
        self._log_limit = limit_repeated_logs()
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, name="latencylens-collector", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._server.started:
            if not self._thread.is_alive():
                raise RuntimeError("the collector stopped during start-up")
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError(f"the collector did not start within {timeout_s} s")
            time.sleep(0.01)
        return self

    def stop(self, timeout_s: float = 10.0) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout_s)
        if self._log_limit is not None:
            logs.uninstall(*self._log_limit)
            self._log_limit = None
        self._server = self._thread = None

    def __enter__(self) -> ServiceThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
