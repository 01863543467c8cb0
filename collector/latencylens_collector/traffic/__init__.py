"""Replaying recorded traffic: its shape, schedules, synthetic prompts, the sender and comparison.

``shape`` selects recorded requests (arrival offset, token counts; never content), ``schedule``
says when each is sent, ``prompt`` and ``target`` build the request bodies, ``sender`` and
``runner`` send them through the instrumented provider SDKs, ``compare`` puts a run beside the
requests it copied, ``mooncake`` and ``aiperf`` read and write the benchmark tools' files.
Not to be confused with ``pipeline.replay``, which re-ingests the spool.
"""

from latencylens_collector.traffic.runs import new_run_id, service_name
from latencylens_collector.traffic.schedule import Arrival, Plan, plan
from latencylens_collector.traffic.shape import RequestShape, Totals, select_shapes, totals
from latencylens_collector.traffic.target import Target, is_loopback

__all__ = [
    "Arrival",
    "Plan",
    "RequestShape",
    "Target",
    "Totals",
    "is_loopback",
    "new_run_id",
    "plan",
    "select_shapes",
    "service_name",
    "totals",
]
