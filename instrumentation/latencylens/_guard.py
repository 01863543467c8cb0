"""Failures inside LatencyLens's own code: logged, counted, never passed to the host app.

Set ``LATENCYLENS_STRICT=1`` (read once, at import) to re-raise them instead, so a test run does not
hide a bug the way a production app must.
"""

from __future__ import annotations

import logging
import os

from opentelemetry.trace import Span, Status, StatusCode

from latencylens import semconv
from latencylens._config import STRICT_ENV

logger = logging.getLogger("latencylens")

_strict = os.environ.get(STRICT_ENV, "") == "1"
_count = 0


def internal_errors() -> int:
    """How many internal failures were swallowed since the process started."""
    return _count


def internal_error(where: str) -> None:
    """Record the exception being handled as our own failure; call only inside ``except``."""
    global _count
    _count += 1
    if _count == 1:
        logger.warning("LatencyLens internal error in %s (more at debug level)", where, exc_info=True)
    else:
        logger.debug("LatencyLens internal error in %s", where, exc_info=True)
    if _strict:
        raise


def error_type(exc: BaseException) -> str:
    """Value for ``error.type``: the exception's qualified class name (bare for builtins)."""
    cls = type(exc)
    if cls.__module__ == "builtins":
        return cls.__qualname__
    return f"{cls.__module__}.{cls.__qualname__}"


def mark_failed(span: Span, exc: BaseException) -> None:
    """Record an exception from user or provider code on ``span``; never raises itself."""
    try:
        span.set_attribute(semconv.ERROR_TYPE, error_type(exc))
        span.record_exception(exc)
        span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
    except Exception:
        internal_error("recording an exception")
