"""The Python versions the project says it runs on: the SDK on the oldest its ``requires-python``
admits (apps pin old interpreters), the collector and tests on 3.11 or newer, which ``make``
enforces with a message that says what to do, before it makes a virtualenv it cannot fill.

The oldest interpreter is taken from the PATH (``python3.10``) or pyenv; without one these tests are
skipped with that reason."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
REQUIRES = PROJECT["requires-python"]
OLDEST = re.fullmatch(r">=\s*(\d+\.\d+)", REQUIRES).group(1)  # type: ignore[union-attr]
COLLECTOR_NEEDS = (3, 11)

PROBE = Path(__file__).with_name("sdk_spans_probe.py")


def _find(version: str) -> str | None:
    """``python<version>`` from the PATH or from pyenv's versions, checked to be that version."""
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    candidates = [shutil.which(f"python{version}"), *sorted(map(str, pyenv.glob(f"{version}.*/bin/python")))]
    for found in filter(None, candidates):
        printed = subprocess.run(
            [found, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], capture_output=True, text=True
        )
        if printed.returncode == 0 and printed.stdout.strip() == version:
            return found
    return None


def _interpreter(version: str) -> str:
    """:func:`_find`, or the test skipped saying which version is not checked."""
    found = _find(version)
    if found is None:
        pytest.skip(f"no Python {version} (python{version}, or in pyenv): that version is not checked")
    return found


def _spans(python: str, tmp_path: Path) -> list:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("OTEL_", "LATENCYLENS_"))}
    done = subprocess.run(
        [python, str(PROBE)], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_sdk_records_the_same_spans_on_the_oldest_python_it_declares(tmp_path: Path) -> None:
    oldest = _interpreter(OLDEST)
    venv = tmp_path / "venv"
    subprocess.run([oldest, "-m", "venv", str(venv)], check=True, timeout=120)
    python = str(venv / "bin" / "python")
    # The SDK as a user installs it (its own dependencies only: no extra), resolved for that Python.
    installed = subprocess.run(
        [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert installed.returncode == 0, installed.stderr[-3000:]
    old = _spans(python, tmp_path)
    here = _spans(sys.executable, tmp_path)
    assert old == here
    by_name = {name: attributes for name, _kind, _parent, attributes in here}
    # The spans hold what the payloads say (not only the same on both): Groq's queue_time 0.041905864 s
    # is 41,905,864 ns; the stream's usage chunk gives 12 input and 2 output tokens over 2 content chunks.
    assert by_name["chat llama-3.3-70b-versatile"]["latencylens.provider.queue_ns"] == 41_905_864
    assert by_name["chat gpt-4o-mini"]["gen_ai.usage.output_tokens"] == 2
    assert by_name["chat gpt-4o-mini"]["latencylens.stream.content_chunks"] == 2
    assert {parent for _name, _kind, parent, _attributes in here} == {None, "POST /chat"}


def _make(tmp_path: Path, *args: str, path: str | None = None) -> subprocess.CompletedProcess[str]:
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy(ROOT / name, tmp_path / name)
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHON", "MAKEFLAGS", "MAKELEVEL")}
    if path is not None:
        env["PATH"] = path
    return subprocess.run(["make", *args], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=120)


def test_make_refuses_a_python_older_than_the_collector_needs(tmp_path: Path) -> None:
    oldest = _interpreter(OLDEST)
    assert tuple(map(int, OLDEST.split("."))) < COLLECTOR_NEEDS
    done = _make(tmp_path, "run", f"PYTHON={oldest}")
    assert done.returncode == 2
    assert "needs Python 3.11 or newer" in done.stderr
    assert f"Python {OLDEST}." in done.stderr  # the version it found
    assert "make run PYTHON=python3.12" in done.stderr  # what to do
    assert not (tmp_path / ".venv").exists()  # nothing half-made to trip over on the next try


def test_make_takes_a_newer_python_when_python3_is_too_old(tmp_path: Path) -> None:
    oldest = _interpreter(OLDEST)
    shims = tmp_path / "bin"
    shims.mkdir()
    (shims / "python3").symlink_to(oldest)
    newer = f"python{sys.version_info.major}.{sys.version_info.minor}"
    (shims / newer).symlink_to(sys.executable)
    done = _make(
        tmp_path, "-n", ".venv/.installed-test", path=f"{shims}:/usr/bin:/bin"
    )  # what make test installs first
    assert done.returncode == 0, done.stderr
    assert f"{newer} -m venv .venv" in done.stdout


def test_the_native_extra_compiles_request_rows_on_a_python_without_setuptools(tmp_path: Path) -> None:
    """``make native`` (run by ``make run`` and ``make test``) compiles with mypyc, which builds with
    setuptools; a virtualenv of Python 3.12 or newer has none, so the ``native`` extra must bring it
    (without it the build fails and the collector quietly runs the slower Python modules)."""
    if shutil.which(os.environ.get("CC", "cc")) is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler: the collector runs the request-row modules in Python")
    newest = next(filter(None, map(_find, ("3.14", "3.13", "3.12"))), None)
    if newest is None:
        pytest.skip("no Python 3.12 or newer (python3.1x, or in pyenv): not checked")
    venv = tmp_path / "venv"
    subprocess.run([newest, "-m", "venv", str(venv)], check=True, timeout=120)
    python = str(venv / "bin" / "python")
    native = PROJECT["optional-dependencies"]["native"]
    installed = subprocess.run(
        [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *native],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert installed.returncode == 0, installed.stderr[-3000:]
    (tmp_path / "rows_probe.py").write_text("def twice(value: int) -> int:\n    return 2 * value\n")
    built = subprocess.run(
        [python, "-m", "mypyc", "rows_probe.py"], cwd=tmp_path, capture_output=True, text=True, timeout=600
    )
    assert built.returncode == 0, (built.stdout + built.stderr)[-3000:]
    loaded = subprocess.run(
        [python, "-c", "import rows_probe; print(rows_probe.__file__.endswith('.so'), rows_probe.twice(21))"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert loaded.stdout.split() == ["True", "42"], loaded.stderr
