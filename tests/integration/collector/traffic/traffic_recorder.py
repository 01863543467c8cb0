"""Production traffic for the replay tests: an instrumented app's streamed calls, exported as usual.

Run as a script (its own process, so its tracer provider is its own): ``collector_url
provider_url count rate seed``. It sends ``count`` chat requests with varied prompt and answer
lengths, Poisson arrivals at ``rate`` per second, through the openai SDK under
``latencylens.model_call`` (provider ``groq``: the simulator reports Groq-style timing), as service
``chat`` route ``POST /chat``, untagged; prints one JSON line with what it sent.
"""

from __future__ import annotations

import json
import random
import sys

import latencylens
from latencylens_collector.traffic.runner import Runner
from latencylens_collector.traffic.schedule import plan
from latencylens_collector.traffic.sender import Sender
from latencylens_collector.traffic.shape import RequestShape
from latencylens_collector.traffic.target import Target

SERVICE = "chat"
ROUTE = "POST /chat"
MODEL = "llama-3.3-70b-versatile"


def workload(count: int, seed: int) -> list[RequestShape]:
    """Shapes of an app's requests: prompts of 200-2,000 tokens, answers of 8-40 tokens."""
    rng = random.Random(seed)
    return [
        RequestShape(
            offset_ns=0, input_tokens=rng.randint(200, 2000), output_tokens=rng.randint(8, 40), route=ROUTE
        )
        for _ in range(count)
    ]


def main(collector_url: str, provider_url: str, count: int, rate: float, seed: int) -> None:
    provider = latencylens.configure(service_name=SERVICE, endpoint=collector_url)
    target = Target(base_url=provider_url, model=MODEL, api="openai", provider="groq")
    progress = Runner(
        plan(workload(count, seed), rate_per_s=rate, seed=seed), Sender(target, None).send
    ).run()
    provider.force_flush(30_000)
    print(json.dumps({"sent": progress.finished, "failed": progress.failed, "errors": progress.errors}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]))
