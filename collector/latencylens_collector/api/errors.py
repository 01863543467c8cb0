"""Errors the routes leave to the app: a query's invalid parameters are answered 422 in one place."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from latencylens_collector.queries import QueryError


async def query_error(request: Request, exc: Exception) -> JSONResponse:
    """422 with the error's message, shaped like FastAPI's own ``{"detail": ...}``."""
    return JSONResponse(status_code=422, content={"detail": str(exc)})


def add_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(QueryError, query_error)
