from __future__ import annotations

from pathlib import Path

import pytest

from latencylens_collector.settings import (
    DEFAULT_DATABASE,
    DEFAULT_PORT,
    ENV_CLICKHOUSE_DSN,
    ENV_DATABASE,
    ENV_HOST,
    ENV_PORT,
    Settings,
)


def test_defaults_resolve_an_absolute_chdb_directory() -> None:
    settings = Settings(environ={})
    assert settings.clickhouse_dsn == f"chdb://{(Path.cwd() / '.latencylens' / 'data').resolve()}"
    assert settings.database == DEFAULT_DATABASE
    assert (settings.host, settings.port) == ("127.0.0.1", DEFAULT_PORT)
    assert settings.max_body_bytes == 16 * 1024 * 1024


def test_argument_beats_environment_beats_default() -> None:
    env = {
        ENV_DATABASE: "from_env",
        ENV_PORT: "9999",
        ENV_HOST: "0.0.0.0",
        ENV_CLICKHOUSE_DSN: "http://h:8123",
    }
    from_env = Settings(environ=env)
    assert (from_env.database, from_env.port, from_env.host) == ("from_env", 9999, "0.0.0.0")
    assert from_env.clickhouse_dsn == "http://h:8123"
    from_args = Settings(database="from_arg", port=1234, environ=env)
    assert (from_args.database, from_args.port) == ("from_arg", 1234)


def test_relative_chdb_path_is_made_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    settings = Settings(clickhouse_dsn="chdb://data", environ={})
    assert settings.clickhouse_dsn == f"chdb://{tmp_path.resolve() / 'data'}"


@pytest.mark.parametrize("name", ["bad-name", "x; DROP TABLE y", ""])
def test_database_name_must_be_an_identifier(name: str) -> None:
    if not name:
        assert Settings(database=name, environ={}).database == DEFAULT_DATABASE
        return
    with pytest.raises(ValueError, match="invalid database name"):
        Settings(database=name, environ={})


def test_repr_hides_password() -> None:
    settings = Settings(clickhouse_dsn="https://user:secret@host:8443/db", environ={})
    assert "secret" not in repr(settings)
