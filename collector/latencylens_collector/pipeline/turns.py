"""Decode slots shared fairly between projects: one project's flood cannot hold them all.

Decoding an export is Python holding the GIL, so only a few run at once (``capacity``). A plain
FIFO of waiters lets a project with forty exports in flight put all forty ahead of another
project's one; here waiters queue per project and free slots go to the projects in turn (round
robin), each project's exports in arrival order, and while another project is active (it asked
for a slot within :data:`ACTIVE_S`) no project holds more than ``capacity - 1`` slots: the other
one's next export starts decoding at once instead of waiting for a flood's decode (an 8,000-span
export takes a second of the GIL on a loaded machine). The writer's queue takes projects in turn too,
with bounded turns (:mod:`latencylens_collector.pipeline.queue`), so at every step an export waits
for at most one bounded share of each other project's work.

:class:`FairTurns` is for the event loop (OTLP/HTTP: acquire and release run on the loop that
serves the requests, no locks); :class:`FairSlots` is the same for threads (OTLP/gRPC's workers).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter, deque
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Final, Generic, TypeVar

W = TypeVar("W")
ACTIVE_S: Final = 10.0
"""A project that asked for a slot this recently counts as active: no other holds every slot."""


class _Shares:
    """Who holds how many slots, who asked lately, and so who may take one more."""

    def __init__(self, capacity: int, monotonic: Callable[[], float]) -> None:
        self.capacity = max(1, capacity)
        self.held: Counter[str] = Counter()
        self._seen: dict[str, float] = {}
        self._monotonic = monotonic

    def seen(self, project: str) -> None:
        self._seen[project] = self._monotonic()

    def may_take(self, project: str) -> bool:
        """Whether ``project`` may hold one more slot: all of them while no other project is
        active, else all but one (one with a single slot)."""
        if self.held[project] < max(1, self.capacity - 1):
            return True
        since = self._monotonic() - ACTIVE_S
        for other, at in list(self._seen.items()):
            if at < since:
                del self._seen[other]
        return not any(other != project for other in self._seen)

    def next_turn(self, turns: deque[str]) -> str | None:
        """The first project in ``turns`` that may take a slot (taken out of ``turns``)."""
        for project in turns:
            if self.may_take(project):
                turns.remove(project)
                return project
        return None


class _Queue(Generic[W]):
    """What both front ends keep: slots held, and per-project waiters served in turn. Not
    thread-safe: :class:`FairTurns` uses it from one event loop, :class:`FairSlots` under its lock."""

    def __init__(self, capacity: int, monotonic: Callable[[], float]) -> None:
        self.shares = _Shares(capacity, monotonic)
        self.capacity = self.shares.capacity
        self.busy = 0
        self.waiting: dict[str, deque[W]] = {}
        self.turns: deque[str] = deque()
        """Projects with waiters, the next to serve first."""

    def try_take(self, project: str) -> bool:
        """Take a slot at once when one is free, nobody waits and ``project`` is under its share."""
        self.shares.seen(project)
        if self.busy < self.capacity and not self.turns and self.shares.may_take(project):
            self.take(project)
            return True
        return False

    def take(self, project: str) -> None:
        self.busy += 1
        self.shares.held[project] += 1

    def release(self, project: str) -> None:
        self.busy -= 1
        self.shares.held[project] -= 1

    def wait(self, project: str, waiter: W) -> None:
        queue = self.waiting.get(project)
        if queue is None:
            queue = self.waiting[project] = deque()
            self.turns.append(project)
        queue.append(waiter)

    def forget(self, project: str, waiter: W) -> None:
        queue = self.waiting.get(project)
        if queue is None or waiter not in queue:
            return
        queue.remove(waiter)
        if not queue:
            del self.waiting[project]
            self.turns.remove(project)

    def hand_on(self, grant: Callable[[W], bool]) -> None:
        """Free slots to waiting projects in turn, skipping those at their share; ``grant`` wakes
        a waiter (False: it is gone, and takes no slot)."""
        while self.busy < self.capacity:
            turn = self.shares.next_turn(self.turns)
            if turn is None:
                return
            queue = self.waiting[turn]
            waiter = queue.popleft()
            if queue:
                self.turns.append(turn)  # its next export waits for the others' turns
            else:
                del self.waiting[turn]
            if grant(waiter):
                self.take(turn)


class FairTurns:
    """At most ``capacity`` holders at once; waiting projects are served in turn."""

    def __init__(self, capacity: int, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._queue: _Queue[asyncio.Future[None]] = _Queue(capacity, monotonic)
        self.capacity = self._queue.capacity

    @property
    def busy(self) -> int:
        return self._queue.busy

    def waiting(self, project: str) -> int:
        return len(self._queue.waiting.get(project, ()))

    @asynccontextmanager
    async def slot(self, project: str) -> AsyncIterator[None]:
        """Hold a slot for ``project`` while the block runs."""
        await self._acquire(project)
        try:
            yield
        finally:
            self._release(project)

    async def _acquire(self, project: str) -> None:
        if self._queue.try_take(project):
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.wait(project, waiter)
        self._queue.hand_on(_wake)  # a slot may be free that the projects ahead may not take
        try:
            await waiter  # the slot is counted for us before we are woken
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self._release(project)  # woken and cancelled at once: hand the slot on
            else:
                self._queue.forget(project, waiter)
            raise

    def _release(self, project: str) -> None:
        self._queue.release(project)
        self._queue.hand_on(_wake)


def _wake(waiter: asyncio.Future[None]) -> bool:
    if waiter.done():
        return False
    waiter.set_result(None)
    return True


class FairSlots:
    """:class:`FairTurns` for threads: at most ``capacity`` holders, waiting projects in turn."""

    def __init__(self, capacity: int, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._queue: _Queue[list[bool]] = _Queue(capacity, monotonic)
        self.capacity = self._queue.capacity
        self._cond = threading.Condition()

    @property
    def busy(self) -> int:
        return self._queue.busy

    def waiting(self, project: str) -> int:
        with self._cond:
            return len(self._queue.waiting.get(project, ()))

    @contextmanager
    def slot(self, project: str) -> Iterator[None]:
        """Hold a slot for ``project`` while the block runs (released however it ends)."""
        with self._cond:
            if not self._queue.try_take(project):
                granted = [False]  # set by the releasing thread, which counts the slot for us
                self._queue.wait(project, granted)
                self._hand_on()  # a slot may be free that the projects ahead may not take
                while not granted[0]:
                    self._cond.wait()
        try:
            yield
        finally:
            with self._cond:
                self._queue.release(project)
                self._hand_on()

    def _hand_on(self) -> None:
        """Lock held."""
        self._queue.hand_on(_grant)
        self._cond.notify_all()


def _grant(granted: list[bool]) -> bool:
    granted[0] = True
    return True
