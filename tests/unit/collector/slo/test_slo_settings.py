"""SLO settings: argument, then environment, then default."""

from __future__ import annotations

from pathlib import Path

import pytest

from latencylens_collector.settings import Settings


def test_defaults(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    settings = Settings(environ={})
    assert settings.metadata_url == f"sqlite:///{tmp_path.resolve()}/.latencylens/data/metadata.db"
    assert settings.slo_file is None
    assert settings.slo_eval_interval_s == 60
    assert settings.slo_webhook_urls == () and settings.slo_slack_webhook_urls == ()
    assert settings.public_url == "http://127.0.0.1:4318"


def test_environment_and_arguments() -> None:
    env = {
        "LATENCYLENS_METADATA_URL": "postgresql+psycopg://lens@db/lens",
        "LATENCYLENS_SLO_FILE": "/etc/lens/slos.yaml",
        "LATENCYLENS_SLO_EVAL_INTERVAL_S": "15",
        "LATENCYLENS_SLO_WEBHOOK_URLS": "http://a/hook, http://b/hook",
        "LATENCYLENS_SLO_SLACK_WEBHOOK_URLS": "https://hooks.slack.test/x",
        "LATENCYLENS_PUBLIC_URL": "https://lens.internal/",
    }
    settings = Settings(environ=env)
    assert settings.metadata_url == "postgresql+psycopg://lens@db/lens"
    assert settings.slo_file == "/etc/lens/slos.yaml"
    assert settings.slo_eval_interval_s == 15
    assert settings.slo_webhook_urls == ("http://a/hook", "http://b/hook")
    assert settings.slo_slack_webhook_urls == ("https://hooks.slack.test/x",)
    assert settings.public_url == "https://lens.internal"
    assert Settings(slo_eval_interval_s=0, environ=env).slo_eval_interval_s == 0
    with pytest.raises(ValueError, match="LATENCYLENS_SLO_EVAL_INTERVAL_S"):
        Settings(environ={"LATENCYLENS_SLO_EVAL_INTERVAL_S": "soon"})
