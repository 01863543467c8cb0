"""Fuzz every parameter of every GET route the OpenAPI schema lists, against a real collector.

The routes and their parameters are read from the running service's ``/openapi.json``, so a route
added later is fuzzed without touching this file. Each parameter gets values of its declared type
at and past its bounds, values of other types, strings in the shapes the service parses (times,
cursors, group-by lists) mangled, and arbitrary text; each is sent or left out. Whatever is sent,
the answer is below 500, and an error is JSON whose ``detail`` says what to fix.

Bounded: a fixed number of examples per route from a fixed seed (derandomized), no deadline.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from collector_settings import collector_settings
from fuzz_settings import reproducible
from hypothesis import given
from hypothesis import strategies as st
from otlp_builders import MS, chat_trace, post_protobuf, recent_base_ns

from latencylens_collector.api.app import create_app
from latencylens_collector.api.server import ServiceThread
from latencylens_collector.settings import Settings

EXAMPLES_PER_ROUTE = int(os.environ.get("LATENCYLENS_FUZZ_EXAMPLES", "30"))
"""Requests per route; raise it (env) for a longer hunt."""

_SCHEMA_PATHS = sorted(
    path
    for path, operations in create_app(Settings(environ={})).openapi()["paths"].items()
    if "get" in operations and operations["get"].get("parameters")
)
"""GET routes with parameters, from the same app the service builds (the test checks the served
schema lists the same ones)."""


@pytest.fixture(scope="module")
def service(chdb_dsn: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceThread]:
    """A collector holding a few requests and one SLO, so lookups can also hit real rows."""
    folder = tmp_path_factory.mktemp("fuzz_params")
    the_settings = collector_settings(
        chdb_dsn, f"fuzz_params_{os.getpid()}", folder, spool_dir=str(folder / "spool")
    )
    running = ServiceThread(the_settings).start()
    base = recent_base_ns()
    for scale in (1, 2, 3):
        assert post_protobuf(running.url, chat_trace(base, scale=scale)).is_success
    slo = {
        "name": "fuzz",
        "metric": "ttft",
        "objective": {"type": "ratio", "target": 0.99, "threshold_ns": 1000 * MS, "period": "30d"},
    }
    assert httpx.post(f"{running.url}/api/slos", json=slo).status_code == 201
    yield running
    running.stop()
    running.store.close()


@pytest.fixture(scope="module")
def schema(service: ServiceThread) -> dict[str, Any]:
    served: dict[str, Any] = httpx.get(f"{service.url}/openapi.json").json()
    return served


_INT_EDGES = [0, 1, -1, 2**31, 2**53 + 1, 2**63 - 1, 2**63, -(2**63) - 1, 2**64, 10**30]
_NUMBER_TEXT = ["inf", "-inf", "nan", "NaN", "1e300", "-1e300", "1e-320", "-0", "0x10", "1_000", "", " 5 "]
_TIME_TEXT = [
    "30m",
    "0m",
    "1.5h",
    "99999999999999999999d",
    "1e5",
    "-1",
    "253402300800",
    "-9223372036",
    "2024-02-30",
    "0001-01-01",
    "9999-12-31T23:59:59+14:00",
    "2024-05-01T12:00:00Z",
    "now",
    "1" * 5000,
]
_LIST_TEXT = ["service", "service,service", "model,", ",", "route,model,provider,service", "SERVICE", "x"]


def _cursor_like() -> st.SearchStrategy[str]:
    raw = st.tuples(
        st.one_of(st.integers(), st.sampled_from(["", "-0", "1e3", " 1"])), st.text(max_size=40)
    ).map(lambda pair: f"{pair[0]}:{pair[1]}")
    return raw.map(lambda text: base64.urlsafe_b64encode(text.encode()).decode().rstrip("="))


def _typed(schema: dict[str, Any]) -> st.SearchStrategy[str]:
    """Values of the parameter's declared type, at and past its bounds, as the URL carries them."""
    kinds = [part for part in schema.get("anyOf", [schema]) if part.get("type") != "null"]
    options: list[st.SearchStrategy[str]] = []
    for kind in kinds:
        low, high = kind.get("minimum"), kind.get("maximum")
        bounds = [bound for bound in (low, high) if bound is not None]
        edges = [value for bound in bounds for value in (bound - 1, bound, bound + 1)]
        if kind.get("type") == "integer":
            options.append(st.one_of(st.integers(), st.sampled_from(_INT_EDGES + edges)).map(str))
            options.append(st.floats().map(repr))
        elif kind.get("type") == "number":
            options.append(st.floats(allow_nan=True, allow_infinity=True).map(repr))
            options.append(st.sampled_from(_NUMBER_TEXT + [repr(float(v)) for v in edges]))
            options.append(st.integers().map(str))
        elif kind.get("type") == "boolean":
            options.append(st.sampled_from(["true", "false", "1", "0", "yes", "on", "TRUE", "2", ""]))
        elif "pattern" in kind:
            options.append(st.from_regex(kind["pattern"], fullmatch=True))
        elif "maxLength" in kind:
            options.append(st.text(min_size=kind["maxLength"], max_size=kind["maxLength"] + 2))
    return st.one_of(*options) if options else st.nothing()


def _value(schema: dict[str, Any]) -> st.SearchStrategy[str]:
    return st.one_of(
        _typed(schema),
        st.sampled_from(_TIME_TEXT + _LIST_TEXT + _NUMBER_TEXT),
        _cursor_like(),
        st.text(max_size=60),
        st.text(alphabet=st.characters(codec="utf-8"), min_size=1, max_size=8).map(lambda s: s * 300),
    )


def _assert_answer_says_what_to_fix(response: httpx.Response, sent: dict[str, Any]) -> None:
    assert response.status_code < 500, (sent, response.status_code, response.text[:500])
    if response.status_code < 400:
        return
    assert response.headers.get("content-type", "").startswith("application/json"), (sent, response.text)
    detail = response.json().get("detail")
    assert detail, (sent, response.text)
    if isinstance(detail, list):  # FastAPI's validation errors: where, and what was wrong
        assert all(item.get("loc") and item.get("msg") for item in detail), (sent, detail)
    else:
        assert isinstance(detail, str) and len(detail) > 5, (sent, detail)


def test_the_served_schema_lists_the_routes_fuzzed(schema: dict[str, Any]) -> None:
    served = sorted(
        path for path, ops in schema["paths"].items() if "get" in ops and ops["get"].get("parameters")
    )
    assert served == _SCHEMA_PATHS
    assert {"/api/requests", "/api/requests/{trace_id}", "/api/stats", "/api/compare"} <= set(served)


@pytest.mark.parametrize("path", _SCHEMA_PATHS)
def test_any_parameter_value_gets_below_500_and_a_json_error(
    service: ServiceThread, schema: dict[str, Any], path: str
) -> None:
    parameters = schema["paths"][path]["get"]["parameters"]

    @reproducible(EXAMPLES_PER_ROUTE)
    @given(data=st.data())
    def check(data: st.DataObject) -> None:
        url_path, query = path, {}
        for parameter in parameters:
            name, where = parameter["name"], parameter["in"]
            if where == "query" and not data.draw(st.booleans(), label=f"send {name}"):
                continue
            value = data.draw(_value(parameter["schema"]), label=name)
            if where == "path":
                url_path = url_path.replace("{" + name + "}", quote(value, safe="") or "%20")
            else:
                query[name] = value
        response = httpx.get(service.url + url_path, params=query, timeout=60)
        _assert_answer_says_what_to_fix(response, {"path": url_path, **query})

    check()
