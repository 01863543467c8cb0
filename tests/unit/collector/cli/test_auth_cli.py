"""``latencylens keys create/list/revoke`` and ``serve``'s refusal to listen publicly without keys."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from latencylens_collector.auth import KeyStore
from latencylens_collector.cli.main import main


@pytest.fixture
def metadata_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    url = f"sqlite:///{tmp_path / 'meta' / 'metadata.db'}"
    monkeypatch.setenv("LATENCYLENS_METADATA_URL", url)
    return url


def test_create_list_revoke_round_trip(metadata_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["keys", "create", "--project", "checkout", "--name", "prod exporter", "--yes"]) == 0
    out, err = capsys.readouterr()
    raw = out.strip()
    assert raw.startswith("ll_") and "only time it is shown" in err

    assert main(["keys", "list", "--json"]) == 0
    [listed] = json.loads(capsys.readouterr().out)
    assert listed["project"] == "checkout" and listed["name"] == "prod exporter"
    assert listed["revoked_at"] is None
    assert raw.startswith(f"ll_{listed['key_id']}_")
    assert raw not in json.dumps(listed)
    assert KeyStore(metadata_url).authenticate(raw) == "checkout"

    assert main(["keys", "list"]) == 0
    table = capsys.readouterr().out
    assert listed["key_id"] in table and "active" in table and raw not in table

    assert main(["keys", "revoke", listed["key_id"]]) == 0
    assert "revoked" in capsys.readouterr().out
    assert main(["keys", "revoke", listed["key_id"]]) == 1
    assert "no active key" in capsys.readouterr().err
    assert KeyStore(metadata_url).authenticate(raw) is None
    assert main(["keys", "list", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["revoked_at"] is not None


def test_create_rejects_a_bad_project_name(metadata_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["keys", "create", "--project", "a b"]) == 2
    assert "invalid project name" in capsys.readouterr().err


def test_serve_refuses_a_public_interface_without_keys(
    metadata_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LATENCYLENS_ALLOW_UNAUTHENTICATED", raising=False)
    assert main(["serve", "--host", "0.0.0.0", "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert "refusing to listen on 0.0.0.0" in err and "latencylens keys create" in err


def test_keys_and_slo_migrate_use_the_data_directory_serve_uses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--data-dir`` (as ``serve`` takes it) puts the keys in that directory's metadata.db."""
    monkeypatch.delenv("LATENCYLENS_METADATA_URL", raising=False)
    monkeypatch.chdir(tmp_path)
    data = tmp_path / "elsewhere"
    assert main(["slo", "migrate", "--data-dir", str(data)]) == 0
    assert str(data / "metadata.db") in capsys.readouterr().out
    assert main(["keys", "create", "--project", "checkout", "--yes", "--data-dir", str(data)]) == 0
    raw = capsys.readouterr().out.strip()
    assert KeyStore(f"sqlite:///{data / 'metadata.db'}").authenticate(raw) == "checkout"
    assert not (tmp_path / ".latencylens").exists()


@pytest.mark.parametrize("command", [["keys", "list"], ["slo", "migrate"]])
def test_a_metadata_url_that_does_not_parse_is_one_line(
    command: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("LATENCYLENS_METADATA_URL", "postgres ql://nohost")
    assert main(command) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is not a database URL" in err and "Traceback" not in err
