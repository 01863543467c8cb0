"""Replay API: the shape of recorded traffic, and a replay run beside the requests it copied."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Path, Query

from latencylens_collector.api.deps import NowDep, ProjectDep, StoreDep
from latencylens_collector.api.params import FiltersDep, SinceQuery, UntilQuery
from latencylens_collector.queries.times import window as time_window
from latencylens_collector.traffic.compare import UnknownRun, compare_run
from latencylens_collector.traffic.responses import ReplayComparison, ShapeResponse, ShapeRow, Slo
from latencylens_collector.traffic.shape import MAX_SHAPES, select_shapes

MS = 1_000_000
router = APIRouter(prefix="/api/replay", tags=["replay"])


@router.get(
    "/shape",
    summary="Recorded requests to replay",
    description="Arrival offsets and token counts (never content) of the window's requests with a "
    "model call, oldest first; at most `sample` of them (a seeded pseudo-random subset), "
    f"at most {MAX_SHAPES}.",
)
def get_shape(
    store: StoreDep,
    project: ProjectDep,
    now: NowDep,
    filters: FiltersDep,
    since: SinceQuery = None,
    until: UntilQuery = None,
    sample: Annotated[int | None, Query(ge=1, le=MAX_SHAPES, description="Pick this many at random.")] = None,
    seed: Annotated[int, Query(ge=0, description="Seed of the sample.")] = 0,
) -> ShapeResponse:
    window = time_window(now, since, until)
    shapes = select_shapes(store, project, window, filters, sample=sample, seed=seed)
    return ShapeResponse(
        since_ns=window.since_ns,
        until_ns=window.until_ns,
        requests=[ShapeRow(**shape.to_json()) for shape in shapes],
    )


@router.get(
    "/runs/{run_id}/compare",
    summary="A replay run beside production",
    description="TTFT, ITL and end-to-end percentiles, mean queue/prefill/decode/network parts, "
    "tokens/s and goodput under the SLO of the run's requests and of the recorded requests they copied.",
)
def get_run_compare(
    store: StoreDep,
    project: ProjectDep,
    run_id: Annotated[str, Path(max_length=200)],
    ttft_slo_ms: Annotated[float | None, Query(gt=0, description="TTFT target, ms.")] = None,
    itl_slo_ms: Annotated[float | None, Query(gt=0, description="ITL target, ms.")] = None,
    e2e_slo_ms: Annotated[float | None, Query(gt=0, description="End-to-end target, ms.")] = None,
) -> ReplayComparison:
    slo = Slo(
        ttft_ns=None if ttft_slo_ms is None else round(ttft_slo_ms * MS),
        itl_ns=None if itl_slo_ms is None else round(itl_slo_ms * MS),
        e2e_ns=None if e2e_slo_ms is None else round(e2e_slo_ms * MS),
    )
    try:
        return compare_run(store, project, run_id, slo)
    except UnknownRun as exc:
        raise HTTPException(404, str(exc)) from None
