"""Issue 15, item 8: a collector without API keys answers only requests for its own names.

The reproduction: DNS rebinding. A page at ``attacker.example`` makes its name resolve to
127.0.0.1; the visitor's browser then sends the collector requests with ``Host:
attacker.example:4318``, and without keys every caller is the ``default`` project. Here those
requests go to a real collector on 127.0.0.1 with that Host header.
"""

from __future__ import annotations

from collections.abc import Callable

import httpx
from otlp_builders import chat_trace, protobuf_body, recent_base_ns
from pipeline_helpers import span_counts

from latencylens_collector.auth import KeyStore

REBOUND = "attacker.example"


def _get(url: str, host: str, path: str = "/api/requests", **headers: str) -> httpx.Response:
    return httpx.get(f"{url}{path}", headers={"Host": host, **headers})


def test_a_rebound_name_is_refused_in_local_mode(collector) -> None:
    port = collector.url.rsplit(":", 1)[1]
    for path in ("/api/requests", "/metrics", "/readyz", "/"):
        response = _get(collector.url, f"{REBOUND}:{port}", path)
        assert response.status_code == 421, path
        assert "LATENCYLENS_ALLOWED_HOSTS" in response.json()["detail"]
    export = httpx.post(
        f"{collector.url}/v1/traces",
        content=protobuf_body(chat_trace(recent_base_ns())),
        headers={"Host": REBOUND, "Content-Type": "application/x-protobuf"},
    )
    assert export.status_code == 421
    assert span_counts(collector.store)["plain"] == 0  # nothing written on the page's behalf


def test_own_names_and_addresses_are_served(collector) -> None:
    port = collector.url.rsplit(":", 1)[1]
    for host in (f"localhost:{port}", "LOCALHOST", f"127.0.0.1:{port}", f"[::1]:{port}", "10.1.2.3:4318"):
        assert _get(collector.url, host).status_code == 200, host
    assert _get(collector.url, "localhost.").status_code == 200  # the fully qualified spelling


def test_allowed_hosts_adds_names_and_star_turns_the_check_off(start_collector: Callable) -> None:
    named = start_collector(allowed_hosts="lens.internal, Other.Example")
    assert _get(named.url, "lens.internal:4318").status_code == 200
    assert _get(named.url, "other.example").status_code == 200
    assert _get(named.url, REBOUND).status_code == 421
    anything = start_collector(allowed_hosts="*")
    assert _get(anything.url, REBOUND).status_code == 200


def test_with_api_keys_the_key_decides(collector) -> None:
    keys = KeyStore(collector.settings.metadata_url)
    _, raw = keys.create("alpha")
    keys.close()
    assert _get(collector.url, REBOUND).status_code == 401  # no key: refused by auth, not by name
    response = _get(collector.url, REBOUND, authorization=f"Bearer {raw}")
    assert response.status_code == 200  # behind a proxy under any name, a valid key is enough
