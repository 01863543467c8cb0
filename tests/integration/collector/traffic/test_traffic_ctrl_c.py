"""Ctrl-C during ``latencylens replay``: nothing more is sent, what is in flight finishes, and every
request that finished reaches the collector under the run (exit code 130)."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

HERE = Path(__file__).resolve().parent
REQUESTS = 40


@pytest.fixture
def slow_server() -> Iterator[str]:
    """One slot, 8 ms per output token: each 25-token request holds it 0.2 s, so a queue builds."""
    process = subprocess.Popen(
        [
            sys.executable,
            str(HERE / "traffic_slot_provider.py"),
            "--slots",
            "1",
            "--decode-ms-per-token",
            "8",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None
        yield process.stdout.readline().strip()
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_ctrl_c_keeps_what_finished(collector, slow_server: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    trace = tmp_path / "trace.jsonl"
    lines = [
        json.dumps({"timestamp": 150 * i, "input_length": 50, "output_length": 25}) for i in range(REQUESTS)
    ]
    trace.write_text("\n".join(lines) + "\n")
    command = [
        sys.executable, "-m", "latencylens_collector", "replay", "--url", collector.url,
        "--from-trace", str(trace), "--base-url", slow_server, "--model", "m", "--run-id", "cut",
    ]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert process.stdout is not None
    seen = ""
    for line in process.stdout:  # progress lines: interrupt once a few requests have finished
        seen += line
        match = re.search(r"done (\d+)", line)
        if match and int(match.group(1)) >= 3:
            process.send_signal(signal.SIGINT)
            break
    rest, _ = process.communicate(timeout=120)
    output = seen + rest
    assert process.returncode == 130, output
    stopped = re.search(r"stopped: (\d+) of 40 requests sent and finished \((\d+) failed\)", output)
    assert stopped, output
    finished = int(stopped.group(1))
    assert 3 <= finished < REQUESTS and stopped.group(2) == "0"

    deadline = time.monotonic() + 60
    stored = -1
    while time.monotonic() < deadline:
        response = httpx.get(f"{collector.url}/api/replay/runs/cut/compare", timeout=30)
        if response.status_code == 200 and (stored := response.json()["replay"]["requests"]) == finished:
            break
        time.sleep(0.5)
    assert stored == finished  # every request that finished was kept, none that was not sent
