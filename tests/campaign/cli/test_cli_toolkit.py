"""`campaign bench` / `campaign simnode` through a real subprocess of the CLI."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.canned_http import CannedHandler, serving

ROOT = Path(__file__).resolve().parents[3]
CLI = [sys.executable, "-c", "from campaign.cli.main import main; main()"]


def campaign(*args: str, prelude: str = "") -> subprocess.CompletedProcess[str]:
    code = f"{prelude}\nfrom campaign.cli.main import main; main()" if prelude else CLI[2]
    env = os.environ | {"COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-c", code, *args], cwd=ROOT, capture_output=True, text=True, timeout=120, env=env
    )


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    proc = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "bench" / "reference_server.py"),
            "--port",
            "0",
            "--first-token-ms",
            "20",
            "--interval-ms",
            "5",
            "--time-scale",
            "2",
        ],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    line = proc.stdout.readline() if proc.stdout else ""
    assert line.startswith("LISTENING"), line
    yield f"http://127.0.0.1:{line.split()[1]}"
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(timeout=10)


def test_bench_prints_a_table_and_writes_json(server: str, tmp_path: Path) -> None:
    out = tmp_path / "sweep.json"
    run = campaign(
        "bench",
        server,
        "--concurrency",
        "1,4",
        "--requests-per-level",
        "max(4, C)",
        "--output-tokens",
        "12",
        "--prompts",
        "diverse",
        "--warmup",
        "1",
        "--json",
        str(out),
    )
    assert run.returncode == 0, run.stderr
    assert "reference-model" in run.stdout and "TTFT p50" in run.stdout
    data = json.loads(out.read_text())
    assert data["time_scale"] == 2.0 and len(data["prompt_set_hash"]) == 16
    levels = data["levels"]
    assert [lv["concurrency"] for lv in levels] == [1, 4] and [lv["requests"] for lv in levels] == [4, 4]
    for lv in levels:
        assert lv["errors"] == 0 and lv["output_tokens_per_s"] > 0 and lv["requests_per_s"] > 0
        for key in ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms"):
            assert set(lv[key]) == {"mean", "p50", "p90", "p99"}
        assert 30 <= lv["ttft_ms"]["p50"] <= 120  # 20 ms wall x time scale 2
        assert 8 <= lv["tpot_ms"]["p50"] <= 20  # 5 ms wall x 2


class _Loading(CannedHandler):
    """A server still loading its weights: lists its model, answers every completion 503
    with a multi-line body (as SGLang does before its first health check passes)."""

    def do_GET(self) -> None:
        self.send(200, json.dumps({"data": [{"id": "m"}]}).encode())

    def do_POST(self) -> None:
        self.read_body()
        self.send(503, b'{"error": "server is loading\n  weights: 0/64 \x1b[2J"}')


def test_bench_with_failed_requests_says_so_in_one_line_and_exits_2(tmp_path: Path) -> None:
    """A table of zeros and exit 0 told the user nothing; the failures and a sample are named."""
    out = tmp_path / "sweep.json"
    with serving(_Loading) as port:
        run = campaign(
            "bench",
            f"http://127.0.0.1:{port}",
            "--concurrency",
            "1,2",
            "--requests-per-level",
            "2",
            "--warmup",
            "0",
            "--json",
            str(out),
        )
    assert run.returncode == 2, run.stderr
    lines = [ln for ln in run.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("campaign bench: 4 of 4 requests failed"), run.stderr
    assert "503" in lines[0] and "server is loading" in lines[0] and "Traceback" not in run.stderr
    assert "\x1b" not in run.stderr and "(U+001B)" in lines[0]  # the body's escape is shown, not obeyed
    assert json.loads(out.read_text())["levels"][1]["errors"] == 2  # what was measured is still written


def test_bench_import_vllm_file(tmp_path: Path) -> None:
    path = tmp_path / "vllm.json"
    path.write_text(
        json.dumps(
            {
                "backend": "openai",
                "endpoint_type": "openai",
                "max_concurrency": 8,
                "duration": 10.0,
                "completed": 16,
                "failed": 0,
                "output_throughput": 410.5,
                "request_throughput": 1.6,
                "mean_ttft_ms": 50.0,
                "median_ttft_ms": 48.0,
                "p99_ttft_ms": 70.0,
                "mean_e2el_ms": 900.0,
                "median_e2el_ms": 880.0,
            }
        )
    )
    run = campaign("bench", "--import", str(path), "--json", str(tmp_path / "out.json"))
    assert run.returncode == 0, run.stderr
    assert "410.5" in run.stdout
    assert json.loads((tmp_path / "out.json").read_text())["source"] == "vllm"


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["bench", "http://127.0.0.1:9", "--concurrency", "1"], "cannot reach"),
        (["bench", "http://127.0.0.1:9", "--concurrency", "1,x"], "--concurrency"),
        (["bench", "http://127.0.0.1:9", "--output-tokens", "ten"], "--output-tokens"),
        (["bench", "http://127.0.0.1:9", "--requests-per-level", "__import__('os')"], "requests_per_level"),
        (["bench", "http://127.0.0.1:9", "--prompts", "/no/such.jsonl"], "--prompts"),
        (["bench", "http://127.0.0.1:9", "--bogus", "1"], "unexpected argument '--bogus'"),
        (["bench"], "a URL is required"),
    ],
)
def test_bench_bad_input_is_one_line_and_exit_2(args: list[str], needle: str) -> None:
    run = campaign(*args)
    assert run.returncode == 2
    lines = [ln for ln in run.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("campaign bench: ") and needle in lines[0], run.stderr
    assert "Traceback" not in run.stderr


def test_bench_malformed_import_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"max_concurrency": 1}\n{oops\n')
    run = campaign("bench", "--import", str(path))
    assert run.returncode == 2 and run.stderr.strip().count("\n") == 0
    assert str(path) in run.stderr and "line 2" in run.stderr


def test_simnode_passes_every_argument_through() -> None:
    # tools.simnode.__main__ is another engineer's module: stand in for it to observe argv.
    prelude = (
        "import sys, types; m = types.ModuleType('tools.simnode.__main__'); "
        "m.main = lambda argv: print('ARGV', argv) or 7; sys.modules['tools.simnode.__main__'] = m"
    )
    run = campaign("simnode", "--port", "5", "--help", "--tp-size", "2", "fingerprint", prelude=prelude)
    assert run.returncode == 7, run.stderr
    assert "ARGV ['--port', '5', '--help', '--tp-size', '2', 'fingerprint']" in run.stdout
