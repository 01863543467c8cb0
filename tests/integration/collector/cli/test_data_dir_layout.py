"""One data directory holds the embedded ClickHouse, the metadata database and the spool; a data
directory from an earlier version keeps what it had at the older places, and says so."""

from __future__ import annotations

from pathlib import Path

import pytest

from latencylens_collector.settings import Settings, legacy_locations


@pytest.fixture
def cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path.resolve()


def test_each_data_directory_holds_its_own_metadata_and_spool(cwd: Path) -> None:
    """Two collectors in one parent directory: nothing shared (the spool used to be shared, so the
    second ran without one)."""
    first = Settings(clickhouse_dsn=f"chdb://{cwd / 'a'}", environ={})
    second = Settings(data_dir=str(cwd / "b"), environ={})
    for settings, name in ((first, "a"), (second, "b")):
        assert settings.data_dir == cwd / name
        assert settings.clickhouse_dsn == f"chdb://{cwd / name}"
        assert settings.metadata_url == f"sqlite:///{cwd / name / 'metadata.db'}"
        assert settings.spool_dir == cwd / name / "spool" / "latencylens"
        assert legacy_locations(settings) == []


def test_a_server_dsn_keeps_metadata_and_spool_in_the_data_directory(cwd: Path) -> None:
    settings = Settings(clickhouse_dsn="http://lens:pw@ch:8123", data_dir="lens-data", environ={})
    assert settings.metadata_url == f"sqlite:///{cwd / 'lens-data' / 'metadata.db'}"
    assert settings.spool_dir == cwd / "lens-data" / "spool" / "latencylens"


def test_the_default_directory_of_an_earlier_version_keeps_its_metadata_database(cwd: Path) -> None:
    (cwd / ".latencylens" / "data").mkdir(parents=True)
    legacy = cwd / ".latencylens" / "metadata.db"
    legacy.write_bytes(b"")
    settings = Settings(environ={})
    assert settings.metadata_url == f"sqlite:///{legacy}"
    assert legacy_locations(settings) == [
        f"metadata database kept at {legacy}, where earlier versions put it; to keep it in the data "
        f"directory, stop the service and move it to {cwd / '.latencylens' / 'data' / 'metadata.db'}"
    ]
    # Once moved, the data directory's is used and nothing is said.
    legacy.rename(cwd / ".latencylens" / "data" / "metadata.db")
    moved = Settings(environ={})
    assert moved.metadata_url == f"sqlite:///{cwd / '.latencylens' / 'data' / 'metadata.db'}"
    assert legacy_locations(moved) == []


def test_a_new_data_directory_does_not_take_the_working_directorys_old_database(cwd: Path) -> None:
    (cwd / ".latencylens").mkdir()
    (cwd / ".latencylens" / "metadata.db").write_bytes(b"")
    settings = Settings(data_dir="fresh", environ={})
    assert settings.metadata_url == f"sqlite:///{cwd / 'fresh' / 'metadata.db'}"


def test_an_old_spool_with_batches_is_used_until_it_is_empty(cwd: Path) -> None:
    data = cwd / "lens"
    (data / "metadata").mkdir(parents=True)  # chdb's own files: an existing directory
    old_spool = cwd / "spool" / "latencylens"  # next to the chdb directory, as before
    old_spool.mkdir(parents=True)
    batch = old_spool / "00000001-b1-3.spool"
    batch.write_bytes(b"{}")
    settings = Settings(clickhouse_dsn=f"chdb://{data}", environ={})
    assert settings.spool_dir == old_spool
    assert legacy_locations(settings) == [
        f"spool kept at {old_spool}, where earlier versions put it, until its batches are written; "
        f"later starts use {data / 'spool' / 'latencylens'}"
    ]
    batch.unlink()  # replayed
    assert Settings(clickhouse_dsn=f"chdb://{data}", environ={}).spool_dir == data / "spool" / "latencylens"
