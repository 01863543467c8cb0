"""AIPerf's own loader reads the mooncake trace LatencyLens exports (aiperf run in its own Python).

AIPerf pins versions this project's environment does not share (rich, pytest plugins, tokenizers),
so it is not a dependency: point ``LATENCYLENS_TEST_AIPERF_PYTHON`` at an interpreter with
``pip install aiperf`` to run this test (it needs no network); without it the test is skipped and
``tests/unit/collector/traffic/test_traffic_files.py`` checks the file against AIPerf's schema.
"""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from pathlib import Path

import pytest

from latencylens_collector.traffic.mooncake import dump, to_mooncake
from latencylens_collector.traffic.shape import RequestShape

AIPERF_PYTHON_ENV = "LATENCYLENS_TEST_AIPERF_PYTHON"
MS = 1_000_000
SHAPES = [
    RequestShape(0, 1200, 40, cached_input_tokens=1024, source_trace_id="a" * 32, route="POST /chat"),
    RequestShape(250 * MS, 700, 12, cached_input_tokens=0, source_trace_id="b" * 32, route="POST /chat"),
    RequestShape(
        1_500 * MS + 400_000, 1600, 80, cached_input_tokens=1100, source_trace_id="c" * 32, route="POST /chat"
    ),
    RequestShape(2_000 * MS, 600, 5, cached_input_tokens=512, source_trace_id="d" * 32, route="POST /search"),
]


@pytest.mark.skipif(
    not os.environ.get(AIPERF_PYTHON_ENV), reason=f"set {AIPERF_PYTHON_ENV} to run AIPerf's loader"
)
def test_aiperf_loads_the_exported_trace(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    trace.write_text("".join(f"{line}\n" for line in dump(to_mooncake(SHAPES))), encoding="utf-8")
    # load_dataset parses and groups the file; the prompt generator (which needs a tokenizer
    # download) is only used later, to write prompts, so a stand-in with the fields it resets is enough.
    script = textwrap.dedent(
        f"""
        import json
        from types import SimpleNamespace
        from aiperf.dataset.loader.mooncake_trace import MooncakeTraceDatasetLoader
        generator = SimpleNamespace(tokenizer=SimpleNamespace(resolved_name="none"),
            _hash_id_corpus_rng=SimpleNamespace(set_trace_id=lambda _: None), _cache={{}})
        loader = MooncakeTraceDatasetLoader(filename={str(trace)!r}, prompt_generator=generator)
        data = loader.load_dataset()
        print(json.dumps({{k: [[t.timestamp, t.input_length, t.output_length, t.hash_ids] for t in v]
                          for k, v in data.items()}}))
        """
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [os.environ[AIPERF_PYTHON_ENV], "-c", script], capture_output=True, text=True, timeout=120, env=env
    )
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stdout.strip().splitlines()[-1])
    assert loaded == {
        "a" * 32: [[0, 1200, 40, [0, 1, 2]]],
        "b" * 32: [[250, 700, 12, None]],
        "c" * 32: [[1500, 1600, 80, [0, 1, 3, 4]]],
        "d" * 32: [[2000, 600, 5, [5, 6]]],
    }
