"""Exits that must stay quiet and prompt: the demo's simulated provider when a client hangs up
mid-stream, and an instrumented app whose collector is down (the SDK's bounded shutdown)."""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from latencylens._config import DEFAULT_SHUTDOWN_TIMEOUT_S

SLACK_S = 2.5
"""Beyond the documented wait at exit: the interpreter's own teardown on a loaded machine. The bound
(4.5 s) still tells the bounded exit from the unbounded one (7 s of backoff and more)."""


SLOW_STREAM = ["--queue-s", "0", "--prefill-s", "0.01", "--decode-s", "2"]
SLOW_STREAM += ["--prompt-tokens", "5", "--completion-tokens", "20"]
"""20 words over 2 s: a chunk every 100 ms, so the hang-up lands mid-stream."""
REQUEST_HEAD = b"POST /openai/v1/chat/completions HTTP/1.1\r\nhost: sim\r\ncontent-type: application/json\r\n"


def test_the_simulated_provider_is_quiet_when_a_client_hangs_up() -> None:
    provider = subprocess.Popen(
        [sys.executable, "-m", "latencylens_collector.demo.provider_sim", *SLOW_STREAM],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert provider.stdout is not None
        base_url = provider.stdout.readline().strip()
        host, port = base_url.split("//")[1].split("/")[0].split(":")
        body = b'{"model": "m", "stream": true, "messages": []}'
        with socket.create_connection((host, int(port)), timeout=10) as client:
            client.sendall(REQUEST_HEAD + f"content-length: {len(body)}\r\n\r\n".encode() + body)
            assert client.recv(64).startswith(b"HTTP/1.1 200")  # the stream has begun
            # Hang up with a reset (SO_LINGER 0), as a killed client does: the next chunk the
            # provider writes fails with ConnectionResetError (or BrokenPipeError after it).
            client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        time.sleep(0.5)  # a few chunks' gap: the provider has written into the closed connection
        assert provider.poll() is None  # still serving
        with socket.create_connection((host, int(port)), timeout=10):
            pass  # and still accepting
    finally:
        provider.terminate()
        _, err = provider.communicate(timeout=30)
    assert "Traceback" not in err, err
    assert "ConnectionResetError" not in err and "BrokenPipeError" not in err, err


APP = textwrap.dedent(
    """
    import sys, time
    import latencylens

    latencylens.configure(service_name="offline-app", endpoint=sys.argv[1])

    @latencylens.request(name="POST /chat")
    def answer():
        time.sleep(0.01)
        return "ok"

    answer()
    time.sleep(0.3)  # the batch processor has tried once and is waiting to retry
    print(time.monotonic(), flush=True)  # the app's last statement; exit (and the flush) follows
    """
)


def test_an_app_whose_collector_is_down_exits_within_the_wait_at_exit(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]  # nothing listens once the probe is closed
    script = tmp_path / "app.py"
    script.write_text(APP)
    env = {
        name: value for name, value in os.environ.items() if not name.startswith(("LATENCYLENS_", "OTEL_"))
    }
    done = subprocess.run(
        [sys.executable, str(script), f"http://127.0.0.1:{closed_port}"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    exited_at = time.monotonic()  # CLOCK_MONOTONIC is shared by every process on the machine
    assert done.returncode == 0, done.stderr
    last_statement_at = float(done.stdout.strip())
    # The exporter's backoff (1 + 2 + 4 s) held this exit for 7 s before the wait at exit bounded it.
    took = exited_at - last_statement_at
    assert took < DEFAULT_SHUTDOWN_TIMEOUT_S + SLACK_S, f"exit took {took:.2f} s: {done.stderr}"
    assert "Connection refused" in done.stderr  # it did try the collector
