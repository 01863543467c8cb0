"""The ``latencylens`` console command: a thin door to the collector service.

The service lives in ``latencylens_collector`` (the ``server`` extra); it is imported only when the
command runs, so SDK-only installs get a clear message instead of a traceback.
"""

from __future__ import annotations

import sys
from typing import Any

MISSING_SERVER_MESSAGE = "The latencylens command needs the service: pip install 'latencylens[server]'"
MISSING_SERVER_EXIT_CODE = 2


def main() -> Any:
    """Run the collector's command line, or explain which extra to install."""
    try:
        from latencylens_collector.cli.main import main as service_main
    except ImportError:
        print(MISSING_SERVER_MESSAGE, file=sys.stderr)
        raise SystemExit(MISSING_SERVER_EXIT_CODE) from None
    return service_main()
