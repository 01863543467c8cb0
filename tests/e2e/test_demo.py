"""`latencylens demo` — what `make run` runs — works from start to finish."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

COMPONENT_HEADERS = ("queue", "prefill", "decode", "network")


def test_demo_prints_explained_slow_requests(tmp_path: Path) -> None:
    env = {**os.environ, "COLUMNS": "200"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "latencylens_collector.cli.main",
            "demo",
            "--requests",
            "4",
            "--no-serve",
            "--port",
            "0",
            "--data-dir",
            str(tmp_path / "data"),
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        env=env,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "request   4/4" in out
    assert "Where to look" in out
    assert "/api/requests" in out
    for header in COMPONENT_HEADERS:
        assert header in out.lower()
    assert "POST /chat" in out
