"""Exit codes of the ``latencylens`` command and the one error it raises to report a failure.

Every failure ends as one line on standard error, ``error: <what happened and what to do>``, and
one of these exit codes (docs/cli.md and ``latencylens --help`` list them).
"""

from __future__ import annotations

from typing import Final

OK: Final = 0
"""Done."""
FAILED: Final = 1
"""The service (or the local database) answered with an error, or nothing matched what was asked."""
USAGE: Final = 2
"""Bad arguments or a step that needs confirmation; nothing was sent or changed."""
UNREACHABLE: Final = 3
"""No LatencyLens service answered at the URL: refused, timed out, or something else answered."""

EXIT_CODES_HELP: Final = (
    "exit codes: 0 done; 1 the service or database reported an error, or nothing matched; "
    "2 usage error (bad arguments, confirmation needed), nothing changed; "
    "3 no LatencyLens service answered at the URL."
)


class CliError(Exception):
    """A failure to report as one ``error: ...`` line with an exit code."""

    def __init__(self, message: str, code: int = FAILED) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
