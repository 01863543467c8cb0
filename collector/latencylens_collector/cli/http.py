"""The one HTTP client of the command line: base URL, API key, timeout, and errors as one line.

Every command that asks a running service goes through :class:`ServiceClient`. Whatever goes wrong
(nothing listening, a timeout, another server answering HTML, a 4xx with a validation list) becomes
a :class:`~latencylens_collector.cli.errors.CliError` whose message fits one line and says what to
do; the exit code tells "the service said no" (1) from "no LatencyLens service there" (3).
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import httpx

from latencylens import API_KEY_ENV
from latencylens_collector.cli.errors import FAILED, UNREACHABLE, CliError
from latencylens_collector.cli.output import one_line
from latencylens_collector.settings import DEFAULT_HOST, DEFAULT_PORT

DEFAULT_URL: Final = f"http://{DEFAULT_HOST}:{DEFAULT_PORT}"
"""Where the commands find the service unless ``--url`` says otherwise."""
TIMEOUT_S: Final = 30.0
"""Longest wait for an answer; queries over long windows on a large store can take seconds."""
_ERRNO = re.compile(r"^\[Errno -?\d+\]\s*")
_LOCATION_PREFIXES: Final = frozenset({"body", "query", "path", "header"})


def add_client_options(parser: argparse.ArgumentParser, *, json_flag: bool = True) -> None:
    """``--url``, ``--api-key`` and ``--json``: the options of every command that asks the service."""
    parser.add_argument("--url", default=DEFAULT_URL, help=f"service base URL (default {DEFAULT_URL})")
    parser.add_argument(
        "--api-key", help=f"API key, sent as 'Authorization: Bearer' (default: env {API_KEY_ENV})"
    )
    if json_flag:
        parser.add_argument("--json", action="store_true", help="print the service's JSON instead of a table")


@dataclass(frozen=True)
class ServiceClient:
    """A LatencyLens service at ``url``; requests carry the API key when there is one."""

    url: str
    api_key: str | None = None
    timeout_s: float = TIMEOUT_S

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ServiceClient:
        """From ``--url`` and ``--api-key``; the key falls back to ``LATENCYLENS_API_KEY``."""
        key = getattr(args, "api_key", None) or os.environ.get(API_KEY_ENV) or None
        return cls(url=str(args.url).rstrip("/"), api_key=key)

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def get(self, path: str, params: Mapping[str, Any] | None = None) -> Any:
        return self.request("GET", path, params=params)

    def post(self, path: str, body: Any) -> Any:
        return self.request("POST", path, json=body)

    def delete(self, path: str) -> Any:
        return self.request("DELETE", path)

    def request(
        self, method: str, path: str, *, params: Mapping[str, Any] | None = None, json: Any = None
    ) -> Any:
        """The JSON answer (``{}`` for an empty one); raises :class:`CliError` for anything else.

        Parameters that are None are left out, so the service applies its defaults.
        """
        query = {k: v for k, v in (params or {}).items() if v is not None}
        try:
            response = httpx.request(
                method,
                self.url + path,
                params=query,
                json=json,
                headers=self.headers(),
                timeout=self.timeout_s,
            )
        except httpx.TimeoutException:
            raise CliError(
                f"no answer from {self.url} within {self.timeout_s:g} s; is the service overloaded?",
                UNREACHABLE,
            ) from None
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            reason = _ERRNO.sub("", str(exc)) or type(exc).__name__
            raise CliError(
                f"cannot reach the LatencyLens service at {self.url}: {reason} "
                "(start it with 'latencylens serve', or pass --url)",
                UNREACHABLE,
            ) from None
        body = self._json(response)
        if response.status_code >= 400:
            raise CliError(self._failure(response, body), FAILED)
        return body

    def _json(self, response: httpx.Response) -> Any:
        """The parsed body; a body that is not JSON means this is not a LatencyLens service."""
        if not response.content:
            return {}
        content_type = response.headers.get("content-type", "").split(";")[0].strip()
        if content_type == "application/json":
            try:
                return response.json()
            except ValueError:
                pass
        raise CliError(
            f"{self.url} is not a LatencyLens service: it answered {response.status_code} with "
            f"{content_type or 'no content type'} (check --url)",
            UNREACHABLE,
        )

    def _failure(self, response: httpx.Response, body: Any) -> str:
        detail = describe_detail(body.get("detail") if isinstance(body, dict) else body)
        if response.status_code == 401:
            return f"{detail} (pass --api-key or set {API_KEY_ENV})"
        return detail or f"the service answered {response.status_code}"


def describe_detail(detail: Any) -> str:
    """A FastAPI error ``detail`` as one line: its text, or each validation problem as
    ``field: message`` (``objective.quantile: Input should be less than 1``)."""
    if detail is None:
        return ""
    if isinstance(detail, list):
        problems = []
        for item in detail:
            if not isinstance(item, dict):
                problems.append(str(item))
                continue
            location = [str(part) for part in item.get("loc", ())]
            if location and location[0] in _LOCATION_PREFIXES:
                location = location[1:]
            message = str(item.get("msg", "invalid"))
            problems.append(f"{'.'.join(location)}: {message}" if location else message)
        return one_line("; ".join(problems))
    return one_line(str(detail))
