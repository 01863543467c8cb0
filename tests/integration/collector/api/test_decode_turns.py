"""Decode slots go to projects in turn: a project with many exports waiting cannot put them all
ahead of another project's one (the hostile mix of bench/soak.py: forty burst senders beside four)."""

from __future__ import annotations

import asyncio

import pytest

from latencylens_collector.api.turns import FairTurns


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
