"""Decode slots go to projects in turn: a project with many exports waiting cannot put them all
ahead of another project's one (the hostile mix of bench/soak.py: forty burst senders beside four)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

import pytest

from latencylens_collector.pipeline.turns import FairSlots, FairTurns


async def _run(turns: FairTurns, arrivals: list[str], order: list[str], gate: asyncio.Event) -> None:
    async def export(project: str, index: int) -> None:
        async with turns.slot(project):
            order.append(f"{project}{index}")
            await gate.wait()  # hold the slot until the test lets the next one go

    tasks = []
    for index, project in enumerate(arrivals):
        tasks.append(asyncio.create_task(export(project, index)))
        await asyncio.sleep(0)  # each arrives, in this order, before the next
    for _ in arrivals:
        gate.set()
        await asyncio.sleep(0)
        gate.clear()
        await asyncio.sleep(0)
    gate.set()
    await asyncio.gather(*tasks)


async def test_a_flooding_project_takes_turns_with_one_that_sends_little() -> None:
    turns = FairTurns(1)
    order: list[str] = []
    arrivals = ["a"] * 6 + ["b", "c"]  # a floods first; b and c arrive after all of a's
    await _run(turns, arrivals, order, asyncio.Event())
    # a0 holds the slot; then the waiting projects in turn: a, b, c, a, a, ... (a FIFO would
    # have served b and c after all six of a's)
    assert order[:4] == ["a0", "a1", "b6", "c7"]
    assert order[4:] == ["a2", "a3", "a4", "a5"]
    assert turns.busy == 0


async def test_a_waiter_that_gives_up_leaves_no_trace() -> None:
    turns = FairTurns(1)
    release = asyncio.Event()

    async def hold() -> None:
        async with turns.slot("a"):
            await release.wait()

    holder = asyncio.create_task(hold())
    await asyncio.sleep(0)
    waiting = asyncio.create_task(turns.slot("b").__aenter__())
    await asyncio.sleep(0)
    assert turns.waiting("b") == 1
    waiting.cancel()  # the client went away while waiting
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert turns.waiting("b") == 0
    release.set()
    await holder
    assert turns.busy == 0
    async with turns.slot("c"):  # the slot is free again
        assert turns.busy == 1


def _wait(predicate: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 10
    while not predicate():
        assert time.monotonic() < deadline, "a thread never got where it should"
        time.sleep(0.01)


def test_threads_take_turns_the_same_way() -> None:
    slots = FairSlots(1)
    order: list[str] = []
    names = ["a0", "a1", "a2", "a3", "b4"]
    gates = {name: threading.Event() for name in names}

    def export(name: str) -> None:
        with slots.slot(name[0]):
            order.append(name)
            gates[name].wait(10)

    threads = [threading.Thread(target=export, args=(name,)) for name in names]
    for queued, thread in enumerate(threads):  # a0 holds the slot; a1-a3, then b4 wait in order
        thread.start()
        _wait(lambda queued=queued: len(order) + slots.waiting("a") + slots.waiting("b") == queued + 1)
    for step in range(len(names)):  # let the holder go; the next one takes the slot
        gates[order[step]].set()
        _wait(lambda step=step: len(order) == min(step + 2, len(names)) or step == len(names) - 1)
    for thread in threads:
        thread.join(10)
    assert order == ["a0", "a1", "b4", "a2", "a3"]  # a FIFO would serve b4 last
    assert slots.busy == 0


async def test_while_another_project_is_active_a_flood_leaves_it_a_slot() -> None:
    """Two slots. Alone, project a holds both; once b has asked, a holds at most one, so b's next
    export starts at once instead of waiting for one of a's (long) decodes to end."""
    now = [0.0]
    turns = FairTurns(2, monotonic=lambda: now[0])
    holding: list[str] = []
    gates: dict[str, asyncio.Event] = {}

    async def export(name: str) -> None:
        gates[name] = asyncio.Event()
        async with turns.slot(name[0]):
            holding.append(name)
            await gates[name].wait()
            holding.remove(name)

    async def step() -> None:
        for _ in range(5):
            await asyncio.sleep(0)

    tasks = [asyncio.create_task(export(name)) for name in ("a0", "a1")]
    await step()
    assert holding == ["a0", "a1"]  # alone: both slots
    tasks += [asyncio.create_task(export(name)) for name in ("b0", "a2", "a3")]
    await step()
    gates["a0"].set()
    await step()
    assert holding == ["a1", "b0"]  # b's turn first
    gates["b0"].set()
    await step()
    assert holding == ["a1"]  # b is active: a may hold one slot only, the other stays free for b
    tasks.append(asyncio.create_task(export("b1")))
    await step()
    assert holding == ["a1", "b1"]  # b's next export did not wait
    gates["b1"].set()
    gates["a1"].set()
    await step()
    assert holding == ["a2"]
    now[0] += 11.0  # b quiet for longer than ACTIVE_S: a may hold both again
    tasks.append(asyncio.create_task(export("a4")))
    gates["a2"].set()
    await step()
    assert holding == ["a3", "a4"]
    gates["a3"].set()
    gates["a4"].set()
    await asyncio.gather(*tasks)
    assert turns.busy == 0
