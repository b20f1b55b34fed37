"""Metrics readers: the Prometheus parser and vLLM's counters on a real `/metrics`
scrape (n-gram speculation, 4 requests in flight); SGLang's `/get_server_info`."""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from tools.engines import engine_profile
from tools.engines.prometheus import parse, total

LOGS = Path(__file__).parent / "logs"


def test_parser_reads_labels_escapes_and_special_values() -> None:
    text = (
        "# HELP x help text\n# TYPE x counter\n"
        'x_total{a="1",b="with \\"quote\\", comma"} 3.5\n'
        'x_total{a="2"} 1e3 1700000000\n'
        'gauge NaN\nup +Inf\nbroken{a="1"\nnot a sample line\n'
    )
    samples = parse(text)
    assert [(s.name, s.value) for s in samples][:2] == [("x_total", 3.5), ("x_total", 1000.0)]
    assert samples[0].labels == {"a": "1", "b": 'with "quote", comma'}
    assert total(samples, "x_total") == 1003.5
    assert total(samples, "x_total", {"a": "2"}) == 1000.0
    assert total(samples, "gauge") is None  # NaN only: not reported
    assert math.isinf(total(samples, "up") or 0)
    assert total(samples, "absent") is None


def test_vllm_busy_scrape() -> None:
    m = engine_profile("vllm").parse_metrics((LOGS / "vllm_metrics_ngram_busy.txt").read_text())
    assert (m.spec_drafts, m.spec_draft_tokens, m.spec_accepted_tokens) == (46.0, 133.0, 1.0)
    assert m.spec_accept_length == pytest.approx(1 + 1 / 46)
    assert m.spec_acceptance_rate == pytest.approx(1 / 133)
    assert m.running_requests == 4.0 and m.waiting_requests == 0.0
    assert m.kv_cache_usage == pytest.approx(0.0157, abs=1e-4)
    assert m.generation_tokens == 602.0


def test_vllm_idle_scrape_after_load() -> None:
    m = engine_profile("vllm").parse_metrics((LOGS / "vllm_metrics_ngram_idle.txt").read_text())
    assert m.spec_accept_length == pytest.approx(1 + 16 / 565)
    assert m.running_requests == 0.0 and m.kv_cache_usage == 0.0


def test_vllm_without_speculation_reports_none() -> None:
    body = "\n".join(
        ln for ln in (LOGS / "vllm_metrics_ngram_idle.txt").read_text().splitlines() if "spec_decode" not in ln
    )
    m = engine_profile("vllm").parse_metrics(body)
    assert m.spec_accept_length is None and m.spec_acceptance_rate is None
    assert m.generation_tokens == 1792.0


SGLANG_INFO = {
    "model_path": "/models/glm",
    "tp_size": 8,
    "speculative_algorithm": "EAGLE3",
    "max_total_num_tokens": 131072,
    "internal_states": [
        {"dp_rank": 0, "avg_spec_accept_length": 2.5, "num_running_reqs": 3, "token_usage": 0.25},
        {"dp_rank": 1, "avg_spec_accept_length": 3.5, "num_running_reqs": 5, "token_usage": 0.75},
    ],
    "version": "0.5.4",
}


def test_sglang_server_info() -> None:
    m = engine_profile("sglang").parse_metrics(json.dumps(SGLANG_INFO))
    assert m.spec_accept_length == 3.0 and m.running_requests == 8 and m.kv_cache_usage == 0.5
    assert m.server_args["speculative_algorithm"] == "EAGLE3" and "internal_states" not in m.server_args
    plain = engine_profile("sglang").parse_metrics(json.dumps({"model_path": "m", "internal_states": [{}]}))
    assert plain.spec_accept_length is None and plain.running_requests is None


def test_sglang_rejects_non_object() -> None:
    with pytest.raises(ValueError):
        engine_profile("sglang").parse_metrics("[1, 2]")


@pytest.fixture()
def metrics_server() -> Iterator[str]:
    """A real HTTP server on 127.0.0.1 serving the saved scrapes."""
    body = (LOGS / "vllm_metrics_ngram_busy.txt").read_bytes()
    info = json.dumps(SGLANG_INFO).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            data = {"/metrics": body, "/get_server_info": info}.get(self.path)
            self.send_response(200 if data else 404)
            self.end_headers()
            self.wfile.write(data or b"")

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_sglang_reads_server_info_first() -> None:
    """sglang >= 0.5.10 serves /server_info (/get_server_info logs a deprecation warning
    per call); 0.5.5 only /get_server_info (the fixture server above)."""
    seen: list[str] = []
    info = json.dumps(SGLANG_INFO).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.path)
            self.send_response(200 if self.path == "/server_info" else 404)
            self.end_headers()
            self.wfile.write(info if self.path == "/server_info" else b"")

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        assert engine_profile("sglang").read_metrics(url).spec_accept_length == 3.0
    finally:
        server.shutdown()
        server.server_close()
    assert seen == ["/server_info"]


def test_read_metrics_over_http(metrics_server: str) -> None:
    assert engine_profile("vllm").read_metrics(metrics_server).running_requests == 4.0
    assert engine_profile("sglang").read_metrics(metrics_server + "/").spec_accept_length == 3.0
    with pytest.raises(httpx.HTTPStatusError):
        engine_profile("simulated").read_metrics(metrics_server)  # no /server_info there
