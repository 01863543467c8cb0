"""Query parameters the query routes share, declared once."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Query

from latencylens_collector import queries


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
