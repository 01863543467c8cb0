"""Decode slots shared fairly between projects: one project's flood cannot hold them all.

Decoding an export is Python holding the GIL, so only a few run at once (``capacity``). A plain
FIFO of waiters lets a project with forty exports in flight put all forty ahead of another
project's one; here waiters queue per project and free slots go to the projects in turn (round
robin), each project's exports in arrival order. The writer's queue takes projects in turn too,
with bounded turns (:mod:`latencylens_collector.pipeline.queue`), so at every step an export waits
for at most one bounded share of each other project's work.

:class:`FairTurns` is for the event loop (OTLP/HTTP: acquire and release run on the loop that
serves the requests, no locks); :class:`FairSlots` is the same for threads (OTLP/gRPC's workers).
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager


class FairTurns:
    """At most ``capacity`` holders at once; waiting projects are served in turn."""

    def __init__(self, capacity: int) -> None:
        self.capacity = max(1, capacity)
        self._busy = 0
        self._waiting: dict[str, deque[asyncio.Future[None]]] = {}
        self._turns: deque[str] = deque()
        """Projects with waiters, the next to serve first."""

    @property
    def busy(self) -> int:
        return self._busy

    def waiting(self, project: str) -> int:
        return len(self._waiting.get(project, ()))

    @asynccontextmanager
    async def slot(self, project: str) -> AsyncIterator[None]:
        """Hold a slot for ``project`` while the block runs."""
        await self._acquire(project)
        try:
            yield
        finally:
            self._release()

    async def _acquire(self, project: str) -> None:
        if self._busy < self.capacity and not self._turns:
            self._busy += 1
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        queue = self._waiting.get(project)
        if queue is None:
            queue = self._waiting[project] = deque()
            self._turns.append(project)
        queue.append(waiter)
        try:
            await waiter  # the slot is counted for us before we are woken
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self._release()  # woken and cancelled at once: hand the slot on
            else:
                self._forget(project, waiter)
            raise

    def _forget(self, project: str, waiter: asyncio.Future[None]) -> None:
        queue = self._waiting.get(project)
        if queue is None or waiter not in queue:
            return
        queue.remove(waiter)
        if not queue:
            del self._waiting[project]
            self._turns.remove(project)

    def _release(self) -> None:
        self._busy -= 1
        while self._busy < self.capacity and self._turns:
            project = self._turns.popleft()
            queue = self._waiting[project]
            waiter = queue.popleft()
            if queue:
                self._turns.append(project)  # its next export waits for the others' turns
            else:
                del self._waiting[project]
            if not waiter.done():
                self._busy += 1
                waiter.set_result(None)


class FairSlots:
    """:class:`FairTurns` for threads: at most ``capacity`` holders, waiting projects in turn."""

    def __init__(self, capacity: int) -> None:
        self.capacity = max(1, capacity)
        self._busy = 0
        self._waiting: dict[str, deque[list[bool]]] = {}
        self._turns: deque[str] = deque()
        self._cond = threading.Condition()

    @property
    def busy(self) -> int:
        return self._busy

    def waiting(self, project: str) -> int:
        with self._cond:
            return len(self._waiting.get(project, ()))

    @contextmanager
    def slot(self, project: str) -> Iterator[None]:
        """Hold a slot for ``project`` while the block runs (released however it ends)."""
        with self._cond:
            if self._busy < self.capacity and not self._turns:
                self._busy += 1
            else:
                granted = [False]  # set by the releasing thread, which counts the slot for us
                queue = self._waiting.get(project)
                if queue is None:
                    queue = self._waiting[project] = deque()
                    self._turns.append(project)
                queue.append(granted)
                while not granted[0]:
                    self._cond.wait()
        try:
            yield
        finally:
            with self._cond:
                self._busy -= 1
                while self._busy < self.capacity and self._turns:
                    turn = self._turns.popleft()
                    waiters = self._waiting[turn]
                    waiters.popleft()[0] = True
                    self._busy += 1
                    if waiters:
                        self._turns.append(turn)
                    else:
                        del self._waiting[turn]
                self._cond.notify_all()
