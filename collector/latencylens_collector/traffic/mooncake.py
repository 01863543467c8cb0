"""The mooncake trace format: one JSON object per line, the trace file AIPerf and vLLM's benchmark read.

Each line: ``timestamp`` (ms after the first request, integer), ``input_length``, ``output_length``,
``session_id`` (the recorded request's trace id, which AIPerf reports back as the record's
``conversation_id``) and, when part of the input was served from a prompt cache, ``hash_ids``: one
id per block of :data:`BLOCK_TOKENS` input tokens (``ceil(input_length / 512)`` ids), equal ids
meaning equal blocks. LatencyLens knows how many input tokens were cached, not which; it takes the
cached ones to be a prefix shared by the requests of one route (a system prompt), so those blocks
get the route's ids and the rest ids of their own.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Final

from latencylens_collector.traffic.shape import RequestShape

BLOCK_TOKENS: Final = 512
"""Tokens per hash id (mooncake's block size, AIPerf's default ``--isl-block-size``)."""
NS_PER_MS: Final = 1_000_000


def to_mooncake(shapes: Sequence[RequestShape], block_tokens: int = BLOCK_TOKENS) -> list[dict[str, Any]]:
    """One mooncake record per shape, in order."""
    shared: dict[tuple[str, int], int] = {}
    next_id = 0

    def new_id() -> int:
        nonlocal next_id
        next_id += 1
        return next_id - 1

    records = []
    for shape in shapes:
        record: dict[str, Any] = {
            "timestamp": shape.offset_ns // NS_PER_MS,
            "input_length": shape.input_tokens,
            "output_length": shape.output_tokens,
        }
        if shape.source_trace_id:
            record["session_id"] = shape.source_trace_id
        cached_blocks = shape.cached_input_tokens // block_tokens
        if cached_blocks:
            blocks = -(-shape.input_tokens // block_tokens)
            ids = []
            for index in range(blocks):
                if index < cached_blocks:
                    key = (shape.route, index)
                    if key not in shared:
                        shared[key] = new_id()
                    ids.append(shared[key])
                else:
                    ids.append(new_id())
            record["hash_ids"] = ids
        records.append(record)
    return records


def dump(records: Iterable[dict[str, Any]]) -> Iterator[str]:
    """JSON lines (no trailing newline on each)."""
    for record in records:
        yield json.dumps(record, separators=(",", ":"))


def read_mooncake(lines: Iterable[str], block_tokens: int = BLOCK_TOKENS) -> list[RequestShape]:
    """Shapes from a mooncake trace (``input_length`` lines; ``delay`` and text inputs are refused),
    cached tokens counted from the leading ``hash_ids`` seen before. Raises ValueError naming the line."""
    shapes = []
    seen: set[int] = set()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            input_length = int(record["input_length"])
            output_length = int(record["output_length"])
            timestamp_ms = float(record.get("timestamp") or 0)
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(
                f"line {number}: not a mooncake record with input_length and output_length ({exc})"
            ) from None
        ids = [int(i) for i in record.get("hash_ids") or []]
        cached = 0
        for block_id in ids:
            if block_id not in seen:
                break
            cached += 1
        seen.update(ids)
        shape = RequestShape(
            offset_ns=round(timestamp_ms * NS_PER_MS),
            input_tokens=input_length,
            output_tokens=output_length,
            cached_input_tokens=min(cached * block_tokens, input_length),
            source_trace_id=str(record.get("session_id") or ""),
        )
        shape.check()
        shapes.append(shape)
    return shapes


__all__ = ["BLOCK_TOKENS", "NS_PER_MS", "dump", "read_mooncake", "to_mooncake"]
