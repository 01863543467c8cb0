"""The built-in web UI: static HTML, CSS and dependency-free JavaScript served by the collector.

Nothing is built or downloaded at run time; the pages call the query API of the same service.
"""

from latencylens_collector.ui.routes import router

__all__ = ["router"]
