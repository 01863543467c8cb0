"""Selecting recorded requests from stored request rows: window, filters, sample, project, order."""

from __future__ import annotations

import httpx
from queries_data import MS, S, request_row

from latencylens_collector.queries.scope import Filters
from latencylens_collector.queries.times import Window
from latencylens_collector.storage.store import Store
from latencylens_collector.traffic.shape import select_shapes

T0 = 1_790_000_000 * S


def seed_rows(store: Store) -> None:
    rows = [
        request_row(
            n, T0 + n * 250 * MS, {"decode": 50}, input_tokens=100 + n, output_tokens=10 + n, cached=n
        )
        for n in range(1, 21)
    ]
    rows += [
        request_row(50, T0 + 300 * MS, {"decode": 50}, route="POST /it's", input_tokens=7, output_tokens=3),
        request_row(51, T0 + 400 * MS, {"decode": 50}, model="m2", input_tokens=9, output_tokens=4),
        request_row(52, T0 + 500 * MS, {"app_other": 50}, input_tokens=0, output_tokens=0),  # no answer
        request_row(53, T0 + 600 * MS, {"decode": 50}, input_tokens=5, output_tokens=2, project="other"),
        request_row(54, T0 - S, {"decode": 50}, input_tokens=5, output_tokens=2),  # before the window
    ]
    store.upsert_requests(rows)


def test_select_by_window_and_filters_in_arrival_order(store: Store) -> None:
    seed_rows(store)
    window = Window(T0, T0 + 60 * S)
    shapes = select_shapes(store, "default", window, Filters(route="POST /chat", model="m1"))
    assert len(shapes) == 20  # not the other route, model, project, the empty answer, the earlier one
    assert [s.offset_ns for s in shapes] == [n * 250 * MS for n in range(20)]  # after the first
    first = shapes[0]
    assert (first.input_tokens, first.output_tokens, first.cached_input_tokens) == (101, 11, 1)
    assert first.source_trace_id == f"{1:032x}" and first.route == "POST /chat" and first.provider == "groq"
    quoted = select_shapes(store, "default", window, Filters(route="POST /it's"))  # bound, not spliced
    assert [(s.input_tokens, s.output_tokens) for s in quoted] == [(7, 3)]


def test_sample_is_a_seeded_subset_in_arrival_order(store: Store) -> None:
    seed_rows(store)
    window = Window(T0, T0 + 60 * S)
    chat = Filters(route="POST /chat", model="m1")
    one = select_shapes(store, "default", window, chat, sample=5, seed=1)
    again = select_shapes(store, "default", window, chat, sample=5, seed=1)
    other = select_shapes(store, "default", window, chat, sample=5, seed=2)
    assert len(one) == 5 and one == again
    assert {s.source_trace_id for s in one} != {s.source_trace_id for s in other}
    assert one[0].offset_ns == 0 and [s.offset_ns for s in one] == sorted(s.offset_ns for s in one)


def test_shape_route_answers_the_callers_project(collector) -> None:  # type: ignore[no-untyped-def]
    seed_rows(collector.store)
    params = {"since": str(T0 // S), "until": str(T0 // S + 60), "route": "POST /chat", "sample": 3}
    body = httpx.get(f"{collector.url}/api/replay/shape", params=params, timeout=30).json()
    assert len(body["requests"]) == 3
    assert set(body["requests"][0]) >= {"offset_ns", "input_tokens", "output_tokens", "cached_input_tokens"}
    bad = httpx.get(f"{collector.url}/api/replay/shape", params={"sample": 0}, timeout=30)
    assert bad.status_code == 422
