"""`latencylens demo`: the service on the embedded default, a simulated provider and a workload.

Everything runs in this one process on 127.0.0.1: the collector with chdb storage, a provider
that answers like Groq with known queue/prefill/decode times, and an instrumented chat app that
exports its spans to the collector over OTLP/HTTP like any production app would.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import httpx
from rich.console import Console

import latencylens
from latencylens_collector.api.server import ServiceThread
from latencylens_collector.demo.app import ChatApp
from latencylens_collector.demo.provider_sim import ProviderSimulator, demo_policy
from latencylens_collector.settings import Settings

QUESTIONS = (
    "where is my order",
    "how do I reset my password",
    "which plan includes priority support",
    "can I change the delivery address",
    "what does the warranty cover",
)


RenderRequests = Callable[[Sequence[Mapping[str, Any]], Console], None]
"""Prints request summaries (the query API's JSON) on a console: the command line's table."""


def main(args: argparse.Namespace, render_requests: RenderRequests, settings: Settings | None = None) -> int:
    """Run the demo; ``render_requests`` shows its slowest requests (the command line passes its
    table, so the demo needs nothing from the command line). ``settings``: the collector's, checked
    by the command line (default: ``args.data_dir`` and ``args.port``)."""
    console = Console()
    if settings is None:
        settings = Settings(data_dir=args.data_dir, port=args.port)
    console.print(f"[bold]LatencyLens demo[/bold]: data in {settings.data_dir} (embedded ClickHouse)")
    try:
        service = ServiceThread(settings).start()
    except (RuntimeError, TimeoutError) as error:
        console.print(f"[red]Could not start the service:[/red] {error}. Try --port.")
        return 1
    url = service.url
    grpc = service.grpc_status.removeprefix("listening on ")
    console.print(f"Service listening on {url}")
    console.print(f"  OTLP/HTTP at {url}/v1/traces, OTLP/gRPC {grpc}")

    tracer_provider = latencylens.configure(service_name="demo-chat", endpoint=url)
    started_at = time.time()
    with ProviderSimulator(demo_policy()) as provider:
        app = ChatApp(provider.base_url)
        for index in range(args.requests):
            question = QUESTIONS[index % len(QUESTIONS)]
            began = time.perf_counter()
            app.answer(question)
            console.print(
                f"  request {index + 1:>3}/{args.requests}: {question!r} "
                f"in {(time.perf_counter() - began) * 1000:.0f} ms"
            )
    tracer_provider.force_flush()

    requests = _wait_for_requests(url, since=started_at - 1, expected=args.requests)
    console.print()
    console.print("[bold]Slowest requests of this run[/bold] (ms, critical path):")
    render_requests(requests[:10], console)
    console.print()
    console.print("Where to look:")
    console.print(f"  {url}/                            the web UI: requests, waterfalls, overview, SLOs")
    console.print(f"  {url}/api/requests              slowest requests with their breakdown (JSON)")
    console.print(f"  {url}/api/requests/<trace_id>   one request: breakdown and span tree")
    console.print(f"  {url}/docs                      the API (OpenAPI)")
    console.print(f"  .venv/bin/latencylens slow --url {url}   the same table from a terminal")
    if args.no_serve:
        service.stop()
        return 0 if len(requests) >= args.requests else 1
    console.print("\nServing until Ctrl-C.")
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        service.stop()
    return 0


def _wait_for_requests(url: str, since: float, expected: int, timeout_s: float = 30.0) -> list[dict]:
    """Poll the query API until this run's requests are stored (export is asynchronous)."""
    deadline = time.monotonic() + timeout_s
    rows: list[dict] = []
    while time.monotonic() < deadline:
        response = httpx.get(f"{url}/api/requests", params={"since": since, "limit": 1000}, timeout=10)
        response.raise_for_status()
        rows = response.json()["requests"]
        if len(rows) >= expected:
            break
        time.sleep(0.2)
    else:
        print(f"only {len(rows)} of {expected} requests arrived", file=sys.stderr)
    return rows
