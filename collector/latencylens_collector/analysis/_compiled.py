"""Request rows built by compiled code: the attribution and the conventions compiled with mypyc.

Building request rows is the collector's largest Python cost per span on both ingest paths
(attribution, the trace-level conventions, one canonical reading per model span). The same
modules compiled by mypyc into C extensions build identical rows in about half the CPU time.
They are an acceleration, never a requirement: the Python modules are the reference, and they run
whenever no build matches them.

:func:`build` (run by ``make run`` and ``make test``) compiles :data:`MODULES` into
:data:`NATIVE_DIR`, outside the source folders, and writes a manifest of the SHA-256 of their
sources and of the sources they import constants and types from (:data:`DEPENDENCIES`).
At import, :func:`use` puts the build ahead of the sources only when every source still has the
hash it was built from: a source edited since the build runs as Python until the next build, never
as a stale extension. Without a C compiler or mypyc, the build says so and the collector runs the
Python modules. ``LATENCYLENS_PURE_PYTHON=1`` keeps the Python modules in a process whatever is
built (the equality test compares both).

A class these modules build per span or per call writes its own ``__init__`` (a dataclass with
``init=False``, or a plain class): mypyc compiles that, while the ``__init__`` a dataclass
generates stays interpreted Python. Six such classes took about 1 µs of the build's 10 µs a span.
The span row (:mod:`.records`) is compiled too: compiled code reads a compiled class's fields
directly, and a Python class's through attribute lookup (about 0.8 µs a span more).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys
import sysconfig
from collections.abc import MutableSequence
from pathlib import Path
from typing import Final

ANALYSIS_DIR: Final = Path(__file__).resolve().parent
NATIVE_DIR: Final = ANALYSIS_DIR / "_native"
"""The build: ``latencylens_collector/analysis/...`` extensions, mypyc's shared library, the manifest."""
MANIFEST: Final = "manifest.json"
MODULES: Final = (
    "attribution",
    "records",
    "request_rows",
    "conventions/aisdk",
    "conventions/content",
    "conventions/events",
    "conventions/genai",
    "conventions/lineage",
    "conventions/logfire",
    "conventions/openinference",
    "conventions/openlit",
    "conventions/openllmetry",
    "conventions/reading",
    "conventions/same_call",
    "conventions/sglang",
    "conventions/trace",
    "conventions/values",
    "conventions/vllm",
)
"""Sources compiled, relative to the analysis package. Package ``__init__`` modules stay Python:
they decide, at import, whether the build is used."""
DEPENDENCIES: Final = (
    "costs",
    "conventions/__init__",
    "../settings",
    "latencylens:semconv",
    "latencylens:streamstats",
)
"""Sources the compiled modules import types and constants from: mypyc may inline a ``Final``
value, so a build is made from them too (relative to the analysis package, or ``package:module``)."""
PURE_ENV: Final = "LATENCYLENS_PURE_PYTHON"
_MYPY_CONFIG: Final = "[mypy]\nignore_missing_imports = True\n"


def source_hashes() -> dict[str, str]:
    """SHA-256 of each compiled module's source and of each of :data:`DEPENDENCIES`, as they are now."""
    return {
        name: hashlib.sha256(_source(name).read_bytes()).hexdigest() for name in (*MODULES, *DEPENDENCIES)
    }


def _source(name: str) -> Path:
    package, _, module = name.rpartition(":")
    if not package:
        return (ANALYSIS_DIR / f"{module}.py").resolve()
    spec = importlib.util.find_spec(package)  # a top-level package: found, not imported
    if spec is None or spec.origin is None:
        raise OSError(f"{package} not found")
    return Path(spec.origin).parent / f"{module}.py"


def matches(native_dir: Path = NATIVE_DIR, hashes: dict[str, str] | None = None) -> bool:
    """Whether ``native_dir`` holds a whole build made by this interpreter from exactly the current
    sources (every extension its manifest lists still there); ``hashes``: the sources' hashes, when
    the caller has them already (:func:`source_hashes`)."""
    try:
        manifest = json.loads((native_dir / MANIFEST).read_text())
    except (OSError, ValueError):
        return False
    if not isinstance(manifest, dict) or manifest.get("python") != _python_tag():
        return False
    files = manifest.get("files")
    if not isinstance(files, list) or not files:
        return False
    try:
        if manifest.get("sources") != (source_hashes() if hashes is None else hashes):
            return False
    except OSError:
        return False
    return all(isinstance(name, str) and (native_dir / name).is_file() for name in files)


def usable(native_dir: Path = NATIVE_DIR) -> bool:
    """Whether this process should run the build: it :func:`matches` and :data:`PURE_ENV` is not set."""
    if os.environ.get(PURE_ENV, "").strip().lower() in ("1", "true", "yes"):
        return False
    return matches(native_dir)


_usable: bool | None = None
"""Whether this process runs the build, decided once (both packages' ``__init__`` ask)."""


def use(package_path: MutableSequence[str], subpackage: str = "") -> None:
    """Put the build's folder for this package ahead of its sources in ``package_path`` (the
    package's ``__path__``) when the build matches them. Called by the analysis package's and the
    conventions package's ``__init__``, before either imports a compiled module."""
    global _usable
    if _usable is None:
        _usable = usable()
    if not _usable:
        return
    folder = NATIVE_DIR / "latencylens_collector" / "analysis" / subpackage
    root = str(NATIVE_DIR)
    if root not in sys.path:
        sys.path.append(root)  # mypyc's shared library is a top-level module of the build
    if str(folder) not in package_path:
        package_path.insert(0, str(folder))


def in_use() -> bool:
    """Whether this process's request rows are built by the compiled modules."""
    return bool(_usable)


def build(native_dir: Path = NATIVE_DIR) -> str:
    """Compile :data:`MODULES` into ``native_dir`` unless a matching build is there; what happened,
    in one line. Never raises for a missing compiler or mypyc: the Python modules then run."""
    import shutil  # here, not at the top: every collector imports this module, few build
    import subprocess
    import tempfile

    hashes = source_hashes()
    if matches(native_dir, hashes):
        return "compiled request rows: up to date"
    if shutil.which(os.environ.get("CC", "cc")) is None and shutil.which("gcc") is None:
        return "compiled request rows: no C compiler found, the collector runs them in Python"
    collector_dir = ANALYSIS_DIR.parents[1]
    with tempfile.TemporaryDirectory(prefix="latencylens-mypyc-") as scratch:
        work = Path(scratch)
        config = work / "mypy.ini"
        config.write_text(_MYPY_CONFIG)
        sources = [str(ANALYSIS_DIR / f"{module}.py") for module in MODULES]
        for module in MODULES:  # mypyc copies each extension next to where its source would be
            (work / "latencylens_collector" / "analysis" / module).parent.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, "-m", "mypyc", "--config-file", str(config), *sources]
        env = {**os.environ, "MYPYPATH": str(collector_dir)}
        result = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True)
        suffix = _python_tag()  # the extension suffix: .cpython-311-x86_64-linux-gnu.so, .cp311-win_amd64.pyd
        built = [path for path in work.rglob(f"*{suffix}") if "build" not in path.relative_to(work).parts]
        if result.returncode != 0 or not built:
            tail = " | ".join((result.stdout + result.stderr).strip().splitlines()[-3:])
            return f"compiled request rows: the build failed, the collector runs them in Python: {tail}"
        staging = native_dir.with_name(native_dir.name + ".new")
        shutil.rmtree(staging, ignore_errors=True)
        for path in built:
            target = staging / path.relative_to(work)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
        files = sorted(str(path.relative_to(work)) for path in built)
        manifest = {"python": _python_tag(), "sources": hashes, "files": files}
        (staging / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True))
        shutil.rmtree(native_dir, ignore_errors=True)
        staging.rename(native_dir)
    return f"compiled request rows: built {len(MODULES)} modules into {native_dir}"


def _python_tag() -> str:
    """The interpreter and platform a build is for (its extensions load in no other)."""
    return str(sysconfig.get_config_var("EXT_SUFFIX"))
