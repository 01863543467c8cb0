"""A local stand-in for an OpenAI-compatible provider that reports Groq-style timing.

It sleeps the queue, prefill and decode times it is told to, then answers with exactly those times
in ``usage`` (non-streaming) or in ``x_groq.usage`` on the final chunk (streaming), the way Groq
does. The demo uses it so explained requests appear without an API key; tests use it because its
reported numbers are known in advance.
"""

from __future__ import annotations

import json
import random
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Timing:
    """What the simulated provider spends on one request, in seconds, and its token counts."""

    queue_s: float
    prefill_s: float
    decode_s: float
    prompt_tokens: int
    completion_tokens: int
    hold_s: float | None = None
    """Wall time to hold a non-streamed response; defaults to queue + prefill + decode."""

    def usage(self) -> dict[str, Any]:
        """The ``usage`` object Groq would send: total_time is prefill + decode, queue outside."""
        return {
            "queue_time": self.queue_s,
            "prompt_tokens": self.prompt_tokens,
            "prompt_time": self.prefill_s,
            "completion_tokens": self.completion_tokens,
            "completion_time": self.decode_s,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
            "total_time": round(self.prefill_s + self.decode_s, 9),
        }


TimingPolicy = Callable[[dict[str, Any]], Timing]
"""Chooses the timing of a request from its JSON body."""


def demo_policy(seed: int = 7) -> TimingPolicy:
    """Plausible traffic: mostly fast, a few requests stuck in the queue, a few long answers."""
    rng = random.Random(seed)
    lock = threading.Lock()

    def choose(body: dict[str, Any]) -> Timing:
        with lock:
            roll = rng.random()
            prompt_chars = sum(len(str(m.get("content", ""))) for m in body.get("messages", []))
            prompt_tokens = max(8, prompt_chars // 4)
            # One answer in seven runs long (decode-bound): what the advisor's first lever is for.
            completion_tokens = rng.randint(40, 120) if roll < 0.85 else rng.randint(700, 900)
            queue = rng.uniform(0.002, 0.02) if roll > 0.2 else rng.uniform(0.15, 0.4)
        return Timing(
            queue_s=round(queue, 9),
            prefill_s=round(prompt_tokens / 20_000, 9),
            decode_s=round(completion_tokens / 1_200, 9),
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
        )

    return choose


class ProviderSimulator:
    """Serves ``POST {prefix}/chat/completions`` on 127.0.0.1 until :meth:`stop`."""

    def __init__(self, policy: TimingPolicy, port: int = 0, prefix: str = "/openai/v1") -> None:
        self.policy = policy
        self.prefix = prefix.rstrip("/")
        self._server = _QuietServer(("127.0.0.1", port), _handler_for(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="provider-sim", daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}{self.prefix}"

    def start(self) -> ProviderSimulator:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> ProviderSimulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _QuietServer(ThreadingHTTPServer):
    """A client that hangs up mid-answer (an abandoned stream, a stopped demo) is its own business:
    no traceback. Any other error in a handler is still printed."""

    def process_request(self, request: Any, client_address: Any) -> None:
        # Each streamed chunk leaves at once: with Nagle's algorithm a small write waits for the
        # previous one's acknowledgement (delayed by up to 40 ms), which the client would count
        # as network time between tokens.
        request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        super().process_request(request, client_address)

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


def _completion_id() -> str:
    return f"chatcmpl-sim-{time.time_ns():x}"


def _handler_for(sim: ProviderSimulator) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet: the demo prints its own
            return

        def do_POST(self) -> None:
            if self.path.rstrip("/") != f"{sim.prefix}/chat/completions":
                self._send_json(404, {"error": {"message": f"unknown path {self.path}"}})
                return
            length = int(self.headers.get("content-length") or 0)
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
            except json.JSONDecodeError:
                self._send_json(400, {"error": {"message": "body is not JSON"}})
                return
            timing = sim.policy(body)
            model = str(body.get("model", "sim-model"))
            if body.get("stream"):
                self._stream(model, timing)
            else:
                hold = timing.hold_s
                time.sleep(hold if hold is not None else timing.queue_s + timing.prefill_s + timing.decode_s)
                self._send_json(200, _completion(model, timing))

        def _send_json(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _stream(self, model: str, timing: Timing) -> None:
            # Sleep to absolute deadlines so oversleeping never accumulates: the time spent is
            # the time reported, give or take one wake-up.
            first_token_at = time.monotonic() + timing.queue_s + timing.prefill_s
            _sleep_until(first_token_at)
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            completion_id = _completion_id()
            words = max(1, min(timing.completion_tokens, 24))
            gap = timing.decode_s / words
            self._event(_chunk(completion_id, model, {"role": "assistant", "content": ""}))
            for index in range(words):
                _sleep_until(first_token_at + index * gap)
                self._event(_chunk(completion_id, model, {"content": f"word{index} "}))
            _sleep_until(first_token_at + timing.decode_s)
            final = _chunk(completion_id, model, {}, finish_reason="stop")
            final["x_groq"] = {"id": "req_sim", "usage": timing.usage()}
            self._event(final)
            self._write_chunk(b"data: [DONE]\n\n")
            self._write_chunk(b"")

        def _event(self, payload: dict[str, Any]) -> None:
            self._write_chunk(b"data: " + json.dumps(payload).encode() + b"\n\n")

        def _write_chunk(self, data: bytes) -> None:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

    return Handler


def _sleep_until(deadline: float) -> None:
    remaining = deadline - time.monotonic()
    if remaining > 0:
        time.sleep(remaining)


def _chunk(
    completion_id: str, model: str, delta: dict[str, Any], finish_reason: str | None = None
) -> dict[str, Any]:
    return {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }


def _completion(model: str, timing: Timing) -> dict[str, Any]:
    return {
        "id": _completion_id(),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
        "usage": timing.usage(),
        "x_groq": {"id": "req_sim"},
    }


def main(argv: list[str] | None = None) -> None:
    """Serve one fixed timing from its own process; prints the base URL, then serves until killed.

    A separate process keeps the simulated server's timing honest when the caller's process is
    busy with other threads (a collector, a test runner).
    """
    import argparse
    import dataclasses

    parser = argparse.ArgumentParser(description="Simulated Groq-style provider with fixed timing.")
    for field in dataclasses.fields(Timing):
        kind = int if field.name.endswith("tokens") else float
        parser.add_argument(f"--{field.name.replace('_', '-')}", type=kind, required=field.name != "hold_s")
    args = vars(parser.parse_args(argv))
    timing = Timing(**args)
    simulator = ProviderSimulator(lambda body: timing).start()
    print(simulator.base_url, flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
