"""Run the service in a background thread: used by the demo and by tests (a real uvicorn server)."""

from __future__ import annotations

import socket
import threading
import time

import uvicorn

from latencylens_collector.api.app import create_app
from latencylens_collector.settings import Settings
from latencylens_collector.storage.store import Store


class ServiceThread:
    """The collector on ``settings.host:settings.port`` (port 0 picks a free one) in a thread."""

    def __init__(self, settings: Settings, store: Store | None = None, log_level: str = "warning") -> None:
        self.settings = settings
        self.store = store if store is not None else Store(settings)
        self._log_level = log_level
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.port = settings.port

    @property
    def url(self) -> str:
        return f"http://{self.settings.host}:{self.port}"

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
        app = create_app(self.settings, self.store)
        config = uvicorn.Config(app, log_level=self._log_level, lifespan="on")
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
        self._server = self._thread = None

    def __enter__(self) -> ServiceThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
