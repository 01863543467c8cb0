"""Query and path parameters the routes share, declared once with their bounds.

Every bound a parameter has is checked here (FastAPI answers 422 naming the parameter and the
bound) and again where the value is used (:mod:`latencylens_collector.queries.times`), so no value
reaches SQL, SQLite or arithmetic where it would overflow, wrap or read as something else:
a number that is not finite, an id past signed 64 bits, a duration no Int64 of ns holds.
"""

from __future__ import annotations

from typing import Annotated, Any, Final

from fastapi import Depends, Path, Query

from latencylens_collector import queries
from latencylens_collector.queries.times import MAX_DURATION_MS

MAX_ROW_ID: Final = 2**63 - 1
"""Largest id an SLO, alert or silence can have (SQLite's INTEGER is signed 64-bit)."""


def time_query(what: str) -> Any:
    """A time parameter: ``what`` it bounds, then the forms every time parameter takes
    (:func:`queries.parse_time`)."""
    return Query(description=f"{what} {queries.TIME_HELP}")


def request_filters(
    service: Annotated[str | None, Query(description="Only requests whose root is in this service.")] = None,
    route: Annotated[str | None, Query(description="Only requests whose root span has this name.")] = None,
    model: Annotated[str | None, Query(description="Only requests whose primary model is this.")] = None,
    provider: Annotated[
        str | None, Query(description="Only requests whose primary provider is this.")
    ] = None,
) -> queries.Filters:
    """The filters every query route takes; values are bound as parameters, never spliced."""
    return queries.Filters(service=service, route=route, model=model, provider=provider)


SinceQuery = Annotated[str | None, time_query("Window start (default: 24 h before its end).")]
UntilQuery = Annotated[str | None, time_query("Window end, exclusive (default: now).")]
FiltersDep = Annotated[queries.Filters, Depends(request_filters)]
GroupByQuery = Annotated[
    str | None,
    Query(description=f"Comma list of group-by fields: {', '.join(queries.GROUP_FIELDS)}."),
]
MinDurationMsQuery = Annotated[
    float | None,
    Query(
        ge=0,
        le=MAX_DURATION_MS,
        allow_inf_nan=False,
        description=f"Only requests at least this long (ms): a finite number from 0 to {MAX_DURATION_MS}.",
    ),
]


def limit_query(most: int) -> Any:
    """A page size from 1 to ``most``."""
    return Query(ge=1, le=most, description=f"At most this many rows (1 to {most}).")


def row_id(what: str) -> dict[str, Any]:
    """Bounds and help of an id of ``what`` (a positive signed 64-bit integer)."""
    return {"ge": 1, "le": MAX_ROW_ID, "description": f"{what} (1 to {MAX_ROW_ID})."}


SloIdPath = Annotated[int, Path(**row_id("The SLO's id"))]
AlertIdPath = Annotated[int, Path(**row_id("The alert's id"))]
SloIdQuery = Annotated[int | None, Query(**row_id("Only alerts of this SLO"))]
