"""Which configurations fail on the node, where, and with which log lines.

Rules on flags, env vars, the CUDA stack and the GPU architecture (never on hypothesis
names), checked in the order a real server would hit them: device discovery,
distributed init, kernel JIT, weight load, CUDA graph capture, then serving.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from tools.simnode.collectives import fusion_supported, symm_mem_supported
from tools.simnode.config import EngineConfig
from tools.simnode.perfmodel import MemoryPlan
from tools.simnode.profiles import CudaStack, Profile

Phase = Literal["dist", "jit", "load", "capture", "serve"]
_SITE = "/usr/local/lib/python3.12/dist-packages"
SIGQUIT_LINE = "Received sigquit from a child process. It usually means the child failed."


@dataclass(frozen=True)
class FailurePlan:
    phase: Phase  # where in startup (or serving) the node dies
    lines: list[str]  # log lines of rank TP0, in order
    exit_code: int = 1  # serve-phase crashes are SIGKILLed (-9), like SGLang's kill_process_tree
    warn_lines: list[str] = field(default_factory=list)  # logged at startup, not fatal
    crash_after_s: float = 0.0  # serve phase: node seconds after the first request arrives


def _traceback(frames: list[tuple[str, int, str, str]], error: str) -> list[str]:
    lines = ["Scheduler hit an exception: Traceback (most recent call last):"]
    for path, lineno, func, code in frames:
        lines += [f'  File "{_SITE}/sglang/srt/{path}", line {lineno}, in {func}', f"    {code}"]
    return lines + error.split("\n")


def _visible_gpus(cfg: EngineConfig, profile: Profile) -> int:
    vis = cfg.env.get("CUDA_VISIBLE_DEVICES")
    if vis is None:
        return profile.gpu_count
    return len([d for d in vis.split(",") if d.strip() != ""])


def plan_failure(cfg: EngineConfig, profile: Profile, stack: CudaStack, mem: MemoryPlan) -> FailurePlan | None:
    gpus = _visible_gpus(cfg, profile)
    need = max(1, cfg.tp_size) * max(1, cfg.dp_size)
    if need > gpus:
        return FailurePlan(
            "dist",
            _traceback(
                [
                    ("managers/scheduler.py", 2890, "run_scheduler_process", "scheduler = Scheduler(server_args, ...)"),
                    (
                        "model_executor/model_runner.py",
                        612,
                        "init_torch_distributed",
                        "torch.cuda.set_device(self.gpu_id)",
                    ),
                ],
                f"RuntimeError: CUDA error: invalid device ordinal (tp_size*dp_size={need} but only {gpus} "
                f"GPUs are visible, CUDA_VISIBLE_DEVICES={cfg.env.get('CUDA_VISIBLE_DEVICES', '')})",
            ),
        )
    if cfg.enable_torch_symm_mem and not symm_mem_supported(profile, stack):
        major, minor = profile.compute_capability
        return FailurePlan(
            "dist",
            [
                f"SymmMemCommunicator: device capability {major}.{minor} ({profile.arch}) is not in torch symmetric "
                f"memory's arch table SYMM_MEM_ALL_REDUCE_MAX_SIZES (supported: "
                f"{', '.join(f'{m}.0' for m in sorted(stack.symm_mem_majors))})",
                *_traceback(
                    [
                        (
                            "distributed/parallel_state.py",
                            301,
                            "__init__",
                            "self.symm_mem_comm = SymmMemCommunicator(...)",
                        ),
                        (
                            "distributed/device_communicators/symm_mem.py",
                            64,
                            "__init__",
                            "max_size = SYMM_MEM_ALL_REDUCE_MAX_SIZES[self.device_capability][self.world_size]",
                        ),
                    ],
                    f"KeyError: {major}",
                ),
            ],
        )
    if cfg.enable_flashinfer_allreduce_fusion and not fusion_supported(profile, stack):
        return FailurePlan(
            "jit",
            [
                f"FlashInfer JIT: building module trtllm_comm (allreduce fusion) for {profile.arch} with CUDA {stack.cuda}",
                f"nvcc fatal   : Unsupported gpu architecture 'compute_{profile.arch[3:]}a'",
                "ninja: build stopped: subcommand failed.",
                *_traceback(
                    [
                        (
                            "layers/flashinfer_comm_fusion.py",
                            88,
                            "ensure_workspace_initialized",
                            "comm.trtllm_create_ipc_workspace_for_all_reduce_fusion(...)",
                        ),
                        (
                            "../flashinfer/jit/core.py",
                            129,
                            "build_and_load",
                            "run_ninja(jit_env.FLASHINFER_JIT_DIR, ...)",
                        ),
                    ],
                    f"RuntimeError: FlashInfer JIT compilation failed: unsupported arch {profile.arch} "
                    f"(jit targets: {', '.join(sorted(stack.flashinfer_jit_archs))})",
                ),
            ],
        )
    if cfg.moe_a2a_backend == "deepep":
        return FailurePlan(
            "dist",
            _traceback(
                [("layers/moe/token_dispatcher/deepep.py", 20, "<module>", "import deep_ep")],
                "ModuleNotFoundError: No module named 'deep_ep'",
            ),
        )
    if mem.oom_at == "load":
        return FailurePlan(
            "load",
            _traceback(
                [("model_loader/loader.py", 411, "load_model", "model = _initialize_model(model_config, ...)")],
                f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.75 GiB. GPU 0 has a total capacity of "
                f"{profile.hbm_gib:.2f} GiB of which 1.02 GiB is free. Of the allocated memory {mem.weights_gib:.2f} GiB "
                f"is allocated by PyTorch (tp_size={cfg.tp_size})",
            ),
        )
    if mem.oom_at == "capture":
        free = max(
            0.0, (1 - cfg.mem_fraction_static) * profile.hbm_gib - profile.runtime_reserve_gib + min(mem.kv_gib, 0)
        )
        return FailurePlan(
            "capture",
            _traceback(
                [("model_executor/cuda_graph_runner.py", 402, "__init__", "self.capture()")],
                f"Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate {mem.graph_gib:.2f} GiB. "
                f"GPU 0 has a total capacity of {profile.hbm_gib:.2f} GiB of which {max(free, 0.05) * 1024:.2f} MiB is free.\n"
                "Possible solutions:\n1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)\n"
                "2. set --cuda-graph-max-bs to a smaller value (e.g., 16)\n"
                "3. disable torch compile by not using --enable-torch-compile\n"
                "4. disable CUDA graph by --disable-cuda-graph. (Not recommended. Huge performance loss)",
            ),
        )
    algo = (cfg.env.get("NCCL_ALGO") or "").lower()
    if algo == "tree" and not stack.nccl_tree_with_graphs and not cfg.disable_cuda_graph and cfg.tp_size > 1:
        nccl = stack.versions.get("nccl", "")
        return FailurePlan(
            "capture",
            [
                f"NCCL WARN Tree algorithm requested (NCCL_ALGO=Tree) but it is not supported inside CUDA graph capture "
                f"on this topology ({profile.interconnect}, NCCL {nccl})",
                *_traceback(
                    [
                        ("model_executor/cuda_graph_runner.py", 402, "__init__", "self.capture()"),
                        (
                            "distributed/device_communicators/pynccl.py",
                            140,
                            "all_reduce",
                            "self.nccl.ncclAllReduce(...)",
                        ),
                    ],
                    f"Exception: Capture cuda graph failed: NCCL error: invalid usage (run with NCCL_DEBUG=WARN for "
                    f"details), NCCL version {nccl}\nncclInvalidUsage: NCCL_ALGO=Tree is incompatible with CUDA "
                    f"graphs (stream capture) on this stack",
                ),
            ],
        )
    if cfg.ep_size > 1 and cfg.moe_a2a_backend == "flashinfer":
        warn = _traceback(
            [
                (
                    "eplb/expert_location.py",
                    231,
                    "get_global_expert_location_metadata",
                    "assert _global_expert_location_metadata is not None",
                )
            ],
            f"AssertionError: expert location metadata is not initialized "
            f"(ep_size={cfg.ep_size}, moe_a2a_backend=flashinfer)",
        )
        oom = _traceback(
            [
                (
                    "layers/moe/token_dispatcher/flashinfer.py",
                    174,
                    "dispatch",
                    "workspace = torch.empty(self.max_tokens * self.hidden * self.ep_size, ...)",
                )
            ],
            f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 6.84 GiB. GPU 0 has a total "
            f"capacity of {profile.hbm_gib:.2f} GiB of which 812.00 MiB is free.",
        )
        return FailurePlan("serve", oom, exit_code=-9, warn_lines=warn, crash_after_s=2.0)
    return None
