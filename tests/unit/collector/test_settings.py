"""Settings: argument, then environment, then default; one declaration per setting."""

from __future__ import annotations

from pathlib import Path

import pytest

from latencylens_collector.settings import DEFAULT_DATABASE, DEFAULT_PORT, Settings, env_var, redact_dsn

# A value for every setting that differs from its default, as its environment variable would hold it.
NON_DEFAULT_TEXT = {
    "data_dir": "/srv/lens",
    "clickhouse_dsn": "http://h:8123",
    "database": "from_env",
    "index_cache_bytes": "0",
    "host": "0.0.0.0",
    "port": "9999",
    "max_body_bytes": "1024",
    "grpc_port": "14317",
    "grpc_enabled": "false",
    "spool_dir": "off",
    "max_queue_spans": "7",
    "max_queue_bytes": "1000",
    "queue_project_share": "0.25",
    "project_cpu_share": "0.75",
    "max_batch_spans": "3",
    "max_batch_bytes": "2000",
    "max_span_bytes": "3000",
    "max_trace_spans": "4",
    "flush_interval_ms": "5",
    "max_attribute_bytes": "100",
    "ingest_path": "engine",
    "store_content": "true",
    "content_max_bytes": "200",
    "metadata_url": "postgresql+psycopg://lens@db/lens",
    "slo_file": "/etc/lens/slos.yaml",
    "slo_eval_interval_s": "15",
    "rollup_interval_s": "0",
    "rollup_settle_s": "5",
    "reconcile_interval_s": "0",
    "reconcile_settle_s": "3",
    "reconcile_lookback_s": "60",
    "slo_webhook_urls": "http://a/hook",
    "slo_slack_webhook_urls": "https://hooks.slack.test/x",
    "public_url": "https://lens.internal",
    "clickhouse_cluster": "main",
    "spans_retention_days": "30",
    "requests_retention_days": "90",
    "allow_unauthenticated": "true",
    "max_spool_bytes": "4096",
    "allowed_hosts": "lens.internal",
    "header_timeout_s": "3",
    "body_timeout_s": "7",
    "keep_alive_timeout_s": "2",
    "max_connections": "64",
    "metrics_top_series": "9",
    "access_log": "true",
    "prices": '{"vllm/my-llama": {"input": 0.5, "output": 1.5}}',
}


def test_defaults_resolve_an_absolute_chdb_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    settings = Settings(environ={})
    data = (Path.cwd() / ".latencylens" / "data").resolve()
    assert settings.data_dir == data
    assert settings.clickhouse_dsn == f"chdb://{data}"
    assert settings.database == DEFAULT_DATABASE
    assert (settings.host, settings.port) == ("127.0.0.1", DEFAULT_PORT)
    assert settings.max_body_bytes == 8 * 1024 * 1024
    # One data directory holds everything (docs/deployment.md#one-data-directory).
    assert settings.spool_dir == data / "spool" / DEFAULT_DATABASE
    assert settings.metadata_url == f"sqlite:///{data / 'metadata.db'}"
    assert (settings.grpc_enabled, settings.store_content, settings.allow_unauthenticated) == (
        True,
        False,
        False,
    )


def test_argument_beats_environment_beats_default() -> None:
    env = {
        env_var("database"): "from_env",
        env_var("port"): "9999",
        env_var("host"): "0.0.0.0",
        env_var("clickhouse_dsn"): "http://h:8123",
    }
    from_env = Settings(environ=env)
    assert (from_env.database, from_env.port, from_env.host) == ("from_env", 9999, "0.0.0.0")
    assert from_env.clickhouse_dsn == "http://h:8123"
    from_args = Settings(database="from_arg", port=1234, environ=env)
    assert (from_args.database, from_args.port) == ("from_arg", 1234)
    # None or "" is an argument not given (an unset CLI option), and an empty variable is unset.
    assert Settings(database=None, host="", environ=env).database == "from_env"
    assert Settings(database=None, host="", environ=env).host == "0.0.0.0"
    assert Settings(environ={env_var("port"): ""}).port == DEFAULT_PORT


def test_every_setting_is_read_from_its_environment_variable() -> None:
    assert set(NON_DEFAULT_TEXT) == set(Settings.model_fields)  # a new setting needs a line above
    default = Settings(environ={})
    from_env = Settings(environ={env_var(name): text for name, text in NON_DEFAULT_TEXT.items()})
    for name in NON_DEFAULT_TEXT:
        assert getattr(from_env, name) != getattr(default, name), name
    assert from_env.spool_dir is None and from_env.store_content is True
    assert (from_env.content_max_bytes, from_env.clickhouse_cluster) == (200, "main")


def test_the_process_environment_is_read_without_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LATENCYLENS_MAX_BATCH_SPANS", "77")
    monkeypatch.setenv("LATENCYLENS_API_KEY", "an SDK variable, not a collector setting")
    assert Settings().max_batch_spans == 77
    assert Settings(environ={}).max_batch_spans == 10_000


def test_relative_chdb_path_is_made_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    settings = Settings(clickhouse_dsn="chdb://data", environ={})
    assert settings.clickhouse_dsn == f"chdb://{tmp_path.resolve() / 'data'}"
    assert settings.data_dir == tmp_path.resolve() / "data"
    assert settings.spool_dir == tmp_path.resolve() / "data" / "spool" / DEFAULT_DATABASE


@pytest.mark.parametrize("name", ["bad-name", "x; DROP TABLE y", ""])
def test_database_name_must_be_an_identifier(name: str) -> None:
    if not name:
        assert Settings(database=name, environ={}).database == DEFAULT_DATABASE
        return
    with pytest.raises(ValueError, match="invalid database name"):
        Settings(database=name, environ={})


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({"LATENCYLENS_PORT": "80a"}, "^LATENCYLENS_PORT must be an integer, got '80a'$"),
        ({"LATENCYLENS_CLICKHOUSE_CLUSTER": "a b"}, "^invalid cluster name 'a b'"),
        ({"LATENCYLENS_SPANS_RETENTION_DAYS": "-1"}, "^retention days must be 0"),
        ({"LATENCYLENS_ALLOW_UNAUTHENTICATED": "maybe"}, "^LATENCYLENS_ALLOW_UNAUTHENTICATED: .*boolean"),
    ],
)
def test_bad_values_name_their_variable(environ: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Settings(environ=environ)


def test_unknown_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown setting 'prot'"):
        Settings(prot=1, environ={})
    with pytest.raises(KeyError):
        env_var("prot")


def test_repr_hides_password() -> None:
    settings = Settings(clickhouse_dsn="https://user:secret@host:8443/db", environ={})
    assert "secret" not in repr(settings) and "secret" not in str(settings)
    assert redact_dsn("postgresql+psycopg://lens:pw@db/lens") == "postgresql+psycopg://lens:***@db/lens"
