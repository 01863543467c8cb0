"""``latencylens serve`` as a user starts it (a real subprocess): the banner, a quiet access log,
and every fatal misconfiguration ending at start with its one line and exit code."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from otlp_builders import chat_trace, protobuf_body, recent_base_ns

from latencylens_collector import __version__

START_TIMEOUT_S = 120
READY_LINE = "Press Ctrl-C to stop."


def clean_env() -> dict[str, str]:
    """The process environment without LatencyLens's settings, so nothing but the options counts."""
    return {name: value for name, value in os.environ.items() if not name.startswith("LATENCYLENS_")}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def serve_command(*options: str) -> list[str]:
    return [sys.executable, "-m", "latencylens_collector.cli.main", "serve", *options]


def run_serve(cwd: Path, *options: str) -> subprocess.CompletedProcess[str]:
    """A ``serve`` expected to end by itself (a refused start)."""
    return subprocess.run(
        serve_command(*options),
        cwd=cwd,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT_S,
    )


@dataclass
class Served:
    process: subprocess.Popen[str]
    banner: list[str]
    data_dir: Path
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def grpc_port(self) -> int:
        line = next(line for line in self.banner if line.startswith("  OTLP/gRPC"))
        return int(line.rsplit(":", 1)[1])

    def stop(self) -> str:
        """Ctrl-C, then what it printed after the banner (uvicorn's access log goes to standard
        output, its other messages to standard error)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        out, err = self.process.communicate(timeout=60)
        return out + err


@contextlib.contextmanager
def serving(cwd: Path, data_dir: Path, *options: str) -> Iterator[Served]:
    port = free_port()
    process = subprocess.Popen(
        serve_command("--port", str(port), "--grpc-port", "0", "--data-dir", str(data_dir), *options),
        cwd=cwd,
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    served = Served(process, [], data_dir, port)
    try:
        assert process.stdout is not None
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            line = process.stdout.readline()
            if not line:
                raise AssertionError(f"serve ended during start-up: {served.stop()}")
            served.banner.append(line.rstrip("\n"))
            if line.strip() == READY_LINE:
                break
        yield served
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate(timeout=60)


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One service for the tests that need a holder: its directory, its ports."""
    home = tmp_path_factory.mktemp("serve_home")
    with serving(home, home / "lens") as served:
        yield served


def test_banner_says_where_everything_is(running: Served) -> None:
    data = running.data_dir.resolve()
    grpc = running.grpc_port()
    assert grpc != 0
    assert running.banner == [
        f"LatencyLens collector {__version__}",
        f"  web UI      {running.url}/",
        f"  API docs    {running.url}/docs",
        f"  OTLP/HTTP   {running.url}/v1/traces",
        f"  OTLP/gRPC   127.0.0.1:{grpc}",
        f"  storage     {data} (embedded ClickHouse), database latencylens",
        "  ingest      auto (ClickHouse decodes OTLP/protobuf under load, else Python)",
        f"  metadata    {data / 'metadata.db'}",
        f"  spool       {data / 'spool' / 'latencylens'}",
        "  access log  off (--access-log or LATENCYLENS_ACCESS_LOG=true to log each request)",
        READY_LINE,
    ]
    # Everything in the one data directory, nothing in the working directory.
    assert (data / "metadata.db").is_file()
    assert (data / "spool" / "latencylens").is_dir()
    assert (data / "latencylens.lock").read_text().strip() == str(running.process.pid)
    assert not (running.data_dir.parent / ".latencylens").exists()
    with socket.create_connection(("127.0.0.1", grpc), timeout=5):
        pass  # the gRPC receiver listens where the banner says


def test_second_serve_on_the_same_data_directory_exits_at_once(running: Served, tmp_path: Path) -> None:
    done = run_serve(tmp_path, "--port", str(free_port()), "--no-grpc", "--data-dir", str(running.data_dir))
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.splitlines() == [
        f"error: the chdb directory {running.data_dir.resolve()} is in use by another process "
        f"(pid {running.process.pid}): run one collector per directory, or point every collector at one "
        "ClickHouse server (docs/deployment.md)"
    ]


def test_a_busy_port_is_one_line(running: Served, tmp_path: Path) -> None:
    done = run_serve(tmp_path, "--port", str(running.port), "--no-grpc", "--data-dir", str(tmp_path / "d"))
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.splitlines() == [
        f"error: port {running.port} on 127.0.0.1 is in use (another latencylens serve?): stop that "
        "process or choose another port with --port"
    ]


def test_a_busy_grpc_port_is_one_line(running: Served, tmp_path: Path) -> None:
    grpc = running.grpc_port()
    done = run_serve(
        tmp_path, "--port", str(free_port()), "--grpc-port", str(grpc), "--data-dir", str(tmp_path / "d")
    )
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.splitlines() == [
        f"error: OTLP/gRPC port {grpc} on 127.0.0.1 is in use (another latencylens serve?): stop that "
        "process or choose another port with --grpc-port, or turn gRPC off with --no-grpc"
    ]


def test_a_dsn_that_is_not_clickhouse_is_refused(tmp_path: Path) -> None:
    done = run_serve(tmp_path, "--dsn", "postgres://lens:secret@db:5432/lens")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.splitlines() == [
        "error: 'postgres://lens:***@db:5432/lens' is not a ClickHouse DSN (LATENCYLENS_CLICKHOUSE_DSN, "
        "--dsn): use chdb:///abs/dir (embedded) or http(s)://user:password@host:8123 (a ClickHouse server)"
    ]
    assert not (tmp_path / ".latencylens").exists()  # refused before anything was created


def test_a_data_directory_that_cannot_be_written_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("not a directory")
    target = tmp_path / "a-file" / "data"
    done = run_serve(tmp_path, "--port", str(free_port()), "--no-grpc", "--data-dir", str(target))
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.splitlines() == [
        f"error: cannot write to {target} (Not a directory): choose a directory you can write to with "
        "--data-dir (or LATENCYLENS_DATA_DIR)"
    ]


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only directory")
def test_a_read_only_directory_is_one_line(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        done = run_serve(tmp_path, "--port", str(free_port()), "--no-grpc", "--data-dir", str(locked / "d"))
    finally:
        locked.chmod(0o755)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.splitlines() == [
        f"error: cannot write to {locked / 'd'} (Permission denied): choose a directory you can write "
        "to with --data-dir (or LATENCYLENS_DATA_DIR)"
    ]


def test_exports_are_not_logged_unless_asked(tmp_path: Path) -> None:
    """Each service takes one export; only the one started with --access-log logs a line for it."""
    logs = {}
    for flag in ((), ("--access-log",)):
        with serving(tmp_path, tmp_path / f"data{len(flag)}", *flag) as served:
            answer = httpx.post(
                f"{served.url}/v1/traces",
                content=b'{"resourceSpans": []}',
                headers={"content-type": "application/json"},
            )
            assert answer.status_code == 200, answer.text
            logs[flag] = served.stop()
    assert "POST /v1/traces" not in logs[()], logs[()]
    assert '"POST /v1/traces HTTP/1.1" 200' in logs[("--access-log",)], logs[("--access-log",)]


def test_ingest_path_engine_from_the_command_line(tmp_path: Path) -> None:
    """``--ingest-path engine``: the banner says so, and an OTLP/protobuf export is stored by
    ClickHouse's views (the collector's own counter says so on /metrics)."""
    with serving(tmp_path, tmp_path / "data", "--ingest-path", "engine", "--no-grpc") as served:
        assert "  ingest      engine (ClickHouse decodes OTLP/protobuf; OTLP/JSON in Python)" in served.banner
        answer = httpx.post(
            f"{served.url}/v1/traces",
            content=protobuf_body(chat_trace(recent_base_ns())),
            headers={"content-type": "application/x-protobuf"},
            timeout=60,
        )
        assert answer.status_code == 200, answer.text
        metrics = httpx.get(f"{served.url}/metrics", timeout=60).text
        assert 'latencylens_engine_bodies_total{outcome="stored"} 1.0' in metrics
        served.stop()
    refused = run_serve(tmp_path, "--ingest-path", "rust")
    assert refused.returncode == 2
    assert "invalid choice: 'rust'" in refused.stderr


DEMO = [sys.executable, "-m", "latencylens_collector.cli.main", "demo"]


def test_the_demo_on_a_busy_port_is_one_line(tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        done = subprocess.run(
            [*DEMO, "--no-serve", "--port", str(port), "--data-dir", str(tmp_path / "d")],
            cwd=tmp_path,
            env=clean_env(),
            capture_output=True,
            text=True,
            timeout=START_TIMEOUT_S,
        )
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.splitlines() == [
        f"error: port {port} on 127.0.0.1 is in use (another latencylens serve?): stop that "
        "process or choose another port with --port"
    ]


def test_the_banner_names_a_server_without_its_password(tmp_path: Path) -> None:
    from latencylens_collector.cli.startup import banner
    from latencylens_collector.settings import Settings

    settings = Settings(
        clickhouse_dsn="https://lens:s3cret@ch.internal:8443/lens",
        metadata_url="postgresql+psycopg://lens:hunter2@db.internal/lens",
        data_dir=str(tmp_path),
        spool_dir="off",
        grpc_enabled=False,
        access_log=True,
        environ={},
    )
    lines = banner(settings, 4318, "disabled")
    assert lines[4:10] == [
        "  OTLP/gRPC   off (--no-grpc)",
        "  storage     https://lens@ch.internal:8443/lens (ClickHouse server), database latencylens",
        "  ingest      auto (ClickHouse decodes OTLP/protobuf under load, else Python)",
        "  metadata    postgresql+psycopg://lens@db.internal/lens",
        "  spool       off (LATENCYLENS_SPOOL_DIR=off)",
        "  access log  on",
    ]
    assert not any("s3cret" in line or "hunter2" in line for line in lines)


def test_the_banner_says_how_to_leave_the_python_path(tmp_path: Path) -> None:
    """``--ingest-path python`` (the default before ``auto``): the line says so and names the way
    back to ``auto``, within 80 columns."""
    from latencylens_collector.cli.startup import banner
    from latencylens_collector.settings import Settings

    settings = Settings(data_dir=str(tmp_path), ingest_path="python", environ={})
    [line] = [line for line in banner(settings, 4318, "disabled") if line.startswith("  ingest ")]
    assert line == "  ingest      python (--ingest-path auto: ClickHouse decodes under load)"
    assert len(line) <= 80
