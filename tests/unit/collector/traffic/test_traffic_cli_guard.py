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
