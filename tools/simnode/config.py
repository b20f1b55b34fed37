"""The engine configuration the simulated node runs with: SGLang-style flags + env vars.

Parsed by argparse exactly like a real server, so an unknown flag is a usage error
(exit 2) at launch, and a campaign's flag dicts can be turned into the same object
for the pure performance model (`EngineConfig.from_flags`).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

NCCL_ENV_KEYS = (
    "NCCL_ALGO",
    "NCCL_PROTO",
    "NCCL_MIN_NCHANNELS",
    "NCCL_MAX_NCHANNELS",
    "NCCL_P2P_LEVEL",
    "CUDA_VISIBLE_DEVICES",
)


@dataclass(frozen=True)
class EngineConfig:
    """Effective engine flags (SGLang names with dashes -> underscores) and env vars."""

    model_path: str = ""
    served_model_name: str | None = None
    tp_size: int = 8
    dp_size: int = 1
    ep_size: int = 1
    moe_a2a_backend: str = "none"
    cuda_graph_max_bs: int | None = None
    disable_cuda_graph: bool = False
    mem_fraction_static: float = 0.88
    max_running_requests: int | None = None
    max_total_tokens: int | None = None
    chunked_prefill_size: int = 8192
    max_prefill_tokens: int = 16384
    stream_interval: int = 1
    kv_cache_dtype: str = "auto"
    attention_backend: str | None = None
    context_length: int | None = None
    speculative_algorithm: str | None = None
    speculative_draft_model_path: str | None = None
    speculative_num_steps: int | None = None
    speculative_eagle_topk: int | None = None
    speculative_num_draft_tokens: int | None = None
    enable_flashinfer_allreduce_fusion: bool = False
    disable_custom_all_reduce: bool = False
    enable_custom_all_reduce: bool = False
    enable_torch_symm_mem: bool = False
    enable_torch_compile: bool = False
    disable_radix_cache: bool = False
    enable_mixed_chunk: bool = False
    enable_p2p_check: bool = False
    trust_remote_code: bool = False
    schedule_policy: str = "fcfs"
    page_size: int = 1
    dtype: str = "auto"
    quantization: str | None = None
    random_seed: int | None = None
    log_level: str = "info"
    env: Mapping[str, str] = field(default_factory=dict)

    @property
    def speculative(self) -> bool:
        return (self.speculative_algorithm or "").upper() in {"EAGLE", "EAGLE3", "NEXTN"}

    @property
    def spec_steps(self) -> int:
        return self.speculative_num_steps or 3

    @property
    def spec_topk(self) -> int:
        return self.speculative_eagle_topk or 1

    @property
    def spec_draft_tokens(self) -> int:
        return self.speculative_num_draft_tokens or (self.spec_steps + 1)

    def graph_max_bs(self, default: int) -> int:
        return self.cuda_graph_max_bs if self.cuda_graph_max_bs is not None else default

    def flags_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if k != "env"}

    @classmethod
    def from_flags(cls, flags: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None) -> EngineConfig:
        """Build from a campaign-style dict ({"cuda-graph-max-bs": 128, "tp": 8, ...})."""
        argv: list[str] = []
        for key, value in (flags or {}).items():
            opt = "--" + key.lstrip("-").replace("_", "-")
            if value is True:
                argv.append(opt)
            elif value is False or value is None:
                continue
            else:
                argv += [opt, str(value)]
        ns = build_engine_parser().parse_args(argv)
        return from_namespace(ns, env or {})


def add_engine_args(p: argparse.ArgumentParser) -> None:
    """The SGLang server flags the simulated node understands (real names and defaults)."""
    p.add_argument("--model-path", dest="model_path", default="")
    p.add_argument("--served-model-name", default=None)
    p.add_argument("--tokenizer-path", default=None)
    p.add_argument("--tp-size", "--tp", dest="tp_size", type=int, default=8)
    p.add_argument("--dp-size", "--dp", dest="dp_size", type=int, default=1)
    p.add_argument("--ep-size", "--ep", dest="ep_size", type=int, default=1)
    p.add_argument("--moe-a2a-backend", default="none", choices=["none", "deepep", "mooncake", "flashinfer"])
    p.add_argument("--cuda-graph-max-bs", type=int, default=None)
    p.add_argument("--disable-cuda-graph", action="store_true")
    p.add_argument("--mem-fraction-static", type=float, default=0.88)
    p.add_argument("--max-running-requests", type=int, default=None)
    p.add_argument("--max-total-tokens", type=int, default=None)
    p.add_argument("--chunked-prefill-size", type=int, default=8192)
    p.add_argument("--max-prefill-tokens", type=int, default=16384)
    p.add_argument("--stream-interval", type=int, default=1)
    p.add_argument("--kv-cache-dtype", default="auto", choices=["auto", "fp8_e5m2", "fp8_e4m3", "bf16"])
    p.add_argument(
        "--attention-backend",
        default=None,
        choices=["flashinfer", "triton", "fa3", "fa4", "flashmla", "cutlass_mla", "trtllm_mla", "torch_native"],
    )
    p.add_argument("--context-length", type=int, default=None)
    p.add_argument("--speculative-algorithm", default=None, choices=["EAGLE", "EAGLE3", "NEXTN", "STANDALONE"])
    p.add_argument("--speculative-draft-model-path", default=None)
    p.add_argument("--speculative-num-steps", type=int, default=None)
    p.add_argument("--speculative-eagle-topk", type=int, default=None)
    p.add_argument("--speculative-num-draft-tokens", type=int, default=None)
    p.add_argument("--enable-flashinfer-allreduce-fusion", action="store_true")
    p.add_argument("--disable-custom-all-reduce", action="store_true")
    p.add_argument(
        "--enable-custom-all-reduce",
        action="store_true",
        help="force the custom all-reduce kernel even without full NVLink",
    )
    p.add_argument("--enable-torch-symm-mem", action="store_true")
    p.add_argument("--enable-torch-compile", action="store_true")
    p.add_argument("--disable-radix-cache", action="store_true")
    p.add_argument("--enable-mixed-chunk", action="store_true")
    p.add_argument("--enable-p2p-check", action="store_true")
    p.add_argument("--trust-remote-code", action="store_true")
    p.add_argument("--schedule-policy", default="fcfs", choices=["fcfs", "lpm", "random", "dfs-weight", "lof"])
    p.add_argument("--page-size", type=int, default=1)
    p.add_argument("--dtype", default="auto", choices=["auto", "half", "float16", "bfloat16", "float", "float32"])
    p.add_argument("--quantization", default=None)
    p.add_argument("--random-seed", type=int, default=None)
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error", "critical"])


def build_engine_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="sglang.launch_server", add_help=False)
    add_engine_args(p)
    return p


_FIELD_NAMES = {f.name for f in fields(EngineConfig)}


def from_namespace(ns: argparse.Namespace, environ: Mapping[str, str]) -> EngineConfig:
    values = {k: v for k, v in vars(ns).items() if k in _FIELD_NAMES}
    env = {k: environ[k] for k in NCCL_ENV_KEYS if k in environ and environ[k] != ""}
    return EngineConfig(**values, env=env)
