"""Issue 15, item 8: /readyz is honest and answers never show internal addresses or ClickHouse text.

The reproduction: /readyz said ready ("writes_to spool") while the spool was full and every export
got 503, and that 503 showed the ClickHouse URL and its error text. Here ClickHouse is an address
nobody listens on (so batches go to the spool) and the spool holds only a few kilobytes; then a
real chdb store that turns writes away (TOO_MANY_PARTS) with no spool to fall back on.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path

import httpx
from google.rpc import status_pb2
from otlp_builders import chat_trace, json_body, post_protobuf, recent_base_ns
from pipeline_helpers import wait_until


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _assert_nothing_internal(text: str, *secrets: str) -> None:
    for secret in (
        "http://",
        "ClickHouse failed",
        "Errno",
        "HTTPConnectionPool",
        "DB::Exception",
        *secrets,
    ):
        assert secret not in text, (secret, text)


def test_a_full_spool_is_not_ready_and_the_503_names_nothing_internal(
    start_collector: Callable, tmp_path: Path
) -> None:
    port = _closed_port()
    spool = tmp_path / "spool-dir"
    lens = start_collector(
        clickhouse_dsn=f"http://default:s3cret@127.0.0.1:{port}/", spool_dir=str(spool), max_spool_bytes=8000
    )
    assert httpx.get(f"{lens.url}/readyz").json()["writes_to"] == "spool"
    statuses = []
    for _ in range(20):  # one export spools ~2.5 KB: the 8 KB spool is full after a few
        response = post_protobuf(lens.url, chat_trace(recent_base_ns()))
        statuses.append(response.status_code)
        if response.status_code != 200:
            break
    assert statuses[0] == 200 and statuses[-1] == 503, statuses
    status = status_pb2.Status.FromString(response.content)
    assert status.message == "storage unavailable and the spool is full; retry later"
    assert response.headers["Retry-After"]
    json_answer = httpx.post(
        f"{lens.url}/v1/traces",
        content=json_body(chat_trace(recent_base_ns())),
        headers={"Content-Type": "application/json"},
    )
    assert json_answer.status_code == 503
    _assert_nothing_internal(json_answer.text, str(port), "s3cret", str(spool))

    ready = httpx.get(f"{lens.url}/readyz")
    assert ready.status_code == 503
    body = ready.json()
    assert (body["status"], body["writes_to"], body["storage"], body["spool"]) == (
        "not ready",
        "nowhere",
        "unreachable",
        "full",
    )
    assert body["spool_bytes"] <= 8000
    _assert_nothing_internal(ready.text, str(port), "s3cret", str(spool))

    query = httpx.get(f"{lens.url}/api/requests")
    assert query.status_code == 503
    _assert_nothing_internal(query.text, str(port), "s3cret")


def test_a_store_refusing_writes_without_a_spool_is_not_ready(start_collector: Callable) -> None:
    lens = start_collector(spool_dir="off")
    db = lens.store.database
    assert post_protobuf(lens.url, chat_trace(recent_base_ns())).status_code == 200  # one part stored
    lens.store.command(f"SYSTEM STOP MERGES {db}.spans")
    lens.store.command(f"ALTER TABLE {db}.spans MODIFY SETTING parts_to_throw_insert = 1")
    try:
        refused = post_protobuf(lens.url, chat_trace(recent_base_ns()))
        assert refused.status_code == 503
        _assert_nothing_internal(status_pb2.Status.FromString(refused.content).message, "TOO_MANY_PARTS", db)

        ready = httpx.get(f"{lens.url}/readyz")  # ClickHouse answers SELECT 1, yet takes no spans
        assert ready.status_code == 503
        body = ready.json()
        assert (body["status"], body["writes_to"], body["storage"]) == (
            "not ready",
            "nowhere",
            "refusing writes: TOO_MANY_PARTS",
        )
    finally:
        lens.store.command(f"ALTER TABLE {db}.spans MODIFY SETTING parts_to_throw_insert = 3000")
        lens.store.command(f"SYSTEM START MERGES {db}.spans")
    wait_until(
        lambda: post_protobuf(lens.url, chat_trace(recent_base_ns())).status_code == 200,
        timeout_s=60,
        what="writes to be taken again",
    )
    assert httpx.get(f"{lens.url}/readyz").json()["storage"] == "ok"


def test_the_slo_api_503_names_no_database(start_collector: Callable, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    missing = blocker / "metadata.db"  # SQLite cannot open a file under a file
    lens = start_collector(metadata_url=f"sqlite:///{missing}")
    response = httpx.get(f"{lens.url}/api/slos")
    assert response.status_code == 503
    assert response.json()["detail"] == "SLO metadata database unavailable; retry later"
    _assert_nothing_internal(response.text, str(tmp_path), "sqlite")
