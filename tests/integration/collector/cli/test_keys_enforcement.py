"""The first API key turns enforcement on for every collector on the metadata database, so
``keys create`` makes it an explicit step: a question at a terminal, ``--yes`` in a script."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from latencylens_collector.auth import KeyStore
from latencylens_collector.cli.keys import NOT_OVER_HTTP
from latencylens_collector.cli.main import main
from latencylens_collector.cli.output import utc

FIRST_KEY_REFUSED = (
    "error: the first API key makes every collector using this metadata database require a key at "
    "once: apps without one get 401 and their spans are dropped; run again with --yes to create it\n"
)


@pytest.fixture
def metadata_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    url = f"sqlite:///{tmp_path / 'metadata.db'}"
    monkeypatch.setenv("LATENCYLENS_METADATA_URL", url)
    return url


def keys_of(url: str) -> list[str]:
    store = KeyStore(url)
    try:
        return [key.project for key in store.list()]
    finally:
        store.close()


def test_the_first_key_needs_yes_outside_a_terminal(metadata_url: str, capsys) -> None:
    assert main(["keys", "create", "--project", "checkout"]) == 2
    out, err = capsys.readouterr()
    assert (out, err) == ("", FIRST_KEY_REFUSED)
    assert keys_of(metadata_url) == []

    assert main(["keys", "create", "--project", "checkout", "--yes"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("ll_") and "only time it is shown" in err
    # Enforcement is on already: another key changes nothing for existing callers, no question.
    assert main(["keys", "create", "--project", "search"]) == 0
    assert capsys.readouterr().out.startswith("ll_")
    assert keys_of(metadata_url) == ["checkout", "search"]


def test_a_running_collector_keeps_answering_until_the_key_is_confirmed(start_collector, capsys) -> None:
    collector = start_collector()
    url = collector.settings.metadata_url
    assert main(["keys", "create", "--project", "checkout", "--metadata-url", url]) == 2
    capsys.readouterr()
    assert httpx.get(f"{collector.url}/api/requests").status_code == 200  # still open
    assert main(["keys", "create", "--project", "checkout", "--metadata-url", url, "--yes"]) == 0
    capsys.readouterr()
    assert httpx.get(f"{collector.url}/api/requests").status_code == 401  # keys required from now on


def _create_at_a_terminal(metadata_url: str, answer: bytes) -> tuple[int, str, str]:
    """``keys create`` with a real terminal on standard input, answering the question."""
    controller, terminal = pty.openpty()
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "latencylens_collector", "keys", "create", "--project", "checkout"],
            stdin=terminal,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, "LATENCYLENS_METADATA_URL": metadata_url},
        )
        os.write(controller, answer)
        out, err = process.communicate(timeout=60)
    finally:
        os.close(controller)
        os.close(terminal)
    return process.returncode, out.decode(), err.decode()


def test_at_a_terminal_the_first_key_is_created_only_when_confirmed(metadata_url: str) -> None:
    code, out, err = _create_at_a_terminal(metadata_url, b"n\n")
    assert (code, out) == (2, "")
    assert err.endswith(
        "Create it and require keys from now on? [y/N] error: no key created: enforcement stays off\n"
    )
    assert "apps without one get 401 and their spans are dropped" in err
    assert keys_of(metadata_url) == []

    code, out, err = _create_at_a_terminal(metadata_url, b"y\n")
    assert code == 0 and out.startswith("ll_")
    assert keys_of(metadata_url) == ["checkout"]


def test_keys_take_no_url(metadata_url: str, capsys) -> None:
    for argv in (["list"], ["create", "--project", "p", "--yes"], ["revoke", "ll_x"]):
        assert main(["keys", *argv, "--url", "http://127.0.0.1:4318"]) == 2
        out, err = capsys.readouterr()
        assert (out, err) == ("", f"error: {NOT_OVER_HTTP}\n")
    assert keys_of(metadata_url) == []


def test_key_list_at_80_columns(metadata_url: str, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["keys", "create", "--project", "checkout", "--name", "prod exporter", "--yes"]) == 0
    assert main(["keys", "create", "--project", "search-indexing-pipeline"]) == 0
    capsys.readouterr()
    assert main(["keys", "list", "--json"]) == 0
    first, second = json.loads(capsys.readouterr().out)
    assert main(["keys", "revoke", second["key_id"]]) == 0
    capsys.readouterr()
    store = KeyStore(metadata_url)
    created = {key.key_id: utc(key.created_at_ns) for key in store.list()}
    store.close()
    assert main(["keys", "list"]) == 0
    id_width = max(len("key id"), len(first["key_id"]), len(second["key_id"]))
    # 80 columns hold the id, project, status and time; the name follows in a second block.
    assert capsys.readouterr().out == "\n".join(
        [
            "API keys (every ingest and query request needs one)",
            "",
            f"{'key id':<{id_width}}  project                   status   created",
            f"{'─' * id_width}  ────────────────────────  ───────  ───────────────────────",
            f"{first['key_id']:<{id_width}}  checkout                  active   {created[first['key_id']]}",
            f"{second['key_id']:<{id_width}}  search-indexing-pipeline  revoked  {created[second['key_id']]}",
            "",
            f"{'key id':<{id_width}}  name",
            f"{'─' * id_width}  ─────────────",
            f"{first['key_id']:<{id_width}}  prod exporter",
            f"{second['key_id']:<{id_width}}  -",
            "",
        ]
    )
