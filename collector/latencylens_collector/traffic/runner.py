"""Runs a plan: sends each request at its time (open loop) or keeps N in flight (closed loop).

Requests run on worker threads (the SDK calls are blocking); the calling thread only keeps time.
An open-loop request is sent at its offset unless ``max_in_flight`` requests are still running,
when it waits for one to finish (counted as ``late``: the endpoint, or this machine, could not keep
up with the schedule). :meth:`Runner.stop` (or Ctrl-C in the calling thread) sends nothing more and
waits for the requests in flight, so every request that started also finishes and is kept; a
second Ctrl-C stops waiting. The clock and the wait are injectable for tests.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Final

from latencylens_collector.traffic.schedule import NS_PER_S, Arrival, Plan
from latencylens_collector.traffic.shape import RequestShape

MAX_IN_FLIGHT: Final = 256
"""Most requests one run keeps open at once (open loop); threads are cheap, sockets are not."""


@dataclass
class Progress:
    """Counts so far: requests ``started``, ``finished`` (ok or not), ``failed``, ``late``."""

    planned: int
    started: int = 0
    finished: int = 0
    failed: int = 0
    late: int = 0
    elapsed_s: float = 0.0
    interrupted: bool = False
    errors: dict[str, int] = field(default_factory=dict)

    @property
    def in_flight(self) -> int:
        return self.started - self.finished

    def line(self) -> str:
        text = (
            f"sent {self.started}/{self.planned}  done {self.finished}  failed {self.failed}  "
            f"in flight {self.in_flight}  {self.elapsed_s:.1f} s"
        )
        return text + (f"  late {self.late}" if self.late else "")


class Runner:
    """Sends ``plan`` with ``send``; ``on_progress`` is called (from any thread) after each change."""

    def __init__(
        self,
        plan: Plan,
        send: Callable[[RequestShape], None],
        *,
        on_progress: Callable[[Progress], None] | None = None,
        max_in_flight: int = MAX_IN_FLIGHT,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.plan = plan
        self._send = send
        self._on_progress = on_progress or (lambda progress: None)
        self._clock = clock
        self._stop = threading.Event()
        self._interrupted = False
        """Set by the first Ctrl-C (a plain flag: a signal handler must not take the Event's lock)."""
        self._lock = threading.Lock()
        self._slots = threading.Semaphore(plan.concurrency or max_in_flight)
        self._workers = plan.concurrency or max_in_flight
        self.progress = Progress(planned=len(plan.arrivals))
        self._started_at = 0.0

    def stop(self) -> None:
        """Send nothing more; requests in flight finish."""
        self._stop.set()

    def run(self) -> Progress:
        """Send the plan; returns the final counts (``interrupted`` after Ctrl-C or :meth:`stop`)."""
        self._started_at = self._clock()
        futures: list[Future[None]] = []
        pool = ThreadPoolExecutor(max_workers=self._workers, thread_name_prefix="replay")
        try:
            with self._first_sigint_stops():
                try:
                    self._dispatch(pool, futures)
                except KeyboardInterrupt:
                    self._stop.set()
                self._wait(futures)
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
        with self._lock:
            self.progress.interrupted = self._stop.is_set() or self._interrupted
            self.progress.elapsed_s = self._clock() - self._started_at
            return self.progress

    def _dispatch(self, pool: ThreadPoolExecutor, futures: list[Future[None]]) -> None:
        deadline = self._deadline()
        for arrival in self.plan.arrivals:
            if not self._wait_until(arrival, deadline):
                return
            if not self._slots.acquire(blocking=False):
                with self._lock:
                    self.progress.late += 0 if self.plan.closed_loop else 1
                while not self._slots.acquire(timeout=0.1):
                    if self._stopped(deadline):
                        return
            if self._stopped(deadline):
                self._slots.release()
                return
            with self._lock:
                self.progress.started += 1
            futures.append(pool.submit(self._one, arrival.shape))
            self._report()

    def _deadline(self) -> float | None:
        duration = self.plan.duration_ns
        return None if duration is None else self._started_at + duration / NS_PER_S

    @contextmanager
    def _first_sigint_stops(self) -> Iterator[None]:
        """In the main thread, the first Ctrl-C only marks the run stopped: the dispatcher sees it
        between two requests, never halfway through counting one (a KeyboardInterrupt there could
        leave a request sent but not waited for). A second Ctrl-C raises as usual."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return

        def on_sigint(signum: int, frame: object) -> None:
            if self._interrupted:
                raise KeyboardInterrupt
            self._interrupted = True

        previous = signal.signal(signal.SIGINT, on_sigint)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)

    def _stopped(self, deadline: float | None) -> bool:
        if self._interrupted or self._stop.is_set():
            return True
        return deadline is not None and self._clock() >= deadline

    def _wait_until(self, arrival: Arrival, deadline: float | None) -> bool:
        """Sleep until ``arrival`` is due; False when the run stops first."""
        due = self._started_at + arrival.at_ns / NS_PER_S
        while True:
            if self._stopped(deadline):
                return False
            remaining = due - self._clock()
            if remaining <= 0:
                return True
            self._stop.wait(min(remaining, 0.25))

    def _one(self, shape: RequestShape) -> None:
        error: str | None = None
        try:
            self._send(shape)
        except Exception as exc:  # one failed request never stops the run; it is counted
            error = type(exc).__name__
        finally:
            self._slots.release()
            with self._lock:
                self.progress.finished += 1
                if error is not None:
                    self.progress.failed += 1
                    self.progress.errors[error] = self.progress.errors.get(error, 0) + 1
            self._report()

    def _wait(self, futures: list[Future[None]]) -> None:
        for future in futures:
            try:
                future.result()
            except KeyboardInterrupt:
                self._stop.set()
                return  # a second Ctrl-C: stop waiting for what is in flight

    def _report(self) -> None:
        with self._lock:
            self.progress.elapsed_s = self._clock() - self._started_at
            snapshot = Progress(**{**self.progress.__dict__, "errors": dict(self.progress.errors)})
        self._on_progress(snapshot)


__all__ = ["MAX_IN_FLIGHT", "Progress", "Runner"]
