"""docker-compose accepts the production-like stack and resolves it to the intended services."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from xml.etree import ElementTree

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]


def compose_config(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("docker-compose")
    if binary is None:
        pytest.skip("docker-compose not installed (apt-get install docker-compose; `make test` does)")
    return subprocess.run(
        [binary, "-f", str(REPO / "docker-compose.yml"), "config", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        env={"PATH": "/usr/bin:/bin", **(env or {})},
        check=False,
    )


def test_dashboards_compose_config_is_accepted() -> None:
    done = compose_config()
    assert done.returncode == 0, done.stderr
    resolved = yaml.safe_load(done.stdout)
    services = resolved["services"]
    assert set(services) == {"clickhouse", "latencylens", "grafana"}
    assert services["latencylens"]["build"]["context"] == str(REPO)
    assert (REPO / "Dockerfile").is_file()
    dsn = services["latencylens"]["environment"]["LATENCYLENS_CLICKHOUSE_DSN"]
    assert dsn == "http://latencylens:latencylens@clickhouse:8123/latencylens"
    assert services["grafana"]["environment"]["GF_INSTALL_PLUGINS"] == "grafana-clickhouse-datasource"
    assert set(services["grafana"]["depends_on"]) == {"clickhouse", "latencylens"}
    assert set(resolved["volumes"]) >= {"clickhouse-data", "grafana-data"}
    for service in services.values():
        for volume in service.get("volumes", []):
            # docker-compose v1 prints "source:target[:mode]", v2 prints a mapping.
            source = volume["source"] if isinstance(volume, dict) else volume.split(":")[0]
            if source.startswith("/"):
                assert Path(source).exists(), source


def test_the_server_starts_with_a_cache_for_index_blocks() -> None:
    done = compose_config()
    assert done.returncode == 0, done.stderr
    mounts = {}
    for volume in yaml.safe_load(done.stdout)["services"]["clickhouse"]["volumes"]:
        source, target = (
            (volume["source"], volume["target"]) if isinstance(volume, dict) else volume.split(":")[:2]
        )
        mounts[target] = source
    source = Path(mounts["/etc/clickhouse-server/config.d/latencylens-index-cache.xml"])
    setting = ElementTree.parse(source).getroot().find("index_uncompressed_cache_size")
    assert setting is not None and int(setting.text or "") == 1 << 30


def test_dashboards_compose_takes_the_password_from_the_environment() -> None:
    done = compose_config(env={"LATENCYLENS_CLICKHOUSE_PASSWORD": "s3cret"})
    assert done.returncode == 0, done.stderr
    services = yaml.safe_load(done.stdout)["services"]
    assert services["clickhouse"]["environment"]["CLICKHOUSE_PASSWORD"] == "s3cret"
    assert (
        "latencylens:s3cret@clickhouse"
        in services["latencylens"]["environment"]["LATENCYLENS_CLICKHOUSE_DSN"]
    )
    assert services["grafana"]["environment"]["LATENCYLENS_GRAFANA_CLICKHOUSE_PASSWORD"] == "s3cret"
