"""Run ``latencylens serve`` in a subprocess on a fresh embedded database, as an operator would."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from latencylens_collector.settings import chdb_dsn

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class RunningCollector:
    process: subprocess.Popen[bytes]
    url: str
    ready_s: float
    """Seconds from starting ``latencylens serve`` to the first ``/readyz`` 200."""

    # Every figure covers the collector and its child processes (the row-building worker).
    def rss_bytes(self) -> int:
        return _status_kib_sum(self.process.pid, "VmRSS") * 1024

    def rss_anon_bytes(self) -> int:
        """The anonymous part of the RSS (heaps, stacks): what a leak grows, unlike the pages of
        the chdb library mapped from disk that join the RSS as code paths are first run."""
        return _status_kib_sum(self.process.pid, "RssAnon") * 1024

    def cpu_seconds(self) -> float:
        """User and system CPU of the collector's processes (all their threads, chdb's included)."""
        ticks = 0
        for pid in _family(self.process.pid):
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:  # ended meanwhile
                continue
            ticks += int(fields[11]) + int(fields[12])
        return ticks / os.sysconf("SC_CLK_TCK")

    def peak_rss_bytes(self) -> int:
        """The sum of each process's own peak (at most what they held together)."""
        return _status_kib_sum(self.process.pid, "VmHWM") * 1024

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def _family(pid: int) -> list[int]:
    """``pid`` and every process descended from it."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
    family, frontier = [pid], [pid]
    while frontier:
        frontier = [child for child, parent in parents.items() if parent in frontier]
        family += frontier
    return family


def _status_kib_sum(pid: int, field: str) -> int:
    return sum(_status_kib(member, field) for member in _family(pid))


def _status_kib(pid: int, field: str) -> int:
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:  # ended meanwhile
        return 0
    for line in lines:
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start(
    directory: Path, ready_timeout_s: float = 120.0, env: dict[str, str] | None = None
) -> RunningCollector:
    """A collector serving on a free port with its database, spool and metadata in ``directory``
    (emptied first), ``env`` added to its environment; returns once ``/readyz`` answers 200."""
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    port = free_port()
    env = {
        **os.environ,
        "LATENCYLENS_GRPC_ENABLED": "0",
        "LATENCYLENS_SPOOL_DIR": str(directory / "spool"),
        "LATENCYLENS_METADATA_URL": f"sqlite:///{directory / 'metadata.db'}",
        "LATENCYLENS_SLO_EVAL_INTERVAL_S": "0",
        **(env or {}),
    }
    command = [
        str(Path(sys.executable).with_name("latencylens")),
        "serve",
        "--port",
        str(port),
        "--dsn",
        chdb_dsn(directory / "data"),
        "--database",
        "bench",
        "--log-level",
        "warning",
    ]
    began = time.perf_counter()
    process = subprocess.Popen(command, env=env, cwd=ROOT)
    url = f"http://127.0.0.1:{port}"
    deadline = began + ready_timeout_s
    with httpx.Client(timeout=2.0) as client:
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"latencylens serve exited with {process.returncode}")
            try:
                if client.get(f"{url}/readyz").status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.perf_counter() > deadline:
                process.kill()
                raise RuntimeError(f"latencylens serve not ready within {ready_timeout_s:.0f} s")
            time.sleep(0.02)
    return RunningCollector(process, url, time.perf_counter() - began)
