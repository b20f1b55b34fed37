"""The simulated node's process: startup sequence, failure injection, lifetime.

`SimNode` owns the engine and the state the HTTP routes (`tools.simnode.routes`) read.
Startup plays SGLang's log sequence in node time (weight load, KV pool, CUDA graph
capture); a configuration that fails dies at the phase where a real server dies,
before `/health` ever answers 200.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from tools.simnode import kernels
from tools.simnode.batchcore import BatchCore
from tools.simnode.config import EngineConfig
from tools.simnode.engine import SimEngine
from tools.simnode.failures import SIGQUIT_LINE, FailurePlan, plan_failure
from tools.simnode.faults import FaultInjector
from tools.simnode.fingerprint import build_fingerprint
from tools.simnode.launchnoise import DEFAULT_LAUNCH_OFFSET_PCT, launch_step_factor
from tools.simnode.nodelog import NodeLog
from tools.simnode.perfmodel import accept_length, memory_plan, step_model
from tools.simnode.profiles import get_profile, get_stack
from tools.simnode.textgen import DIVERSE_PREDICTABILITY, FIXED_PREDICTABILITY


@dataclass(frozen=True)
class NodeOptions:
    host: str = "127.0.0.1"
    port: int = 30000
    profile: str = "rtx6000bw-pcie-8x"
    cuda: str = "12.8"
    seed: int | None = None
    time_scale: float = 1.0
    noise_pct: float = 1.5
    launch_offset_pct: float = DEFAULT_LAUNCH_OFFSET_PCT
    launch_seed: int | None = None
    model: str | None = None
    max_events_per_s: float = 6000.0


class SimNode:
    def __init__(self, opts: NodeOptions, cfg: EngineConfig, log: NodeLog | None = None) -> None:
        self.opts = opts
        self.cfg = cfg
        self.log = log or NodeLog(tp_size=cfg.tp_size)
        self.profile = get_profile(opts.profile)
        self.stack = get_stack(opts.cuda)
        self.mem = memory_plan(cfg, self.profile)
        self.failure: FailurePlan | None = plan_failure(cfg, self.profile, self.stack, self.mem)
        self.model = cfg.served_model_name or opts.model or cfg.model_path or self.profile.model_name
        self.seed = opts.seed if opts.seed is not None else random.SystemRandom().randrange(2**31)
        self.steps_model = step_model(cfg, self.profile, self.stack)
        self.core = BatchCore(
            self.steps_model,
            kv_capacity_tokens=self.mem.kv_capacity_tokens,
            max_running=self.mem.max_running_requests,
            chunked_prefill_size=cfg.chunked_prefill_size,
        )
        # the launch's own draw: a fixed --seed repeats the per-step noise, never the offset
        # (every launch of a real server lands somewhere else); --launch-seed pins it for tests
        launch_rng = random.Random(opts.launch_seed) if opts.launch_seed is not None else random.SystemRandom()
        self.step_time_factor = launch_step_factor(opts.launch_offset_pct, launch_rng)
        self.engine = SimEngine(
            self.core,
            time_scale=opts.time_scale,
            noise_pct=opts.noise_pct,
            rng=random.Random(self.seed),
            log=self.log,
            stream_interval=cfg.stream_interval,
            max_events_per_s=opts.max_events_per_s,
            step_time_factor=self.step_time_factor,
        )
        self.corrupts_greedy = cfg.kv_cache_dtype == "fp8_e4m3" and cfg.attention_backend == "triton"
        self.ready = False
        self.exit_code: asyncio.Future[int] | None = None
        self.prefix_cache: OrderedDict[str, int] = OrderedDict()  # prompt hash -> tokens
        self.prefix_cache_tokens = 0
        self.next_rid = 0
        self.last_prompt_key = ""  # a fixed workload repeats the previous request's prompt
        self.spec_tokens = 0.0
        self.spec_requests = 0
        self._crash_scheduled = False
        self.context_len = cfg.context_length or self.profile.context_length
        self.faults = FaultInjector.from_env()  # SIMNODE_FAULT: injected crash/hang/500/outage for tests
        self.unreachable = False

    async def sleep_node(self, node_s: float) -> None:
        await asyncio.sleep(node_s / self.opts.time_scale)

    def fingerprint(self) -> dict[str, Any]:
        return build_fingerprint(self.profile, self.stack).model_dump()

    def effective_flags(self) -> dict[str, Any]:
        flags = self.cfg.flags_dict()
        flags["cuda_graph_max_bs"] = self.cfg.graph_max_bs(self.profile.default_cuda_graph_max_bs)
        flags["max_running_requests"] = self.mem.max_running_requests
        flags["context_length"] = self.context_len
        if self.cfg.speculative:
            flags.update(
                speculative_num_steps=self.cfg.spec_steps,
                speculative_eagle_topk=self.cfg.spec_topk,
                speculative_num_draft_tokens=self.cfg.spec_draft_tokens,
            )
        return flags

    def server_info(self) -> dict[str, Any]:
        spec = None
        if self.cfg.speculative:
            spec = (
                self.spec_tokens / self.spec_requests
                if self.spec_requests
                else accept_length(DIVERSE_PREDICTABILITY, self.cfg)
            )
        coll = self.steps_model.coll
        return {
            "engine": "sglang-sim",
            "version": self.stack.versions.get("sglang", ""),
            "model": self.model,
            "profile": self.profile.name,
            "cuda": self.stack.cuda,
            "time_scale": self.opts.time_scale,
            "noise_pct": self.opts.noise_pct,
            "seed": self.seed,
            "launch_offset_pct": self.opts.launch_offset_pct,
            "launch_speed": round(1.0 / self.step_time_factor, 5),
            "status": "ready" if self.ready else "loading",
            "flags": self.effective_flags(),
            "env": dict(self.cfg.env),
            "spec_accept_length": spec,
            "spec_accept_tokens_total": self.spec_tokens,
            "spec_requests_total": self.spec_requests,
            "spec_accept_length_expected": (
                {
                    "fixed": accept_length(FIXED_PREDICTABILITY, self.cfg),
                    "diverse": accept_length(DIVERSE_PREDICTABILITY, self.cfg),
                }
                if self.cfg.speculative
                else None
            ),
            "kv_capacity_tokens": self.mem.kv_capacity_tokens,
            "max_total_num_tokens": self.mem.kv_capacity_tokens,
            "max_running_requests": self.mem.max_running_requests,
            "memory_gib": {
                "weights": round(self.mem.weights_gib, 3),
                "cuda_graph": round(self.mem.graph_gib, 3),
                "activations": round(self.mem.activations_gib, 3),
                "kv_cache": round(self.mem.kv_gib, 3),
            },
            "allreduce": {
                "backend": coll.backend,
                "per_forward": coll.per_forward,
                "graph_latency_us": round(coll.graph_latency_s * 1e6, 2),
                "eager_latency_us": round(coll.eager_latency_s * 1e6, 2),
                "bandwidth_gbps": round(coll.bandwidth / 1e9, 2),
                "fused_norm": coll.fused_norm,
                "symm_mem": coll.symm_mem,
            },
            "fingerprint": self.fingerprint(),
        }

    def _fail(self, lines: list[str], code: int) -> None:
        for ln in lines:
            self.log.line(ln, rank=0)
        self.log.line(SIGQUIT_LINE)
        assert self.exit_code is not None
        if not self.exit_code.done():
            self.exit_code.set_result(code)

    async def startup(self) -> None:
        """SGLang's startup log sequence, in node time; stops where a failure strikes."""
        cfg, p, mem, fail, log = self.cfg, self.profile, self.mem, self.failure, self.log
        log.line(
            f"server_args=ServerArgs(model_path='{cfg.model_path or self.model}', tp_size={cfg.tp_size}, "
            f"mem_fraction_static={cfg.mem_fraction_static}, cuda_graph_max_bs="
            f"{cfg.graph_max_bs(p.default_cuda_graph_max_bs)}, speculative_algorithm={cfg.speculative_algorithm!r}, "
            f"kv_cache_dtype='{cfg.kv_cache_dtype}', attention_backend={cfg.attention_backend!r}, "
            f"random_seed={cfg.random_seed or self.seed})"
        )
        if kernels.PATCH_BANNER:
            log.line(f"kernels: {kernels.PATCH_BANNER} (from {os.path.dirname(kernels.__file__)})")
        await self.sleep_node(2.0)
        log.all_ranks("Init torch distributed begin.")
        await self.sleep_node(2.0)
        if fail and fail.phase == "dist":
            return self._fail(fail.lines, fail.exit_code)
        log.all_ranks("Init torch distributed ends. mem usage=0.41 GB")
        log.line(f"Load weight begin. avail mem={p.hbm_gib - 0.41:.2f} GB", rank=0)
        await self.sleep_node(6.0)
        if fail and fail.phase == "jit":
            return self._fail(fail.lines, fail.exit_code)
        await self.sleep_node(24.0)
        if fail and fail.phase == "load":
            return self._fail(fail.lines, fail.exit_code)
        await self.sleep_node(10.0)
        avail = p.hbm_gib - 0.41 - mem.weights_gib
        log.line(
            f"Load weight end. type=DeepseekV3ForCausalLM, dtype=torch.bfloat16, avail mem={avail:.2f} GB, "
            f"mem usage={mem.weights_gib:.2f} GB.",
            rank=0,
        )
        avail -= max(mem.kv_gib, 0)
        log.line(
            f"KV Cache is allocated. #tokens: {mem.kv_capacity_tokens}, KV size: {max(mem.kv_gib, 0):.2f} GB", rank=0
        )
        log.line(f"Memory pool end. avail mem={avail:.2f} GB", rank=0)
        if fail and fail.phase == "serve":
            for ln in fail.warn_lines:
                log.line(ln, rank=0)
        if not cfg.disable_cuda_graph:
            bs = cfg.graph_max_bs(p.default_cuda_graph_max_bs)
            log.line(f"Capture cuda graph begin. This can take up to several minutes. avail mem={avail:.2f} GB", rank=0)
            await self.sleep_node(3.0)
            if fail and fail.phase == "capture":
                return self._fail(fail.lines, fail.exit_code)
            took = 2.0 + 0.03 * bs * (2.0 if cfg.speculative else 1.0)
            await self.sleep_node(took)
            avail -= mem.graph_gib
            log.line(
                f"Capture cuda graph end. Time elapsed: {took + 3.0:.2f} s. mem usage={mem.graph_gib:.2f} GB. "
                f"avail mem={avail:.2f} GB.",
                rank=0,
            )
        log.line(
            f"max_total_num_tokens={mem.kv_capacity_tokens}, chunked_prefill_size={cfg.chunked_prefill_size}, "
            f"max_prefill_tokens={cfg.max_prefill_tokens}, max_running_requests={mem.max_running_requests}, "
            f"context_len={self.context_len}, available_gpu_mem={avail:.2f} GB",
            rank=0,
        )
        log.raw(f"INFO:     Started server process [{os.getpid()}]")
        log.raw("INFO:     Waiting for application startup.")
        log.raw("INFO:     Application startup complete.")
        log.raw(f"INFO:     Uvicorn running on http://{self.opts.host}:{self.opts.port} (Press CTRL+C to quit)")
        await self.sleep_node(1.0)
        log.line(
            "Prefill batch. #new-seq: 1, #new-token: 7, #cached-token: 0, token usage: 0.00, "
            "#running-req: 0, #queue-req: 0",
            rank=0,
        )
        self.ready = True
        log.line("The server is fired up and ready to roll!")

    def on_request(self) -> None:
        """A serve-phase failure strikes shortly after load arrives."""
        if self.failure and self.failure.phase == "serve" and not self._crash_scheduled:
            self._crash_scheduled = True
            asyncio.get_running_loop().create_task(self._crash_later(self.failure))

    async def _crash_later(self, fail: FailurePlan) -> None:
        await self.sleep_node(fail.crash_after_s)
        for ln in fail.lines:
            self.log.line(ln, rank=0)
        self.log.line(SIGQUIT_LINE)
        os.kill(os.getpid(), signal.SIGKILL)  # like SGLang's kill_process_tree: in-flight streams break


async def serve(opts: NodeOptions, cfg: EngineConfig) -> int:
    """Run the node until it fails (returns the exit code) or is asked to stop (0)."""
    from tools.simnode.routes import build_app

    node = SimNode(opts, cfg)
    loop = asyncio.get_running_loop()
    exit_code = node.exit_code = loop.create_future()

    def stop() -> None:
        if not exit_code.done():
            exit_code.set_result(0)

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop)
    runner = web.AppRunner(build_app(node), access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, opts.host, opts.port, reuse_address=True)
    try:
        await site.start()
    except OSError as exc:
        node.log.line(
            f"ERROR: [Errno {exc.errno}] error while attempting to bind on address "
            f"('{opts.host}', {opts.port}): address already in use"
        )
        await runner.cleanup()
        return 1
    tasks = [loop.create_task(node.startup()), loop.create_task(node.engine.run())]
    try:
        return await node.exit_code
    finally:
        for t in tasks:
            t.cancel()
        await runner.cleanup()
