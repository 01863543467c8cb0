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
