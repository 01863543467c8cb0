"""API keys: hashed storage, projects kept apart over HTTP, 401s, revocation, local mode."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from google.rpc.status_pb2 import Status
from otlp_builders import chat_trace, protobuf_body, recent_base_ns
from sqlalchemy import event

from latencylens_collector.auth import KeyStore, LocalModeError, check_listen_address
from latencylens_collector.auth.tokens import hash_key


@pytest.fixture
def metadata_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'metadata.db'}"


def post_trace(url: str, headers: dict[str, str] | None = None) -> tuple[httpx.Response, str]:
    spans = chat_trace(recent_base_ns())
    trace_id = format(spans[0].context.trace_id, "032x")
    response = httpx.post(
        f"{url}/v1/traces",
        content=protobuf_body(spans),
        headers={"Content-Type": "application/x-protobuf", **(headers or {})},
    )
    return response, trace_id


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def listed(url: str, headers: dict[str, str]) -> list[str]:
    response = httpx.get(f"{url}/api/requests", headers=headers)
    assert response.status_code == 200, response.text
    return [request["trace_id"] for request in response.json()["requests"]]


def test_keys_are_stored_hashed_and_revocable(metadata_url: str, tmp_path: Path) -> None:
    store = KeyStore(metadata_url)
    assert not store.enabled()
    key, raw = store.create("alpha", "ci exporter")
    assert raw.startswith(f"ll_{key.key_id}_") and len(raw) > 50
    assert store.authenticate(raw) == "alpha"
    assert store.authenticate(raw[:-1] + ("x" if raw[-1] != "x" else "y")) is None
    assert store.authenticate("ll_000000000000_" + "a" * 43) is None
    assert store.authenticate("not a key") is None
    data = (tmp_path / "metadata.db").read_bytes()
    assert raw.encode() not in data
    assert raw.split("_", 2)[2].encode() not in data  # not even the secret part
    assert hash_key(raw).encode() in data
    assert store.revoke(key.key_id)
    assert not store.revoke(key.key_id)  # already revoked
    assert store.authenticate(raw) is None
    assert store.enabled()  # revoking the last key does not reopen the service
    assert [(k.key_id, k.active) for k in store.list()] == [(key.key_id, False)]
    with pytest.raises(ValueError, match="invalid project name"):
        store.create("no spaces allowed")
    store.close()


def test_key_checks_ask_the_database_once_until_it_changes(metadata_url: str) -> None:
    """Every export checks its key: the answer is kept while the metadata file is unchanged, and
    a key revoked or created by another process (another KeyStore on the same file) counts at once."""
    collector_keys, cli_keys = KeyStore(metadata_url), KeyStore(metadata_url)
    statements: list[str] = []
    event.listen(collector_keys.engine, "before_cursor_execute", lambda *args: statements.append(args[2]))
    key, raw = cli_keys.create("alpha")
    assert collector_keys.enabled() and collector_keys.authenticate(raw) == "alpha"
    asked = len(statements)
    assert asked == 2  # "any key?" and this key's record
    for _ in range(100):
        assert collector_keys.enabled() and collector_keys.authenticate(raw) == "alpha"
    assert len(statements) == asked
    assert cli_keys.revoke(key.key_id)
    assert collector_keys.authenticate(raw) is None  # seen on the file at once
    _, second_raw = cli_keys.create("beta")
    assert collector_keys.authenticate(second_raw) == "beta"
    collector_keys.close()
    cli_keys.close()


def test_a_key_reads_and_writes_only_its_project(
    start_collector: Callable[..., Any], metadata_url: str
) -> None:
    store = KeyStore(metadata_url)
    _, key_a = store.create("alpha")
    _, key_b = store.create("beta")
    collector = start_collector(metadata_url=metadata_url)

    response, trace_id = post_trace(collector.url, bearer(key_a))
    assert response.status_code == 200, response.text

    # Key B: sees nothing of A's project, not even by trace id.
    assert trace_id not in listed(collector.url, bearer(key_b))
    assert httpx.get(f"{collector.url}/api/requests/{trace_id}", headers=bearer(key_b)).status_code == 404
    # Key A (either header form) sees its request.
    assert trace_id in listed(collector.url, bearer(key_a))
    assert trace_id in listed(collector.url, {"x-api-key": key_a})
    detail = httpx.get(f"{collector.url}/api/requests/{trace_id}", headers=bearer(key_a))
    assert detail.status_code == 200, detail.text
    # B writes to its own project: A does not see it.
    response, trace_b = post_trace(collector.url, {"x-api-key": key_b})
    assert response.status_code == 200, response.text
    assert trace_b in listed(collector.url, bearer(key_b))
    assert trace_b not in listed(collector.url, bearer(key_a))
    store.close()


def test_missing_bad_and_revoked_keys_get_401(start_collector: Callable[..., Any], metadata_url: str) -> None:
    store = KeyStore(metadata_url)
    key, raw = store.create("alpha")
    collector = start_collector(metadata_url=metadata_url)

    response, _ = post_trace(collector.url)
    assert response.status_code == 401
    # An OTLP export is answered in its own encoding: a protobuf google.rpc.Status.
    assert response.headers["content-type"] == "application/x-protobuf"
    assert "missing API key" in Status.FromString(response.content).message
    assert response.headers["www-authenticate"] == "Bearer"
    response, _ = post_trace(collector.url, bearer(raw + "tampered"))
    assert response.status_code == 401
    assert "invalid or revoked" in Status.FromString(response.content).message
    assert httpx.get(f"{collector.url}/api/requests").status_code == 401
    assert (
        httpx.get(f"{collector.url}/api/requests", headers={"Authorization": "Basic abc"}).status_code == 401
    )
    # Probes stay open.
    assert httpx.get(f"{collector.url}/healthz").status_code == 200

    assert post_trace(collector.url, bearer(raw))[0].status_code == 200
    assert store.revoke(key.key_id)
    assert post_trace(collector.url, bearer(raw))[0].status_code == 401
    store.close()


def test_local_mode_without_keys(start_collector: Callable[..., Any], metadata_url: str) -> None:
    collector = start_collector(metadata_url=metadata_url)
    response, trace_id = post_trace(collector.url)
    assert response.status_code == 200, response.text
    assert trace_id in listed(collector.url, {})
    # A key header means nothing while no key exists: still project default.
    assert trace_id in listed(collector.url, bearer("ll_000000000000_whatever-whatever-whatever"))


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1", "127.0.0.2"])
def test_loopback_is_allowed_without_keys(host: str) -> None:
    check_listen_address(host, keys_enabled=False)


def test_public_interfaces_need_keys_or_an_explicit_opt_out() -> None:
    with pytest.raises(LocalModeError, match=r"refusing to listen on 0\.0\.0\.0: no API keys exist"):
        check_listen_address("0.0.0.0", keys_enabled=False)
    check_listen_address("0.0.0.0", keys_enabled=True)
    check_listen_address("0.0.0.0", keys_enabled=False, allow_unauthenticated=True)
