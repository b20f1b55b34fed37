"""Pure performance model: the calibration facts, and physically sensible trends."""

from __future__ import annotations

import pytest

from tools.simnode.collectives import collective_costs
from tools.simnode.config import EngineConfig
from tools.simnode.failures import plan_failure
from tools.simnode.perfmodel import accept_length, expected_output_tps, memory_plan, step_model
from tools.simnode.profiles import get_profile, get_stack
from tools.simnode.textgen import DIVERSE_PREDICTABILITY, FIXED_PREDICTABILITY

RTX = "rtx6000bw-pcie-8x"
BASE512 = {"cuda-graph-max-bs": 512, "mem-fraction-static": 0.88}
BASE128 = {"cuda-graph-max-bs": 128, "mem-fraction-static": 0.88}
EAGLE = {
    **BASE128,
    "speculative-algorithm": "EAGLE3",
    "speculative-num-steps": 3,
    "speculative-eagle-topk": 4,
    "speculative-num-draft-tokens": 16,
}
CONC = [1, 2, 5, 10, 30, 70, 100, 250]
SWEEP_BASE = [92.6, 159.7, 292.5, 457.2, 711.0, 784.2, 761.6, 772.1]
SWEEP_EAGLE = [77.5, 125.1, 183.2, 239.6, 299.5, 337.7, 338.8, 340.9]


def cfg(flags: dict, env: dict | None = None) -> EngineConfig:
    return EngineConfig.from_flags(flags, env)


@pytest.mark.parametrize(
    "flags,cuda,target",
    [
        (BASE512, "12.8", 82.0),
        (BASE128, "12.8", 89.5),
        (EAGLE, "12.8", 54.1),
        ({**BASE512, "enable-custom-all-reduce": True}, "12.8", 38.0),
        (EAGLE, "13.0", 96.1),
    ],
)
def test_single_stream_calibration(flags, cuda, target):
    got = expected_output_tps(cfg(flags), RTX, cuda, 1, "fixed", 256, 512)
    assert got == pytest.approx(target, rel=0.05)


@pytest.mark.parametrize("flags,targets", [(BASE128, SWEEP_BASE), (EAGLE, SWEEP_EAGLE)], ids=["baseline", "eagle3"])
def test_parallel_sweep_calibration(flags, targets):
    for c, target in zip(CONC, targets):
        got = expected_output_tps(cfg(flags), RTX, "13.0", c, "diverse", 256, 512)
        assert got == pytest.approx(target, rel=0.10), f"C={c}: {got:.1f} vs {target}"


def test_baseline_beats_eagle_at_every_concurrency_and_eagle_saturates():
    base = [expected_output_tps(cfg(BASE128), RTX, "13.0", c, "diverse") for c in CONC]
    eagle = [expected_output_tps(cfg(EAGLE), RTX, "13.0", c, "diverse") for c in CONC]
    assert all(b > e for b, e in zip(base, eagle))
    assert eagle[-1] == pytest.approx(eagle[-3], rel=0.05)  # ~340 plateau from C=70
    assert base[-1] > 2 * eagle[-1]


def test_smaller_graph_frees_kv_cache():
    prof = get_profile(RTX)
    small, big = memory_plan(cfg(BASE128), prof), memory_plan(cfg(BASE512), prof)
    assert small.kv_capacity_tokens > 1.8 * big.kv_capacity_tokens
    assert big.graph_gib > small.graph_gib


def test_verify_allreduces_run_eager_and_cuda13_makes_them_cheaper():
    prof = get_profile(RTX)
    c12 = collective_costs(cfg(EAGLE), prof, get_stack("12.8"))
    c13 = collective_costs(cfg(EAGLE), prof, get_stack("13.0"))
    assert c12.per_forward == 122
    assert c12.eager_latency_s == pytest.approx(0.225e-3, rel=0.15)
    assert c13.eager_latency_s < 0.6 * c12.eager_latency_s
    model = step_model(cfg(EAGLE), prof, get_stack("12.8"))
    assert model.verify_allreduce_share() > 0.8
    assert model.spec_cycle_s(1, 768) == pytest.approx(0.035, rel=0.15)


def test_fixed_prompt_accepts_more_than_diverse():
    c = cfg(EAGLE)
    assert accept_length(FIXED_PREDICTABILITY, c) > accept_length(DIVERSE_PREDICTABILITY, c) + 0.2
    assert accept_length(0.5, cfg(BASE128)) == 1.0
    fixed = expected_output_tps(c, RTX, "13.0", 1, "fixed")
    diverse = expected_output_tps(c, RTX, "13.0", 1, "diverse")
    assert fixed > diverse * 1.1


def test_nvlink_profile_differs_physically():
    h200 = "h200-nvlink-8x"
    base = expected_output_tps(cfg(BASE128), h200, "12.8", 1, "fixed")
    eagle = expected_output_tps(cfg(EAGLE), h200, "12.8", 1, "fixed")
    assert eagle > base  # cheap NVLink collectives: speculation pays off for a single stream
    assert base > 2 * expected_output_tps(cfg(BASE128), RTX, "12.8", 1, "fixed")
    assert collective_costs(cfg(BASE128), get_profile(h200), get_stack("12.8")).backend == "custom"


def test_nccl_env_changes_collective_costs_only_through_physics():
    prof, stack = get_profile(RTX), get_stack("13.0")
    ring = collective_costs(cfg(BASE128), prof, stack)
    few = collective_costs(cfg(BASE128, {"NCCL_MAX_NCHANNELS": "2"}), prof, stack)
    nop2p = collective_costs(cfg(BASE128, {"NCCL_P2P_LEVEL": "LOC"}), prof, stack)
    assert few.bandwidth < ring.bandwidth and few.graph_latency_s < ring.graph_latency_s
    assert nop2p.graph_latency_s > ring.graph_latency_s


@pytest.mark.parametrize(
    "flags,env,phase,needle",
    [
        ({"enable-flashinfer-allreduce-fusion": True}, {}, "jit", "unsupported arch sm_120"),
        ({"enable-torch-symm-mem": True}, {}, "dist", "arch table"),
        ({}, {"NCCL_ALGO": "Tree"}, "capture", "incompatible with CUDA graphs"),
        ({"ep-size": 8, "moe-a2a-backend": "flashinfer"}, {}, "serve", "CUDA out of memory"),
        ({"mem-fraction-static": 0.98}, {}, "capture", "CUDA out of memory"),
        ({"cuda-graph-max-bs": 2048}, {}, "capture", "Capture cuda graph failed"),
        ({}, {"CUDA_VISIBLE_DEVICES": "0,1,2,3"}, "dist", "invalid device ordinal"),
    ],
)
def test_failure_rules_on_cuda_12_8(flags, env, phase, needle):
    c, prof, stack = cfg({**BASE128, **flags}, env), get_profile(RTX), get_stack("12.8")
    plan = plan_failure(c, prof, stack, memory_plan(c, prof))
    assert plan is not None and plan.phase == phase
    assert needle in "\n".join(plan.lines)


@pytest.mark.parametrize(
    "flags,env",
    [
        ({"enable-flashinfer-allreduce-fusion": True}, {}),
        ({"enable-torch-symm-mem": True}, {}),
        ({}, {"NCCL_ALGO": "Tree"}),
    ],
)
def test_cuda13_lifts_cuda_bound_failures_and_features_take_effect(flags, env):
    c, prof, stack = cfg({**BASE128, **flags}, env), get_profile(RTX), get_stack("13.0")
    assert plan_failure(c, prof, stack, memory_plan(c, prof)) is None
    plain = collective_costs(cfg(BASE128), prof, stack)
    assert collective_costs(c, prof, stack).graph_latency_s < plain.graph_latency_s
    assert plan_failure(cfg(BASE128), prof, stack, memory_plan(cfg(BASE128), prof)) is None
