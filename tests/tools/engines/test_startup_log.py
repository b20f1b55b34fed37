"""Effective config read from real start-up logs of vLLM 0.5.4 .. 0.32.0 and SGLang
(tests/tools/engines/real_formats/startup; each file names its source and version)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.engines import engine_profile
from tools.engines.startup_log import parse_keywords

HERE = Path(__file__).parent / "real_formats" / "startup"


def log(name: str) -> list[str]:
    return [ln for ln in (HERE / name).read_text(encoding="utf-8").splitlines() if not ln.startswith("# ")]


def test_vllm_032_non_default_args_and_engine_config() -> None:
    cfg = engine_profile("vllm").startup_config(log("vllm-0.32.0-startup.log"))
    assert cfg.version == "0.32.0"
    assert cfg.args == {
        "host": "127.0.0.1",
        "port": 18771,
        "model": cfg.args["model"],
        "dtype": "float32",
        "max_model_len": 512,
    }
    assert cfg.args["model"].endswith("tiny-llama")
    r = cfg.resolved
    assert (r["max_seq_len"], r["dtype"], r["tensor_parallel_size"], r["speculative_config"]) == (
        512,
        "torch.float32",
        1,
        None,
    )
    assert r["enable_prefix_caching"] is True and r["kv_cache_dtype"] == "auto"
    # nested configs with commas inside stay one value each
    assert r["compilation_config"].startswith("{'mode':") and "AuxOutputConfig(" in r["aux_output_config"]


def test_vllm_019_non_default_args() -> None:
    cfg = engine_profile("vllm").startup_config(log("vllm-0.19.0-startup.log"))
    assert cfg.args["max_model_len"] == 262144 and cfg.args["tool_call_parser"] == "qwen3_xml"
    assert cfg.args["trust_remote_code"] is True


@pytest.mark.parametrize(
    ("name", "version", "key", "value"),
    [
        ("vllm-0.7.3-startup.log", "0.7.3", "max_model_len", 49152),
        ("vllm-0.7.1-startup.log", "0.7.1", "model_tag", "/mnt/cpn-pod/models/deepseek-ai/DeepSeek-R1"),
    ],
)
def test_vllm_07_namespace_args_cut_mid_line(name: str, version: str, key: str, value: object) -> None:
    cfg = engine_profile("vllm").startup_config(log(name))
    assert cfg.version == version and cfg.args[key] == value
    assert cfg.args["allowed_origins"] == ["*"] and cfg.args["api_key"] is None
    assert "guided_decoding_backend" not in cfg.args and "tool_call" not in cfg.args  # the cut field is dropped


def test_vllm_054_v0_engine_line_cut_mid_line() -> None:
    cfg = engine_profile("vllm").startup_config(log("vllm-0.5.4-startup.log"))
    assert cfg.version == "0.5.4"
    assert cfg.resolved == {
        "model": "/opt/apps/models/miniCPM-v2.6/v1",
        "speculative_config": None,
        "tokenizer": "/opt/apps/models/miniCPM-v2.6/v1",
        "skip_tokenizer_init": False,
    }


@pytest.mark.parametrize(
    ("name", "mem", "port"),
    [
        ("sglang-2025-04-startup.log", 0.8639842241317652, 8000),
        ("sglang-2025-07-startup.log", 0.874, 30000),
    ],
)
def test_sglang_server_args(name: str, mem: float, port: int) -> None:
    cfg = engine_profile("sglang").startup_config(log(name))
    r = cfg.resolved
    assert (r["mem_fraction_static"], r["port"], r["tp_size"], r["chunked_prefill_size"]) == (mem, port, 1, 8192)
    assert r["quantization"] is None and r["device"] == "cuda" and r["schedule_policy"] == "fcfs"


def test_quotes_and_brackets_keep_commas_inside_values() -> None:
    assert parse_keywords("a='x, y', b=[1, 2], c={'k': (1, 2)}, d=torch.float16)") == {
        "a": "x, y",
        "b": [1, 2],
        "c": {"k": (1, 2)},
        "d": "torch.float16",
    }


def test_an_engine_without_a_reader_or_a_log_without_the_lines() -> None:
    assert engine_profile("simulated").startup_config(["anything"]).resolved == {}
    assert engine_profile("vllm").startup_config(["INFO: Started server process"]).version is None


def test_the_engine_profile_reads_its_own_startup_log() -> None:
    from tools.engines import engine_profile

    assert engine_profile("vllm").startup_config(log("vllm-0.32.0-startup.log")).version == "0.32.0"
    assert engine_profile("sglang").startup_config(log("sglang-2025-07-startup.log")).resolved["pp_size"] == 1
