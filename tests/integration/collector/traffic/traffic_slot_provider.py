"""A simulated OpenAI-compatible server with a fixed number of slots, so queueing grows with load.

It is the demo's simulated provider (Groq-style timing in ``x_groq.usage``) with a timing policy
that keeps ``slots`` requests in service at once: a request takes the slot that frees first and
waits in the queue until then; prefill costs a fixed time per prompt token (a word of the synthetic
prompt), decode a fixed time per output token (``max_tokens``: the server ignores end-of-sequence).
Service times are known when a request arrives, so the queue is computed exactly (first come,
first served) rather than slept in a real lock. Run as a script it serves from its own process and
prints its base URL, which keeps its timing honest beside a busy test process.
"""

from __future__ import annotations

import argparse
import threading
import time
from collections.abc import Callable
from typing import Any

from latencylens_collector.demo.provider_sim import ProviderSimulator, Timing
from latencylens_collector.traffic.prompt import word_count


class SlotPolicy:
    """Timing of each request on a server with ``slots`` parallel slots (FIFO queue)."""

    def __init__(
        self,
        slots: int,
        prefill_s_per_token: float,
        decode_s_per_token: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.prefill_s_per_token = prefill_s_per_token
        self.decode_s_per_token = decode_s_per_token
        self._clock = clock
        self._free_at = [0.0] * slots
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> Timing:
        prompt_tokens = sum(word_count(str(m.get("content", ""))) for m in body.get("messages", []))
        completion_tokens = max(int(body.get("max_tokens") or 16), 1)
        prefill = prompt_tokens * self.prefill_s_per_token
        decode = completion_tokens * self.decode_s_per_token
        with self._lock:
            now = self._clock()
            slot = min(range(len(self._free_at)), key=self._free_at.__getitem__)
            start = max(now, self._free_at[slot])
            self._free_at[slot] = start + prefill + decode
        return Timing(
            queue_s=round(start - now, 9),
            prefill_s=round(prefill, 9),
            decode_s=round(decode, 9),
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Simulated OpenAI-compatible server with fixed slots.")
    parser.add_argument("--slots", type=int, default=2)
    parser.add_argument("--prefill-ms-per-token", type=float, default=0.02)
    parser.add_argument("--decode-ms-per-token", type=float, default=4.0)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    policy = SlotPolicy(args.slots, args.prefill_ms_per_token / 1000, args.decode_ms_per_token / 1000)
    simulator = ProviderSimulator(policy, port=args.port, prefix="/v1")
    simulator.start()
    print(simulator.base_url, flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
