"""Cost of the tensor-parallel all-reduce: which implementation runs and what it costs.

The implementation follows the flags, the env vars (NCCL_*), the interconnect and what
the CUDA stack supports on the GPU architecture: custom all-reduce is SGLang's default
only with full NVLink (forcing it over PCIe makes every GPU read all peers at once,
so the PCIe switches contend); torch symmetric memory and FlashInfer's fused
all-reduce+RMSNorm only work where the stack has kernels for the arch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from tools.simnode.config import EngineConfig
from tools.simnode.profiles import CudaStack, Profile

CUSTOM_EAGER_LAUNCH_S = 8e-6


@dataclass(frozen=True)
class CollectiveCosts:
    backend: str  # "nccl" | "custom"
    per_forward: int  # all-reduces per forward pass (attention + MLP per layer)
    graph_latency_s: float
    eager_latency_s: float
    bandwidth: float  # algorithm bandwidth, bytes/s
    fused_norm: bool = False
    symm_mem: bool = False


def _nccl_env_factors(env: Mapping[str, str], nvlink: bool) -> tuple[float, float]:
    """(latency factor, bandwidth factor) of NCCL tuning variables."""
    get = env.get
    lat, bw = 1.0, 1.0
    algo = (get("NCCL_ALGO") or "").lower()
    if algo == "tree":
        lat, bw = (lat * 0.9, bw * 0.85) if nvlink else (lat * 0.85, bw * 0.7)
    proto = (get("NCCL_PROTO") or "").lower()
    if proto == "ll":
        lat, bw = lat * 0.85, bw * 0.5
    elif proto == "ll128":
        lat, bw = lat * 0.95, bw * 0.9
    elif proto == "simple":
        lat, bw = lat * 1.35, bw * 1.05
    max_ch = _int(get("NCCL_MAX_NCHANNELS"))
    if max_ch is not None and max_ch < 8:
        lat *= 1 - 0.01 * (8 - max(max_ch, 1))
        bw *= (max(max_ch, 1) / 8) ** 0.5
    min_ch = _int(get("NCCL_MIN_NCHANNELS"))
    if min_ch is not None and min_ch > 8:
        lat, bw = lat * 1.03, bw * 1.05
    p2p = (get("NCCL_P2P_LEVEL") or "").upper()
    if p2p == "LOC" or (p2p == "NVL" and not nvlink):  # peer-to-peer disabled: staged through host memory
        lat, bw = lat * 1.5, bw * 0.55
    return lat, bw


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value else None
    except ValueError:
        return None


def fusion_supported(profile: Profile, stack: CudaStack) -> bool:
    return profile.arch in stack.flashinfer_jit_archs


def symm_mem_supported(profile: Profile, stack: CudaStack) -> bool:
    return profile.compute_capability[0] in stack.symm_mem_majors


def collective_costs(cfg: EngineConfig, profile: Profile, stack: CudaStack) -> CollectiveCosts:
    tp = max(1, cfg.tp_size)
    per_forward = 2 * profile.layers if tp > 1 else 0
    custom = tp > 1 and not cfg.disable_custom_all_reduce and (profile.nvlink or cfg.enable_custom_all_reduce)
    if custom:
        contention = 1 + profile.p2p_contention * (tp - 1)
        lat, bw, backend = profile.custom_ar_base_s * contention, profile.allreduce_bw / contention**0.5, "custom"
    else:
        lat_f, bw_f = _nccl_env_factors(cfg.env, profile.nvlink)
        lat = profile.allreduce_graph_s * stack.graph_ar_scale * lat_f
        bw, backend = profile.allreduce_bw * bw_f, "nccl"
    symm = cfg.enable_torch_symm_mem and symm_mem_supported(profile, stack)
    if symm:
        lat *= 0.85
    fused = cfg.enable_flashinfer_allreduce_fusion and fusion_supported(profile, stack)
    if fused:  # one-shot Lamport all-reduce fused with residual add + RMSNorm
        lat *= 0.8
    # outside a graph every collective is launched from the host: NCCL over PCIe pays its proxy
    # thread and stream sync; the custom kernel is a plain launch
    eager = lat + (CUSTOM_EAGER_LAUNCH_S if custom else stack.eager_launch_s * profile.nccl_eager_factor)
    return CollectiveCosts(backend, per_forward, lat, eager, bw, fused, symm)
