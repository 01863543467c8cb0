"""Two real requests sent to a real collector over OTLP, with exact ids and times, for the CLI tests.

``chat_trace`` (tests/support/otlp_builders.py) is a request of 1000 ms × scale whose critical
path is, in ms × scale: retrieval 100, tool 50, other application work 150 (app 300), network
230, queue 50, prefill 20, decode 400.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import httpx
from otlp_builders import chat_trace, post_protobuf

from latencylens_collector.cli.output import utc

SLOW_ID = "0af7651916cd43dd8448eb211c80319c"
"""shop, model llama-3.3-70b-versatile, scale 2: e2e 2000, app 600, network 460, queue 100,
prefill 40, decode 800 ms."""
FAST_ID = "b7ad6b7169203331b7ad6b7169203331"
"""support-assistant, model m-small, scale 1: e2e 1000, app 300, network 230, queue 50,
prefill 20, decode 400 ms."""
NS_PER_MINUTE = 60_000_000_000


@dataclass(frozen=True)
class Loaded:
    url: str
    start_ns: int

    @property
    def start(self) -> str:
        """Both requests' start time as the CLI prints it."""
        return utc(self.start_ns)


def load_two_requests(url: str) -> Loaded:
    """Send both requests (started 10 minutes ago, on a whole second) and wait until they are stored."""
    start_ns = (time.time_ns() - 10 * NS_PER_MINUTE) // 1_000_000_000 * 1_000_000_000
    slow = chat_trace(
        start_ns, trace_id=int(SLOW_ID, 16), service="shop", model="llama-3.3-70b-versatile", scale=2
    )
    fast = chat_trace(start_ns, trace_id=int(FAST_ID, 16), service="support-assistant", model="m-small")
    for spans in (slow, fast):
        assert post_protobuf(url, spans).status_code == 200
    wait_for_requests(url, 2)
    return Loaded(url, start_ns)


def wait_for_requests(url: str, count: int) -> None:
    """Until the service lists ``count`` requests (spans are written within the flush interval)."""
    for _ in range(400):
        if len(httpx.get(f"{url}/api/requests", params={"limit": 1000}).json()["requests"]) >= count:
            return
        time.sleep(0.05)
    raise AssertionError(f"{count} requests never arrived")
