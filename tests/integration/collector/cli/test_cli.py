"""The command line against a running collector."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable

import pytest
from otlp_builders import chat_trace, post_protobuf, recent_base_ns

from latencylens_collector.cli.main import main
from latencylens_collector.settings import Settings


@pytest.fixture
def loaded(collector):
    base = recent_base_ns()
    post_protobuf(collector.url, chat_trace(base, service="shop", model="m-small", scale=1))
    post_protobuf(collector.url, chat_trace(base, service="shop", model="m-big", scale=2))
    return collector


def test_slow_json(loaded, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["slow", "--url", loaded.url, "--json", "--limit", "1"]) == 0
    output = json.loads(capsys.readouterr().out)
    [request] = output["requests"]
    assert request["model"] == "m-big"
    assert request["e2e_ns"] == 2_000_000_000


def test_slow_table(loaded, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "160")
    assert main(["slow", "--url", loaded.url, "--service", "shop"]) == 0
    out = capsys.readouterr().out
    for header in ("trace id", "e2e", "app", "network", "queue", "prefill", "decode", "unattributed"):
        assert header in out
    assert "2000.0" in out and "1000.0" in out  # e2e ms, slowest first
    assert out.index("2000.0") < out.index("1000.0")
    assert "m-big" in out
    assert "800.0" in out  # decode of the 2000 ms request


def test_slow_narrow_console_keeps_the_numbers(loaded, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["slow", "--url", loaded.url]) == 0
    out = capsys.readouterr().out
    assert "2000.0" in out and "800.0" in out


def test_slow_with_no_match(loaded, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["slow", "--url", loaded.url, "--service", "nobody"]) == 0
    assert "no requests" in capsys.readouterr().out


def test_slow_unreachable(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["slow", "--url", "http://127.0.0.1:9"]) == 3
    assert "cannot reach" in capsys.readouterr().err


def test_migrate_command(make_settings: Callable[..., Settings], capsys: pytest.CaptureFixture[str]) -> None:
    settings = make_settings()
    args = ["migrate", "--dsn", settings.clickhouse_dsn, "--database", settings.database]
    assert main(args) == 0
    assert "applied 0001_spans" in capsys.readouterr().out
    assert main(args) == 0
    assert "up to date" in capsys.readouterr().out


@pytest.mark.parametrize("command", [[], ["serve"], ["migrate"], ["slow"], ["demo"]])
def test_help_exits_zero(command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([*command, "--help"])
    assert exit_info.value.code == 0
    assert "usage: latencylens" in capsys.readouterr().out


def test_demo_missing_module_is_an_error(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.setitem(sys.modules, "latencylens_collector.demo", None)
    assert main(["demo", "--no-serve"]) == 2
    assert "demo" in capsys.readouterr().err
