"""Every failure is one line, ``error: ...``, on standard error with a documented exit code:
0 done, 1 the service said no (or nothing matched), 2 usage, 3 no LatencyLens service at the URL."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from cli_data import FAST_ID, SLOW_ID, load_two_requests, wait_for_requests
from otlp_builders import chat_trace, post_protobuf

from latencylens_collector.cli.errors import EXIT_CODES_HELP
from latencylens_collector.cli.main import main


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as exit_:  # argparse's usage errors and --help
        code = int(exit_.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class _HtmlPage(BaseHTTPRequestHandler):
    """Another web server: answers every path with an HTML page."""

    def do_GET(self) -> None:
        body = b"<!doctype html><html><body><h1>Welcome to nginx!</h1></body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def html_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _HtmlPage)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_slo_create_with_a_percentage_for_a_quantile(collector, capsys) -> None:
    argv = ["slo", "create", "--url", collector.url, "--name", "chat p95", "--threshold-ms", "800"]
    code, out, err = run([*argv, "--quantile", "95"], capsys)
    assert (code, out) == (2, "")
    assert err == "error: --quantile must be less than 1 (got 95; a fraction: 0.95 for p95)\n"
    code, out, err = run([*argv[:-2], "--threshold-ms", "-5", "--target", "0.99"], capsys)
    assert (code, out) == (2, "")
    assert err == "error: --threshold-ms must be greater than 0 (got -5)\n"
    assert httpx.get(f"{collector.url}/api/slos").json() == {"slos": []}  # nothing was sent


def test_a_url_that_answers_html_is_not_a_latencylens_service(html_server: str, capsys) -> None:
    for argv in (["slow"], ["stats"], ["explain", SLOW_ID], ["slo", "list"]):
        code, out, err = run([*argv, "--url", html_server], capsys)
        assert (code, out) == (3, "")
        assert err == (
            f"error: {html_server} is not a LatencyLens service: it answered 200 with text/html "
            "(check --url)\n"
        )


def test_nothing_listening(capsys) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    code, out, err = run(["slow", "--url", url], capsys)
    assert (code, out) == (3, "")
    assert err == (
        f"error: cannot reach the LatencyLens service at {url}: Connection refused "
        "(start it with 'latencylens serve', or pass --url)\n"
    )


def test_usage_errors_are_one_line(capsys) -> None:
    code, out, err = run(["slow", "--limit", "many"], capsys)
    assert (code, out) == (2, "")
    assert err == "error: argument --limit: invalid int value: 'many' (see 'latencylens slow --help')\n"
    code, out, err = run(["explain", "not-an-id"], capsys)
    assert (code, out) == (2, "")
    assert err == "error: TRACE_ID must be a trace id or a prefix of one (hex characters), got 'not-an-id'\n"
    code, _, err = run([], capsys)
    assert code == 2
    assert err == "error: the following arguments are required: COMMAND (see 'latencylens --help')\n"


def test_the_service_saying_no_is_exit_code_1(collector, capsys) -> None:
    code, out, err = run(["stats", "--url", collector.url, "--by", "colour"], capsys)
    assert (code, out) == (1, "")
    assert err.startswith("error: ") and "allowed: service, route, model, provider" in err
    assert err.count("\n") == 1
    code, out, err = run(["slo", "show", "42", "--url", collector.url], capsys)
    assert (code, out, err) == (1, "", "error: no SLO 42\n")
    code, out, err = run(["slow", "--url", collector.url, "--limit", "0"], capsys)
    assert (code, out, err) == (1, "", "error: limit: Input should be greater than or equal to 1\n")


def test_a_missing_api_key_says_how_to_give_one(start_collector, capsys) -> None:
    from latencylens_collector.auth import KeyStore

    collector = start_collector()
    KeyStore(collector.settings.metadata_url).create("checkout")
    code, out, err = run(["slow", "--url", collector.url], capsys)
    assert (code, out) == (1, "")
    assert err == (
        "error: missing API key: send 'Authorization: Bearer <key>' or 'x-api-key: <key>' (create one "
        "with 'latencylens keys create --project NAME') (pass --api-key or set LATENCYLENS_API_KEY)\n"
    )


def test_explain_takes_a_unique_prefix_and_names_the_candidates_of_an_ambiguous_one(
    collector, capsys
) -> None:
    loaded = load_two_requests(collector.url)
    twin = "0af7651916cd43dd0000000000000001"  # shares 16 characters with SLOW_ID
    assert (
        post_protobuf(collector.url, chat_trace(loaded.start_ns, trace_id=int(twin, 16))).status_code == 200
    )
    code, out, _ = run(["explain", FAST_ID[:4], "--url", collector.url, "--json"], capsys)
    assert code == 0 and json.loads(out)["trace_id"] == FAST_ID
    code, out, _ = run(["explain", SLOW_ID[:17].upper(), "--url", collector.url, "--json"], capsys)
    assert code == 0 and json.loads(out)["trace_id"] == SLOW_ID
    code, out, err = run(["explain", "0af7", "--url", collector.url], capsys)
    assert (code, out) == (1, "")
    assert err == f"error: trace id prefix 0af7 is ambiguous: {twin}, {SLOW_ID}; give more characters\n"
    code, out, err = run(["explain", "ffff", "--url", collector.url], capsys)
    assert (code, out, err) == (1, "", "error: no request has a trace id starting with ffff\n")
    code, out, err = run(["explain", "f" * 32, "--url", collector.url], capsys)
    assert (code, out, err) == (1, "", f"error: no request with trace id {'f' * 32}\n")


def test_json_into_a_reader_that_stops_early_ends_quietly(collector) -> None:
    """``latencylens slow --json | head -1``: far more than a pipe holds, the reader leaves after
    one line; the command ends with exit code 0 and nothing on standard error."""
    base = load_two_requests(collector.url).start_ns
    spans = []
    for n in range(150):
        spans += chat_trace(base, trace_id=(0xD0 << 120) | n + 1)
    assert post_protobuf(collector.url, spans).status_code == 200
    wait_for_requests(collector.url, 152)
    command = [sys.executable, "-m", "latencylens_collector", "slow", "--json", "--limit", "500"]
    process = subprocess.Popen(
        [*command, "--url", collector.url],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "COLUMNS": "80"},
    )
    assert process.stdout is not None and process.stderr is not None
    assert process.stdout.readline() == b"{\n"
    process.stdout.close()
    assert process.wait(timeout=60) == 0
    assert process.stderr.read() == b""


def test_help_lists_the_exit_codes(capsys) -> None:
    for argv in (["--help"], ["slow", "--help"], ["keys", "create", "--help"]):
        code, out, _ = run(argv, capsys)
        assert code == 0
        assert " ".join(EXIT_CODES_HELP.split()) in " ".join(out.split())
