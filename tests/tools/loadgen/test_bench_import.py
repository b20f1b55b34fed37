"""Import of SGLang bench_serving (JSONL) and vLLM bench serve (JSON) result files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from campaign.domain.errors import UserError
from tools.loadgen.bench_import import import_result


def sglang_run(concurrency: int, tps: float) -> dict:
    """Keys as written by sglang.bench_serving --output-file (one JSON line per run)."""
    return {
        "backend": "sglang-oai",
        "dataset_name": "random",
        "request_rate": float("inf"),
        "max_concurrency": concurrency,
        "random_input_len": 1024,
        "random_output_len": 256,
        "duration": 12.5,
        "completed": 40,
        "total_input_tokens": 40960,
        "total_output_tokens": 10240,
        "total_output_tokens_retokenized": 10200,
        "request_throughput": 3.2,
        "input_throughput": 3276.8,
        "output_throughput": tps,
        "total_throughput": 4096.0,
        "mean_e2e_latency_ms": 3100.0,
        "median_e2e_latency_ms": 3050.0,
        "std_e2e_latency_ms": 80.0,
        "p90_e2e_latency_ms": 3200.0,
        "p99_e2e_latency_ms": 3300.0,
        "mean_ttft_ms": 120.0,
        "median_ttft_ms": 110.0,
        "std_ttft_ms": 10.0,
        "p99_ttft_ms": 180.0,
        "mean_tpot_ms": 11.5,
        "median_tpot_ms": 11.4,
        "std_tpot_ms": 0.3,
        "p99_tpot_ms": 12.5,
        "mean_itl_ms": 11.6,
        "median_itl_ms": 11.2,
        "std_itl_ms": 2.0,
        "p95_itl_ms": 14.0,
        "p99_itl_ms": 20.0,
        "concurrency": concurrency - 0.1,
        "accept_length": None,
    }


def vllm_run() -> dict:
    """Keys as written by `vllm bench serve --save-result` (default --metric-percentiles 99)."""
    return {
        "date": "20250101-120000",
        "endpoint_type": "openai",
        "backend": "openai",
        "label": None,
        "model_id": "meta-llama/Llama-3.1-8B-Instruct",
        "tokenizer_id": "meta-llama/Llama-3.1-8B-Instruct",
        "num_prompts": 100,
        "request_rate": "inf",
        "burstiness": 1.0,
        "max_concurrency": 16,
        "duration": 20.0,
        "completed": 98,
        "failed": 2,
        "total_input_tokens": 100352,
        "total_output_tokens": 12544,
        "request_throughput": 4.9,
        "request_goodput": None,
        "output_throughput": 627.2,
        "total_token_throughput": 5644.8,
        "max_output_tokens_per_s": 700.0,
        "max_concurrent_requests": 16,
        "mean_ttft_ms": 95.0,
        "median_ttft_ms": 90.0,
        "std_ttft_ms": 9.0,
        "p99_ttft_ms": 140.0,
        "mean_tpot_ms": 24.0,
        "median_tpot_ms": 23.5,
        "std_tpot_ms": 1.0,
        "p99_tpot_ms": 27.0,
        "mean_itl_ms": 24.1,
        "median_itl_ms": 23.0,
        "std_itl_ms": 3.0,
        "p99_itl_ms": 40.0,
        "mean_e2el_ms": 3100.0,
        "median_e2el_ms": 3090.0,
        "std_e2el_ms": 50.0,
        "p99_e2el_ms": 3250.0,
    }


def test_sglang_jsonl_gives_one_level_per_run(tmp_path: Path) -> None:
    path = tmp_path / "sglang.jsonl"
    path.write_text("\n".join(json.dumps(sglang_run(c, t)) for c, t in [(1, 90.0), (8, 650.0)]) + "\n")
    result = import_result(path)
    assert result.source == "sglang" and [lv.concurrency for lv in result.levels] == [1, 8]
    lv = result.levels[1]
    assert lv.output_tokens_per_s == 650.0 and lv.requests_per_s == 3.2 and lv.duration_s == 12.5
    assert lv.requests == 40 and lv.errors == 0 and lv.output_tokens == 10240 and lv.input_tokens == 40960
    assert (lv.ttft_ms.mean, lv.ttft_ms.p50, lv.ttft_ms.p99) == (120.0, 110.0, 180.0)
    assert (lv.e2e_ms.p50, lv.e2e_ms.p90, lv.e2e_ms.p99) == (3050.0, 3200.0, 3300.0)
    assert (lv.itl_ms.p50, lv.itl_ms.p99, lv.tpot_ms.mean) == (11.2, 20.0, 11.5)


def test_sglang_details_fill_missing_percentiles(tmp_path: Path) -> None:
    run = sglang_run(4, 300.0) | {
        "ttfts": [0.1 * i for i in range(1, 11)],
        "itls": [[0.01, 0.02], [0.03]],
        "errors": ["", "boom", ""],
    }
    path = tmp_path / "details.jsonl"
    path.write_text(json.dumps(run) + "\n")
    lv = import_result(path).levels[0]
    assert lv.ttft_ms.p90 == pytest.approx(910.0) and lv.ttft_ms.p99 == 180.0  # p99 from the file wins
    assert lv.errors == 1 and lv.requests == 41


def test_vllm_json(tmp_path: Path) -> None:
    path = tmp_path / "vllm.json"
    path.write_text(json.dumps(vllm_run(), indent=2))
    result = import_result(path)
    assert result.source == "vllm" and result.model == "meta-llama/Llama-3.1-8B-Instruct"
    lv = result.levels[0]
    assert lv.concurrency == 16 and lv.requests == 100 and lv.errors == 2
    assert lv.output_tokens_per_s == 627.2 and lv.e2e_ms.p50 == 3090.0 and lv.e2e_ms.p99 == 3250.0
    assert lv.ttft_ms.p90 == 0.0  # not in the file, no per-request data


@pytest.mark.parametrize(
    ("content", "match"),
    [
        ("{not json\n", "line 1: not valid JSON"),
        (json.dumps({k: v for k, v in vllm_run().items() if k != "median_ttft_ms"}), "run 1: median_ttft_ms: missing"),
        (json.dumps(vllm_run() | {"output_throughput": "fast"}), "output_throughput: not a number"),
        # null and nothing measured (a real rate-only run has max_concurrent_requests)
        (
            json.dumps(vllm_run() | {"max_concurrency": None, "max_concurrent_requests": None, "mean_e2el_ms": None}),
            "max_concurrency: missing and no measured concurrency",
        ),
        ("[1, 2]", "run 1: not a JSON object"),
        ("", "no benchmark runs"),
    ],
)
def test_malformed_files_name_file_and_field(tmp_path: Path, content: str, match: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(UserError, match=match) as info:
        import_result(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_vllm_010_rate_run_without_any_concurrency_figure(tmp_path: Path) -> None:
    """vLLM 0.10 `serve.py` (result_json) writes no failed, max_concurrent_requests or
    latencies; a --request-rate run has max_concurrency null: Little's law labels it."""
    run = {
        k: v for k, v in vllm_run().items() if k not in ("failed", "max_concurrent_requests", "max_output_tokens_per_s")
    }
    run |= {"max_concurrency": None, "request_rate": 8.0, "request_throughput": 4.9, "mean_e2el_ms": 3100.0}
    path = tmp_path / "vllm010.json"
    path.write_text(json.dumps(run))
    lv = import_result(path).levels[0]
    assert lv.concurrency == 15 and lv.errors == 0  # 4.9 req/s x 3.1 s
