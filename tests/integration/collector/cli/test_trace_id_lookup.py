"""``GET /api/requests/lookup``: the stored trace ids that start with a prefix (what ``explain``
uses to accept the start of an id)."""

from __future__ import annotations

import time

import httpx
from otlp_builders import chat_trace, post_protobuf, recent_base_ns

from latencylens_collector.queries.requests import MAX_PREFIX_MATCHES

SHARED = 0xABCDEF << 104  # two ids share the 6 hex characters "abcdef"
FIRST, SECOND, OTHER = SHARED | 1, SHARED | (2 << 96) | 1, (0x12345678 << 96) | 1


def _wait_for(url: str, count: int) -> None:
    for _ in range(200):  # spans are written asynchronously, within the flush interval
        if len(httpx.get(f"{url}/api/requests").json()["requests"]) >= count:
            return
        time.sleep(0.05)
    raise AssertionError(f"{count} requests never arrived")


def test_prefix_lookup_lists_every_match_in_order(collector) -> None:
    base = recent_base_ns()
    for trace_id in (SECOND, OTHER, FIRST):
        assert post_protobuf(collector.url, chat_trace(base, trace_id=trace_id)).status_code == 200
    _wait_for(collector.url, 3)

    def lookup(prefix: str) -> httpx.Response:
        return httpx.get(f"{collector.url}/api/requests/lookup", params={"prefix": prefix})

    both = [f"{FIRST:032x}", f"{SECOND:032x}"]
    assert lookup("abcdef").json() == {"trace_ids": both, "truncated": False}
    assert lookup("ABCDEF0").json() == {"trace_ids": both, "truncated": False}  # any case
    assert lookup(f"{SECOND:032x}"[:8]).json()["trace_ids"] == [f"{SECOND:032x}"]
    assert lookup("1").json()["trace_ids"] == [f"{OTHER:032x}"]
    assert lookup("ffff").json() == {"trace_ids": [], "truncated": False}
    assert lookup("xyz").status_code == 422
    assert lookup("0" * 33).status_code == 422


def test_prefix_lookup_says_when_more_match_than_it_lists(collector) -> None:
    base = recent_base_ns()
    ids = [(0xC0FFEE << 104) | (n << 8) | 1 for n in range(MAX_PREFIX_MATCHES + 2)]
    for trace_id in ids:
        post_protobuf(collector.url, chat_trace(base, trace_id=trace_id))
    _wait_for(collector.url, len(ids))
    body = httpx.get(f"{collector.url}/api/requests/lookup", params={"prefix": "c0ffee"}).json()
    assert body == {"trace_ids": [f"{t:032x}" for t in ids[:MAX_PREFIX_MATCHES]], "truncated": True}
