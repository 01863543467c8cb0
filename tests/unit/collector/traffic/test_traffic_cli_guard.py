"""``latencylens replay`` refuses before sending anything: a remote endpoint without the flag, a
missing target, two schedules at once."""

from __future__ import annotations

import pytest

from latencylens_collector.cli.errors import USAGE
from latencylens_collector.cli.main import main

UNUSED_SERVICE = "http://127.0.0.1:9"  # never asked: every refusal comes first


def test_remote_endpoint_needs_allow_remote(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        ["replay", "--url", UNUSED_SERVICE, "--base-url", "https://api.openai.com/v1", "--model", "gpt-4o"]
    )
    assert code == USAGE
    assert "is not this machine: pass --allow-remote" in capsys.readouterr().err


def test_sending_needs_a_target(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", "--url", UNUSED_SERVICE, "--model", "m"]) == USAGE
    assert "--base-url and --model are needed" in capsys.readouterr().err


def test_one_schedule_at_a_time(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(
            [
                "replay",
                "--base-url",
                "http://127.0.0.1:8000/v1",
                "--model",
                "m",
                "--speed",
                "2",
                "--rate",
                "3",
            ]
        )
    assert exit_.value.code == USAGE
    assert "not allowed with argument" in capsys.readouterr().err


def test_cost_estimate_at_the_targets_prices() -> None:
    from latencylens_collector.cli.replay import cost_estimate
    from latencylens_collector.traffic import RequestShape, Target, plan

    shapes = [RequestShape(0, 59_000, 1_000), RequestShape(10, 609, 451)]
    groq = Target(base_url="http://127.0.0.1:1/v1", model="llama-3.3-70b-versatile", provider="groq")
    # Groq's Llama 3.3 70B in genai-prices: $0.59 per million input, $0.79 per million output
    # tokens: 59,609 * 0.59e-6 + 1,451 * 0.79e-6 = 0.03516931 + 0.00114629 = $0.0363.
    assert cost_estimate(plan(shapes), groq).startswith("about $0.0363 at groq's prices (genai-prices ")
    local = Target(base_url="http://127.0.0.1:1/v1", model="my-finetune", provider="vllm")
    assert cost_estimate(plan(shapes), local) == "no cost estimate (no price for my-finetune at vllm)"
