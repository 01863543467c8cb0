"""The README's "Getting started with your own app", run as written: its commands and its app
(the real OpenAI SDK pointed at the simulated provider through OPENAI_BASE_URL), against a real
``latencylens serve`` on free ports; the request appears with its parts. And what the README says
happens without the request root: every step is a request of its own."""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from latencylens_collector.demo.provider_sim import ProviderSimulator, Timing

README = Path(__file__).resolve().parents[2] / "README.md"
HEADING = "## Getting started with your own app"
README_HTTP_PORT, README_GRPC_PORT = "14318", "14317"
TIMING = Timing(queue_s=0.01, prefill_s=0.02, decode_s=0.1, prompt_tokens=20, completion_tokens=50)
"""The simulated provider holds each answer 130 ms (0.01 + 0.02 + 0.1 s)."""
MS = 1_000_000


def section_blocks() -> list[tuple[str, str]]:
    """(language, code) of each fenced block in the section, in order."""
    text = README.read_text()
    start = text.index(HEADING)
    end = text.index("\n## ", start + len(HEADING))
    return re.findall(r"```(\w+)\n(.*?)```", text[start:end], flags=re.S)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Steps:
    """The section's blocks with the README's ports swapped for free ones (the only change)."""

    def __init__(self) -> None:
        self.http_port, self.grpc_port = free_port(), free_port()
        blocks = section_blocks()
        assert [language for language, _ in blocks] == ["sh", "python", "sh"], blocks
        (_, setup), (_, self.app), (_, run) = blocks
        assert f"http://127.0.0.1:{README_HTTP_PORT}" in self.app
        self.app = self.app.replace(README_HTTP_PORT, str(self.http_port))
        self.setup = [self._ports(line) for line in setup.strip().splitlines()]
        self.run = [self._ports(line) for line in run.strip().splitlines()]

    def _ports(self, line: str) -> list[str]:
        line = line.replace(README_HTTP_PORT, str(self.http_port)).replace(
            README_GRPC_PORT, str(self.grpc_port)
        )
        return shlex.split(line)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"


def command(words: list[str]) -> list[str]:
    """A README command for this interpreter: ``latencylens`` and ``python`` of this environment."""
    if words[0] == "latencylens":
        return [sys.executable, "-m", "latencylens_collector.cli.main", *words[1:]]
    if words[0] == "python":
        return [sys.executable, *words[1:]]
    raise AssertionError(f"unexpected command in the README: {words}")


def clean_env(**extra: str) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("LATENCYLENS_", "OTEL_", "OPENAI_"))}
    return {**keep, **extra}


@pytest.fixture
def steps() -> Steps:
    return Steps()


@pytest.fixture
def collector(steps: Steps, tmp_path: Path) -> Iterator[str]:
    """The section's first block: the install (this environment has it), then ``serve``."""
    install, serve = steps.setup
    assert install[:2] == ["pip", "install"] and install[2].startswith("latencylens")
    assert serve[:2] == ["latencylens", "serve"]
    process = subprocess.Popen(
        command(serve),
        cwd=tmp_path,
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        banner = []
        while (line := process.stdout.readline()) and line.strip() != "Press Ctrl-C to stop.":
            banner.append(line.rstrip())
        assert f"  OTLP/HTTP   {steps.url}/v1/traces" in banner, (banner, process.stderr)
        assert f"  OTLP/gRPC   127.0.0.1:{steps.grpc_port}" in banner, banner
        yield steps.url
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()


@pytest.fixture
def provider() -> Iterator[ProviderSimulator]:
    with ProviderSimulator(lambda body: TIMING) as simulator:
        yield simulator


def run_app(code: str, tmp_path: Path, provider: ProviderSimulator) -> subprocess.CompletedProcess[str]:
    (tmp_path / "app.py").write_text(code)
    env = clean_env(OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=provider.base_url)
    return subprocess.run(
        command(["python", "app.py"]), cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )


def stored_requests(url: str, expected: int) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 60
    rows: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        rows = httpx.get(f"{url}/api/requests", params={"since": "10m"}).json()["requests"]
        if len(rows) >= expected:
            return rows
        time.sleep(0.3)
    raise AssertionError(f"{len(rows)} of {expected} requests stored: {rows}")


def test_the_getting_started_section_runs_as_written(
    steps: Steps, collector: str, provider: ProviderSimulator, tmp_path: Path
) -> None:
    run_app_step, slow_step = steps.run
    assert run_app_step == ["python", "app.py"]
    done = run_app(steps.app, tmp_path, provider)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"  # the simulated provider's answer, printed by the app

    (request,) = stored_requests(collector, 1)
    assert (request["service"], request["name"], request["span_count"]) == ("shop", "POST /chat", 4)
    parts = request["parts"]
    assert sum(parts.values()) == request["e2e_ns"]  # the parts add up to what the user waited
    assert parts["retrieval"] >= 50 * MS and parts["tool"] >= 20 * MS  # the two sleeps
    model_parts = request["e2e_ns"] - parts["retrieval"] - parts["tool"] - parts["app_other"]
    assert model_parts >= 130 * MS  # the provider held the answer 130 ms

    shown = subprocess.run(command(slow_step), capture_output=True, text=True, timeout=60, env=clean_env())
    assert shown.returncode == 0, shown.stderr
    assert request["trace_id"] in shown.stdout and "POST /chat" in shown.stdout, shown.stdout


def test_without_the_request_root_every_step_is_its_own_request(
    steps: Steps, collector: str, provider: ProviderSimulator, tmp_path: Path
) -> None:
    root = '@latencylens.request(name="POST /chat")'
    assert steps.app.count(root) == 1
    without_root = "\n".join(line for line in steps.app.splitlines() if not line.startswith(root))
    done = run_app(without_root, tmp_path, provider)
    assert done.returncode == 0, done.stderr
    rows = stored_requests(collector, 3)
    assert len(rows) == 3 and all(row["span_count"] == 1 for row in rows), rows
    assert "POST /chat" not in {row["name"] for row in rows}
