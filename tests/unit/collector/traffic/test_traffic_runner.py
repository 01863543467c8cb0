"""The runner: closed loops keep N in flight, failures are counted, a stop or Ctrl-C sends nothing
more and keeps every request that started."""

from __future__ import annotations

import threading

from latencylens_collector.traffic.runner import Progress, Runner
from latencylens_collector.traffic.schedule import plan
from latencylens_collector.traffic.shape import RequestShape

MS = 1_000_000


def shapes(count: int, gap_ms: int = 0) -> list[RequestShape]:
    return [RequestShape(offset_ns=i * gap_ms * MS, input_tokens=i, output_tokens=1) for i in range(count)]


def test_closed_loop_keeps_exactly_the_concurrency_in_flight() -> None:
    lock = threading.Lock()
    in_flight = most = 0
    together = threading.Barrier(3)  # the first three must run at the same time, or this breaks

    def send(shape: RequestShape) -> None:
        nonlocal in_flight, most
        with lock:
            in_flight += 1
            most = max(most, in_flight)
        if shape.input_tokens < 3:
            together.wait(timeout=10)
        threading.Event().wait(0.005)
        with lock:
            in_flight -= 1

    progress = Runner(plan(shapes(12), concurrency=3), send).run()
    assert (progress.started, progress.finished, progress.failed) == (12, 12, 0)
    assert most == 3
    assert not progress.interrupted


def test_failures_are_counted_and_do_not_stop_the_run() -> None:
    def send(shape: RequestShape) -> None:
        if shape.input_tokens % 2:
            raise ConnectionError("refused")

    progress = Runner(plan(shapes(6), concurrency=2), send).run()
    assert (progress.finished, progress.failed) == (6, 3)
    assert progress.errors == {"ConnectionError": 3}


def test_stop_sends_nothing_more_and_keeps_what_started() -> None:
    finished: list[int] = []
    runner: Runner

    def send(shape: RequestShape) -> None:
        if shape.input_tokens == 1:
            runner.stop()
            threading.Event().wait(0.05)  # still in flight when the stop comes: it must finish
        finished.append(shape.input_tokens)

    # Arrivals 200 ms apart: the third is due well after the second has stopped the run.
    runner = Runner(plan(shapes(10, gap_ms=200)), send)
    progress = runner.run()
    assert progress.interrupted
    assert (progress.started, progress.finished) == (2, 2)
    assert sorted(finished) == [0, 1]


def test_ctrl_c_in_the_calling_thread_stops_cleanly() -> None:
    main = threading.current_thread()
    release = threading.Event()
    seen: list[Progress] = []

    def send(shape: RequestShape) -> None:
        release.wait(5)

    def on_progress(progress: Progress) -> None:
        seen.append(progress)
        if threading.current_thread() is main and progress.started == 2:
            release.set()
            raise KeyboardInterrupt

    progress = Runner(plan(shapes(5), concurrency=2), send, on_progress=on_progress).run()
    assert progress.interrupted
    assert (progress.started, progress.finished, progress.failed) == (2, 2, 0)
    assert seen[-1].finished == 2
