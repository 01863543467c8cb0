"""Decoder tests: bodies built with the real OpenTelemetry encoder (the collector tests' builders,
put on the import path here) and, where the encoder cannot go (values nested past protobuf's own
limit, malformed spans), by hand in the protobuf wire format (:mod:`wire`)."""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
_COLLECTOR_TESTS = str(Path(__file__).resolve().parents[1] / "collector")
for _path in (_HERE, _COLLECTOR_TESTS):
    if _path not in sys.path:
        sys.path.insert(0, _path)
