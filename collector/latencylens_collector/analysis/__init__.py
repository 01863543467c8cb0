"""Pure request analysis: span records, conventions, attribution, explanations (no I/O).

The modules that build request rows run compiled when a build matches them (:mod:`._compiled`:
the one read of files here, once per process, at import).
"""

from latencylens_collector.analysis._compiled import use as _use_compiled

_use_compiled(__path__)
