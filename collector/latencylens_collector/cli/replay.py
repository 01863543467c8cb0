"""``latencylens replay``: send the shape of recorded traffic to an endpoint and compare the result.

The recorded requests (arrival times, token counts; never content) come from the service
(``/api/replay/shape``) or a mooncake trace file; each is sent with synthetic text of its input
length through the instrumented provider SDK, and its spans go to the service tagged with the run
id. ``--export-mooncake`` writes the selection as a trace file instead of sending it;
``--import-aiperf`` stores an AIPerf per-request export as a run. ``latencylens compare --replay RUN``
(:func:`show_comparison`) puts a run beside the requests it copied. See docs/replay.md.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any, Final

from latencylens_collector.analysis.attribution import DECODE, NETWORK, PREFILL, QUEUE
from latencylens_collector.analysis.costs import price_data_version, request_cost_usd
from latencylens_collector.cli.errors import FAILED, USAGE, CliError
from latencylens_collector.cli.http import ServiceClient, add_client_options
from latencylens_collector.cli.output import (
    MISSING,
    Column,
    Table,
    ms,
    note,
    percent,
    render,
    show,
    show_json,
)
from latencylens_collector.queries import QueryError
from latencylens_collector.queries.times import parse_duration
from latencylens_collector.traffic import (
    RequestShape,
    Target,
    is_loopback,
    new_run_id,
    plan,
    service_name,
    totals,
)
from latencylens_collector.traffic.mooncake import dump, read_mooncake, to_mooncake
from latencylens_collector.traffic.runner import Progress
from latencylens_collector.traffic.schedule import Plan
from latencylens_collector.traffic.target import APIS

INTERRUPTED: Final = 130
"""Exit code after Ctrl-C (128 + SIGINT), as ``latencylens`` reports it."""
KEY_ENVS: Final = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
PROGRESS_EVERY_S: Final = 0.5
TIME_HELP: Final = "1h, 30m, 2d (ago), ISO-8601 or unix seconds"


def register(sub: Any) -> None:
    replay = sub.add_parser(
        "replay",
        help="replay recorded traffic (arrivals, token counts) against an endpoint",
        description="Select recorded requests and send requests of the same input and output token "
        "counts (synthetic text, never stored content) to an OpenAI-compatible or Anthropic endpoint, "
        "as recorded (time-scaled), as a Poisson process or in a closed loop. Each call is traced into "
        "the service under a run id: compare it with 'latencylens compare --replay RUN'.",
    )
    pick = replay.add_argument_group("which recorded requests")
    pick.add_argument("--since", help=f"window start: {TIME_HELP} (default 24 h ago)")
    pick.add_argument("--until", help="window end (default now)")
    pick.add_argument("--service", help="only requests of this service")
    pick.add_argument("--route", help="only requests whose root span has this name")
    pick.add_argument("--recorded-model", help="only requests whose primary model is this")
    pick.add_argument("--recorded-provider", help="only requests whose primary provider is this")
    pick.add_argument("--sample", type=int, help="a seeded random sample of this many (default all)")
    pick.add_argument("--seed", type=int, default=0, help="seed of the sample and of --rate (default 0)")
    pick.add_argument("--from-trace", type=Path, metavar="FILE", help="replay a mooncake trace file instead")

    target = replay.add_argument_group("where to send")
    target.add_argument("--base-url", help="the endpoint's API base URL, e.g. http://127.0.0.1:8000/v1")
    target.add_argument("--model", help="model to ask for")
    target.add_argument("--provider", choices=APIS, default="openai", help="wire protocol (default openai)")
    target.add_argument(
        "--adapter",
        help="LatencyLens adapter that reads the responses (vllm, sglang, nim, tgi, llamacpp, groq, ...; "
        "default: --provider)",
    )
    target.add_argument(
        "--target-key-env",
        metavar="VAR",
        help="environment variable holding the endpoint's API key "
        "(default OPENAI_API_KEY or ANTHROPIC_API_KEY)",
    )
    target.add_argument(
        "--ignore-eos",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="send ignore_eos so every answer has the recorded length (default: for vllm, llamacpp, sglang)",
    )
    target.add_argument("--timeout", type=float, default=600.0, help="seconds per request (default 600)")
    target.add_argument(
        "--allow-remote", action="store_true", help="allow an endpoint that is not this machine"
    )

    when = replay.add_argument_group("when to send (one of --speed, --rate, --concurrency)")
    exclusive = when.add_mutually_exclusive_group()
    exclusive.add_argument(
        "--speed", type=float, help="as recorded, time-scaled (2 = twice as fast; default 1)"
    )
    exclusive.add_argument("--rate", type=float, help="Poisson arrivals at this many requests per second")
    exclusive.add_argument("--concurrency", type=int, help="closed loop: keep this many in flight")
    when.add_argument("--limit", type=int, help="send at most this many requests")
    when.add_argument("--duration", help="stop sending after this long (30s, 5m, 1h)")

    other = replay.add_argument_group("instead of sending")
    other.add_argument(
        "--export-mooncake", type=Path, metavar="FILE", help="write the selection as a mooncake trace"
    )
    other.add_argument(
        "--import-aiperf", type=Path, metavar="FILE", help="store AIPerf's profile_export.jsonl as a run"
    )
    replay.add_argument("--run-id", help="the run's id (default: start time and 4 random hex digits)")
    add_client_options(replay, json_flag=False)
    replay.set_defaults(handler=_replay)


def add_compare_options(compare: argparse.ArgumentParser) -> None:
    """``--replay RUN`` and the SLO a replay comparison counts good requests against."""
    group = compare.add_argument_group("a replay run beside the requests it copied (ranges are ignored)")
    group.add_argument("--replay", metavar="RUN", help="the run id 'latencylens replay' printed")
    group.add_argument("--ttft-slo-ms", type=float, help="goodput: TTFT target, ms")
    group.add_argument("--itl-slo-ms", type=float, help="goodput: ITL target, ms")
    group.add_argument("--e2e-slo-ms", type=float, help="goodput: end-to-end target, ms")


# replay -------------------------------------------------------------------------------------------


def _replay(args: argparse.Namespace) -> int:
    client = ServiceClient.from_args(args)
    run_id = args.run_id or new_run_id()
    if args.import_aiperf is not None:
        return _import_aiperf(args, client, run_id)
    if args.export_mooncake is None:  # sending: refuse before asking anything
        if not args.base_url or not args.model:
            raise CliError("--base-url and --model are needed to send (or use --export-mooncake)", USAGE)
        if not is_loopback(args.base_url) and not args.allow_remote:
            raise CliError(
                f"{args.base_url} is not this machine: pass --allow-remote to send synthetic traffic there",
                USAGE,
            )
    shapes = _shapes(args, client)
    if args.export_mooncake is not None:
        lines = list(dump(to_mooncake(shapes)))
        args.export_mooncake.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
        show(f"wrote {len(lines)} requests to {args.export_mooncake} (mooncake trace JSONL)")
        return 0
    try:
        duration_ns = parse_duration(args.duration) if args.duration else None
        the_plan = plan(
            shapes,
            speed=args.speed,
            rate_per_s=args.rate,
            concurrency=args.concurrency,
            limit=args.limit,
            duration_ns=duration_ns,
            seed=args.seed,
        )
    except (ValueError, QueryError) as exc:
        raise CliError(str(exc), USAGE) from None
    if not the_plan.arrivals:
        raise CliError("no recorded requests to send (check the window and filters)", FAILED)
    key_env = args.target_key_env or KEY_ENVS[args.provider]
    target = Target(
        base_url=args.base_url,
        model=args.model,
        api=args.provider,
        api_key=os.environ.get(key_env) or "unused",
        provider=args.adapter or "",
        ignore_eos=args.ignore_eos,
        timeout_s=args.timeout,
    )
    sending = totals([arrival.shape for arrival in the_plan.arrivals])
    show(
        f"replay run {run_id}: {the_plan.describe()} to {target.base_url} (model {target.model}, "
        f"{target.api} API, read as {target.provider_name})"
    )
    show(
        f"  {sending.requests} requests, {sending.input_tokens} input tokens ({sending.cached_input_tokens} "
        f"recorded as cached), {sending.output_tokens} output tokens; {cost_estimate(the_plan, target)}"
    )
    progress = _send(the_plan, target, run_id, args, client)
    interrupted = progress.interrupted and progress.started < len(the_plan.arrivals)
    outcome = "stopped" if interrupted else "finished"
    show(
        f"{outcome}: {progress.finished} of {progress.planned} requests sent and finished "
        f"({progress.failed} failed) in {progress.elapsed_s:.1f} s"
    )
    if progress.errors:
        show("  errors: " + ", ".join(f"{name} × {count}" for name, count in sorted(progress.errors.items())))
    show(f"compare: latencylens compare --replay {run_id}   (spans under service {service_name(run_id)})")
    return INTERRUPTED if interrupted else (FAILED if progress.failed == progress.finished else 0)


def cost_estimate(the_plan: Plan, target: Target) -> str:
    """What the plan costs at the target's prices (genai-prices' bundled data), or why unknown."""
    costs = [
        request_cost_usd(
            target.provider_name,
            target.model,
            arrival.shape.input_tokens,
            arrival.shape.cached_input_tokens,
            arrival.shape.output_tokens,
        )
        for arrival in the_plan.arrivals
    ]
    if not costs or any(cost is None for cost in costs):
        return f"no cost estimate (no price for {target.model} at {target.provider_name})"
    total = sum(cost for cost in costs if cost is not None)
    return f"about ${total:.4f} at {target.provider_name}'s prices ({price_data_version()})"


def _shapes(args: argparse.Namespace, client: ServiceClient) -> list[RequestShape]:
    if args.from_trace is not None:
        try:
            with args.from_trace.open(encoding="utf-8") as lines:
                return read_mooncake(lines)
        except (OSError, ValueError) as exc:
            raise CliError(f"{args.from_trace}: {exc}", USAGE) from None
    params = {
        "since": args.since,
        "until": args.until,
        "service": args.service,
        "route": args.route,
        "model": args.recorded_model,
        "provider": args.recorded_provider,
        "sample": args.sample,
        "seed": args.seed,
    }
    body = client.get("/api/replay/shape", params)
    return [RequestShape.from_json(row) for row in body["requests"]]


def _send(
    the_plan: Plan, target: Target, run_id: str, args: argparse.Namespace, client: ServiceClient
) -> Progress:
    import latencylens
    from latencylens_collector.traffic.runner import Runner
    from latencylens_collector.traffic.sender import Sender

    tracer_provider = latencylens.configure(
        service_name=service_name(run_id), endpoint=client.url, api_key=client.api_key, shutdown_timeout_s=10
    )
    try:
        sender = Sender(target, run_id)
    except ImportError as exc:
        raise CliError(
            f"sending needs the {target.api} SDK: pip install {target.api} ({exc})", USAGE
        ) from None
    reporter = _ProgressLine()
    progress = Runner(the_plan, sender.send, on_progress=reporter).run()
    reporter.done()
    tracer_provider.force_flush(30_000)
    return progress


class _ProgressLine:
    """One progress line on standard error, redrawn at most every half second (a line each time
    when standard error is not a terminal)."""

    def __init__(self) -> None:
        self._last = 0.0
        self._tty = sys.stderr.isatty()
        self._latest: Progress | None = None
        self._printed: Progress | None = None

    def __call__(self, progress: Progress) -> None:
        self._latest = progress
        now = time.monotonic()
        if now - self._last >= PROGRESS_EVERY_S or progress.finished == progress.planned:
            self._last = now
            self._print(progress)
            self._printed = progress

    def _print(self, progress: Progress) -> None:
        if self._tty:
            print(f"\r  {progress.line()}\033[K", end="", file=sys.stderr, flush=True)
        else:
            note(f"  {progress.line()}")

    def done(self) -> None:
        if self._latest is not None and self._latest is not self._printed:
            self._print(self._latest)
        if self._tty:
            print(file=sys.stderr)


def _import_aiperf(args: argparse.Namespace, client: ServiceClient, run_id: str) -> int:
    from latencylens_collector.traffic.aiperf import export_spans, read_profile_export

    try:
        with args.import_aiperf.open(encoding="utf-8") as lines:
            records = read_profile_export(lines)
    except (OSError, ValueError) as exc:
        raise CliError(f"{args.import_aiperf}: {exc}", USAGE) from None
    sent = export_spans(
        records,
        run_id=run_id,
        endpoint=client.url,
        headers=client.headers(),
        provider=args.adapter or args.provider,
        model=args.model or "",
    )
    show(f"imported {sent} AIPerf records as replay run {run_id}")
    show(f"compare: latencylens compare --replay {run_id}")
    return 0


# compare --replay ---------------------------------------------------------------------------------

PART_ROWS: Final = ((QUEUE, "queue"), (PREFILL, "prefill"), (DECODE, "decode"), (NETWORK, "network"))


def show_comparison(args: argparse.Namespace) -> int:
    """``latencylens compare --replay RUN``: the run beside production, then what differs."""
    params = {"ttft_slo_ms": args.ttft_slo_ms, "itl_slo_ms": args.itl_slo_ms, "e2e_slo_ms": args.e2e_slo_ms}
    body = ServiceClient.from_args(args).get(f"/api/replay/runs/{args.replay}/compare", params)
    if args.json:
        show_json(body)
        return 0
    show(render(comparison_table(body)))
    return 0


def comparison_table(body: dict[str, Any]) -> Table:
    """The comparison as rows of metric | production | replay | replay ÷ production."""
    prod, rep = body["production"], body["replay"]
    table = Table(
        title=f"Replay run {body['run_id']} beside the recorded requests it copied",
        columns=[
            Column("metric"),
            Column("production", numeric=True),
            Column("replay", numeric=True),
            Column("× production", numeric=True),
        ],
        notes=[f"- {line}" for line in body["findings"]],
    )

    def row(label: str, a: float | None, b: float | None, text: Any = ms) -> None:
        ratio = f"{b / a:.2f}" if a and b is not None else MISSING
        table.add(label, text(a), text(b), ratio)

    table.add(
        "requests (failed)",
        f"{prod['requests']} ({prod['failed']})",
        f"{rep['requests']} ({rep['failed']})",
        MISSING,
    )
    for metric, label in (("ttft", "TTFT"), ("itl", "ITL"), ("e2e", "end-to-end")):
        for q in ("p50", "p95", "p99"):
            row(f"{label} {q} (ms)", prod[metric][q], rep[metric][q])
    for part, label in PART_ROWS:
        row(f"{label}, mean (ms)", prod["parts_mean_ns"][part], rep["parts_mean_ns"][part])
    row("decode tokens/s p50", prod["decode_tokens_per_s_p50"], rep["decode_tokens_per_s_p50"], _number)
    row("output tokens/s (all)", prod["output_tokens_per_s"], rep["output_tokens_per_s"], _number)
    row("cost (USD)", prod["cost_usd"], rep["cost_usd"], _dollars)
    slo = body["slo"]
    if any(slo.values()):
        row("good under the SLO", prod["good_share"], rep["good_share"], percent)
        row("goodput (good req/s)", prod["goodput_per_s"], rep["goodput_per_s"], _number)
    return table


def _dollars(value: float | None) -> str:
    return MISSING if value is None else f"{value:.4f}"


def _number(value: float | None) -> str:
    return MISSING if value is None else f"{value:,.1f}"


__all__ = [
    "INTERRUPTED",
    "KEY_ENVS",
    "PART_ROWS",
    "PROGRESS_EVERY_S",
    "TIME_HELP",
    "add_compare_options",
    "comparison_table",
    "cost_estimate",
    "register",
    "show_comparison",
]
