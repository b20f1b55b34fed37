"""Physical descriptions of the simulated nodes and of the software stacks on them.

A profile is a machine plus the model it serves (what the step time depends on);
a CUDA stack is what changes with a toolkit upgrade (collective launch costs, which
kernels support the GPU architecture, library versions).  Nothing here knows about
hypotheses: behaviour follows from these numbers and from the flags.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from campaign.domain.errors import UserError


@dataclass(frozen=True)
class Profile:
    """A node (GPUs + interconnect) serving one model with tensor parallelism."""

    name: str
    gpu: str
    gpu_count: int
    arch: str  # e.g. "sm_120"
    compute_capability: tuple[int, int]
    hbm_gib: float  # usable device memory per GPU
    hbm_bw: float  # bytes/s per GPU
    peak_flops: float  # dense low-precision FLOP/s per GPU
    mfu_decode: float  # fraction of peak reached by small-batch GEMMs
    mfu_prefill: float
    interconnect: str  # "pcie5" | "nvlink4"
    driver: str
    # the served model (per GPU at TP = gpu_count)
    model_name: str
    layers: int
    hidden: int
    weights_gib: float  # resident weights per GPU
    weight_read_bytes: float  # weights streamed per forward pass per GPU (active params)
    flops_per_token: float  # per GPU per token (2 x active params / TP)
    kv_bytes_per_token: float  # per GPU, bf16 KV (MLA latent is replicated across TP)
    attn_seq_layer_s: float  # fixed attention cost per sequence per layer (paged split-KV)
    activations_gib: float  # activation workspace at chunked-prefill 8192
    graph_base_gib: float  # CUDA graph pool: base + per captured batch size
    graph_per_bs_gib: float
    runtime_reserve_gib: float  # CUDA context, NCCL buffers, cuBLAS workspace outside the static pool
    # collectives (NCCL ring, default protocol) between the TP ranks
    allreduce_graph_s: float  # per-op latency when replayed inside a CUDA graph
    allreduce_bw: float  # algorithm bandwidth, bytes/s
    p2p_contention: float  # slowdown of all-to-all peer traffic (custom all-reduce) per extra peer
    custom_ar_base_s: float  # one-shot custom all-reduce latency with no contention
    nvlink: bool
    nccl_eager_factor: float  # share of the stack's eager NCCL launch/proxy cost this transport pays
    # host side
    host_base_s: float  # scheduler + sampling per step
    host_per_seq_s: float
    host_kv_pressure_s: float  # extra scheduler bookkeeping at the reference pool size
    kv_reference_tokens: int
    context_length: int = 131072
    draft_weights_gib: float = 0.35  # EAGLE-3 draft head per GPU
    draft_flops_per_token: float = 2.0e8
    default_cuda_graph_max_bs: int = 256


@dataclass(frozen=True)
class CudaStack:
    """What a CUDA toolkit upgrade changes on the node."""

    cuda: str
    eager_launch_s: float  # host launch + stream sync added to every collective outside a graph
    graph_ar_scale: float  # NCCL protocol improvements inside graphs
    flashinfer_jit_archs: frozenset[str]
    symm_mem_majors: frozenset[int]  # compute-capability majors in torch's symmetric-memory table
    nccl_tree_with_graphs: bool
    versions: dict[str, str] = field(default_factory=dict)


_RTX6000 = Profile(
    name="rtx6000bw-pcie-8x",
    gpu="NVIDIA RTX PRO 6000 Blackwell Server Edition",
    gpu_count=8,
    arch="sm_120",
    compute_capability=(12, 0),
    hbm_gib=94.97,
    hbm_bw=1.79e12,
    peak_flops=5.0e14,
    mfu_decode=0.34,
    mfu_prefill=0.34,
    interconnect="pcie5",
    driver="580.65.06",
    model_name="moonshotai/Kimi-K2-Instruct",
    layers=61,
    hidden=7168,
    weights_gib=76.0,
    weight_read_bytes=2.1e9,
    flops_per_token=8.0e9,
    kv_bytes_per_token=70272.0,
    attn_seq_layer_s=4.1e-6,
    activations_gib=1.8,
    graph_base_gib=0.2,
    graph_per_bs_gib=0.0065,
    runtime_reserve_gib=3.0,
    allreduce_graph_s=59e-6,
    allreduce_bw=11.2e9,
    p2p_contention=0.45,
    custom_ar_base_s=41.9e-6,
    nvlink=False,
    nccl_eager_factor=1.0,
    host_base_s=1.12e-3,
    host_per_seq_s=0.11e-3,
    host_kv_pressure_s=0.89e-3,
    kv_reference_tokens=72000,
)

_H200 = Profile(
    name="h200-nvlink-8x",
    gpu="NVIDIA H200",
    gpu_count=8,
    arch="sm_90",
    compute_capability=(9, 0),
    hbm_gib=139.8,
    hbm_bw=4.8e12,
    peak_flops=9.9e14,
    mfu_decode=0.15,
    mfu_prefill=0.5,
    interconnect="nvlink4",
    driver="580.65.06",
    model_name="moonshotai/Kimi-K2-Instruct",
    layers=61,
    hidden=7168,
    weights_gib=76.0,
    weight_read_bytes=2.1e9,
    flops_per_token=8.0e9,
    kv_bytes_per_token=70272.0,
    attn_seq_layer_s=4.0e-6,
    activations_gib=1.8,
    graph_base_gib=0.2,
    graph_per_bs_gib=0.0065,
    runtime_reserve_gib=3.0,
    allreduce_graph_s=6e-6,
    allreduce_bw=150e9,
    p2p_contention=0.02,
    custom_ar_base_s=5e-6,
    nvlink=True,
    nccl_eager_factor=0.15,
    host_base_s=1.0e-3,
    host_per_seq_s=0.05e-3,
    host_kv_pressure_s=0.9e-3,
    kv_reference_tokens=72000,
)

PROFILES: dict[str, Profile] = {p.name: p for p in (_RTX6000, _H200)}

CUDA_STACKS: dict[str, CudaStack] = {
    "12.8": CudaStack(
        cuda="12.8",
        eager_launch_s=166e-6,
        graph_ar_scale=1.0,
        flashinfer_jit_archs=frozenset({"sm_80", "sm_89", "sm_90", "sm_100"}),
        symm_mem_majors=frozenset({9, 10}),
        nccl_tree_with_graphs=False,
        versions={
            "torch": "2.8.0+cu128",
            "nccl": "2.26.2",
            "flashinfer": "0.2.9rc2",
            "triton": "3.4.0",
            "sglang": "0.5.0rc2",
        },
    ),
    "13.0": CudaStack(
        cuda="13.0",
        eager_launch_s=40.6e-6,
        graph_ar_scale=0.97,
        flashinfer_jit_archs=frozenset({"sm_80", "sm_89", "sm_90", "sm_100", "sm_120"}),
        symm_mem_majors=frozenset({9, 10, 12}),
        nccl_tree_with_graphs=True,
        versions={
            "torch": "2.9.0+cu130",
            "nccl": "2.28.3",
            "flashinfer": "0.4.1",
            "triton": "3.5.0",
            "sglang": "0.5.4",
        },
    ),
}


def get_profile(name: str) -> Profile:
    try:
        return PROFILES[name]
    except KeyError:
        raise UserError(f"--profile: unknown profile {name!r} (fix: one of {', '.join(PROFILES)})") from None


def get_stack(cuda: str) -> CudaStack:
    try:
        return CUDA_STACKS[cuda]
    except KeyError:
        raise UserError(f"--cuda: unknown CUDA version {cuda!r} (fix: one of {', '.join(CUDA_STACKS)})") from None
