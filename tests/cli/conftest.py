"""CLI tests run the real command against a real collector fed through OTLP.

The OTLP builders of the collector tests (the real OpenTelemetry encoder, exact ids and times) are
shared: their folder is put on the import path here.
"""

from __future__ import annotations

import sys
from pathlib import Path

_COLLECTOR_TESTS = str(Path(__file__).resolve().parents[1] / "collector")
if _COLLECTOR_TESTS not in sys.path:
    sys.path.insert(0, _COLLECTOR_TESTS)
