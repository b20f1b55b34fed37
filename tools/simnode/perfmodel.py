"""Pure performance model of a TP-sharded LLM server: memory plan, collective costs,
step times, speculative acceptance, and the noise-free expected throughput.

Step time for a batch of B sequences with q tokens each (B*q tokens in the forward):
    weight read + attention per sequence (fixed + KV bytes) + compute for B*q tokens
    + n_allreduce x (latency + bytes / bandwidth) + host overhead.
Collective latency depends on whether the forward replays a CUDA graph (decode up to
cuda-graph-max-bs) or runs eagerly (prefill, speculative verify, graphs disabled):
eager collectives pay the CUDA stack's launch + sync cost on top.  Everything is keyed
on physical parameters, flags, env vars and the CUDA stack, never on hypothesis names.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from tools.simnode.batchcore import BatchCore, Seq
from tools.simnode.collectives import CollectiveCosts, collective_costs
from tools.simnode.config import EngineConfig
from tools.simnode.profiles import CudaStack, Profile, get_profile, get_stack
from tools.simnode.textgen import DIVERSE_PREDICTABILITY, FIXED_PREDICTABILITY, diverse_predictability

GIB = float(1 << 30)
DRAFT_COLLECTIVES_PER_STEP = 3  # one decoder layer (attention + MLP) + vocab-parallel head


@dataclass(frozen=True)
class MemoryPlan:
    """Per-GPU memory split, as SGLang logs it at startup."""

    weights_gib: float
    graph_gib: float
    activations_gib: float
    kv_gib: float
    kv_bytes_per_token: float
    kv_capacity_tokens: int
    max_running_requests: int
    oom_at: str | None  # None | "load" | "capture": where the node runs out of memory


def kv_bytes_per_token(cfg: EngineConfig, profile: Profile) -> float:
    per_token = profile.kv_bytes_per_token
    if cfg.kv_cache_dtype.startswith("fp8"):
        per_token /= 2
    if cfg.speculative:  # the draft layer keeps its own KV
        per_token *= 1 + 1 / profile.layers
    return per_token


def memory_plan(cfg: EngineConfig, profile: Profile) -> MemoryPlan:
    tp = max(1, cfg.tp_size)
    weights = profile.weights_gib * profile.gpu_count / tp
    if cfg.speculative:
        weights += profile.draft_weights_gib
    graph = 0.0
    if not cfg.disable_cuda_graph:
        graph = profile.graph_base_gib + profile.graph_per_bs_gib * cfg.graph_max_bs(profile.default_cuda_graph_max_bs)
        if cfg.speculative:
            graph *= 1.3  # draft and draft-extend graphs
    act = profile.activations_gib * max(0.25, cfg.chunked_prefill_size / 8192) ** 0.5
    static = cfg.mem_fraction_static * profile.hbm_gib
    kv = static - weights - graph - act
    per_token = kv_bytes_per_token(cfg, profile)
    tokens = max(0, int(kv * GIB / per_token))
    if cfg.max_total_tokens:
        tokens = min(tokens, cfg.max_total_tokens)
    oom: str | None = None
    if weights > static:
        oom = "load"
    elif kv < 0.5 or (1 - cfg.mem_fraction_static) * profile.hbm_gib < profile.runtime_reserve_gib:
        oom = "capture"
    max_running = cfg.max_running_requests or max(1, min(4096, tokens // 2))
    return MemoryPlan(weights, graph, act, kv, per_token, tokens, max_running, oom)


def accept_length(predictability: float, cfg: EngineConfig) -> float:
    """Mean tokens per speculative cycle: accepted drafts + the bonus token.

    A draft tree of width topk catches more continuations per depth; the number of
    draft tokens verified prunes how much of the tree is kept."""
    if not cfg.speculative:
        return 1.0
    steps, topk, draft = cfg.spec_steps, cfg.spec_topk, cfg.spec_draft_tokens
    fill = min(1.0, (draft - 1) / (steps * topk))
    width = 1.0 + 0.35 * (topk - 1) * fill
    q = 1.0 - (1.0 - min(max(predictability, 0.0), 0.98)) ** width
    depth = min(steps, draft - 1)
    return min(float(draft), 1.0 + sum(math.pow(q, k) for k in range(1, depth + 1)))


@dataclass(frozen=True)
class StepModel:
    """Step costs for one engine configuration on one profile and CUDA stack."""

    profile: Profile
    cfg: EngineConfig
    coll: CollectiveCosts
    kv_per_token: float
    graph_max_bs: int
    host_pressure_s: float

    def _attention_s(self, seqs: int, ctx_tokens: int) -> float:
        p = self.profile
        return seqs * p.layers * p.attn_seq_layer_s + ctx_tokens * self.kv_per_token / (p.hbm_bw * 0.15)

    def _collectives_s(self, count: int, tokens: int, graph: bool) -> float:
        lat = self.coll.graph_latency_s if graph else self.coll.eager_latency_s
        return count * (lat + tokens * self.profile.hidden * 2 / self.coll.bandwidth)

    def _host_s(self, seqs: int) -> float:
        p = self.profile
        return p.host_base_s + seqs * p.host_per_seq_s + self.host_pressure_s

    def forward_s(self, seqs: int, tokens: int, ctx_tokens: int, *, graph: bool, mfu: float) -> float:
        p = self.profile
        return (
            p.weight_read_bytes / p.hbm_bw
            + self._attention_s(seqs, ctx_tokens)
            + tokens * p.flops_per_token / (p.peak_flops * mfu)
            + self._collectives_s(self.coll.per_forward, tokens, graph)
            + self._host_s(seqs)
        )

    def uses_graph(self, batch: int) -> bool:
        return not self.cfg.disable_cuda_graph and batch <= self.graph_max_bs

    def prefill_s(self, new_tokens: int, seqs: int, ctx_tokens: int) -> float:
        t = self.forward_s(seqs, new_tokens, ctx_tokens, graph=False, mfu=self.profile.mfu_prefill)
        if self.cfg.speculative:
            t += self._draft_forward_s(seqs, new_tokens, graph=False)
        return t

    def decode_s(self, batch: int, ctx_tokens: int) -> float:
        if not self.cfg.speculative:
            return self.forward_s(batch, batch, ctx_tokens, graph=self.uses_graph(batch), mfu=self.profile.mfu_decode)
        return self.spec_cycle_s(batch, ctx_tokens)

    def _draft_forward_s(self, seqs: int, tokens: int, *, graph: bool) -> float:
        p = self.profile
        return (
            tokens * p.draft_flops_per_token / (p.peak_flops * p.mfu_decode)
            + seqs * p.attn_seq_layer_s * 2
            + self._collectives_s(DRAFT_COLLECTIVES_PER_STEP, tokens, graph)
        )

    def spec_cycle_s(self, batch: int, ctx_tokens: int) -> float:
        """Draft num-steps (tree of width topk, graph-captured), verify num-draft-tokens
        per sequence (tree verify runs eagerly), then draft-extend over accepted tokens."""
        cfg = self.cfg
        graph = self.uses_graph(batch)
        draft = self._draft_forward_s(batch, batch, graph=graph)
        draft += (cfg.spec_steps - 1) * self._draft_forward_s(batch, batch * cfg.spec_topk, graph=graph)
        verify_tokens = batch * cfg.spec_draft_tokens
        verify = self.forward_s(
            batch, verify_tokens, ctx_tokens + verify_tokens, graph=False, mfu=self.profile.mfu_decode
        )
        extend = self._draft_forward_s(batch, batch * 2, graph=graph)
        return draft + verify + extend

    def verify_allreduce_share(self, batch: int = 1, ctx_tokens: int = 768) -> float:
        """Share of a verify forward spent in all-reduce (what a profiler shows)."""
        tokens = batch * self.cfg.spec_draft_tokens
        verify = self.forward_s(batch, tokens, ctx_tokens, graph=False, mfu=self.profile.mfu_decode)
        return self._collectives_s(self.coll.per_forward, tokens, False) / verify


def step_model(cfg: EngineConfig, profile: Profile, stack: CudaStack) -> StepModel:
    plan = memory_plan(cfg, profile)
    pressure = profile.host_kv_pressure_s * profile.kv_reference_tokens / max(plan.kv_capacity_tokens, 1000)
    return StepModel(
        profile,
        cfg,
        collective_costs(cfg, profile, stack),
        plan.kv_bytes_per_token,
        cfg.graph_max_bs(profile.default_cuda_graph_max_bs),
        pressure,
    )


@dataclass(frozen=True)
class LevelOutcome:
    duration_s: float
    output_tokens: int
    requests: int

    @property
    def output_tps(self) -> float:
        return self.output_tokens / self.duration_s if self.duration_s > 0 else 0.0


def simulate_level(
    cfg: EngineConfig,
    profile: Profile,
    stack: CudaStack,
    *,
    concurrency: int,
    requests: int,
    prompt_kind: str,
    output_tokens: int,
    prompt_tokens: int,
) -> LevelOutcome:
    """Closed-loop clients (each sends its next request when the last one ends) against
    the scheduler core, noise-free; the fixed prompt hits the prefix cache (warmed up)."""
    plan = memory_plan(cfg, profile)
    model = step_model(cfg, profile, stack)
    core = BatchCore(
        model,
        kv_capacity_tokens=plan.kv_capacity_tokens,
        max_running=plan.max_running_requests,
        chunked_prefill_size=cfg.chunked_prefill_size,
    )
    fixed = prompt_kind == "fixed"
    cached = 0 if (not fixed or cfg.disable_radix_cache) else prompt_tokens

    def make(i: int) -> Seq:
        pred = FIXED_PREDICTABILITY if fixed else diverse_predictability(i)
        return Seq(i, prompt_tokens, output_tokens, accept_length(pred, cfg), cached_tokens=cached)

    now, sent, done = 0.0, 0, 0
    for _ in range(min(concurrency, requests)):
        core.submit(make(sent))
        sent += 1
    while done < requests:
        step = core.plan()
        if step is None:
            raise RuntimeError("scheduler stalled: a request does not fit the KV pool")
        now += step.duration_s
        for _seq, _n, finished in core.commit(step):
            if finished:
                done += 1
                if sent < requests:
                    core.submit(make(sent))
                    sent += 1
    return LevelOutcome(now, requests * output_tokens, requests)


def expected_output_tps(
    config: EngineConfig,
    profile: Profile | str = "rtx6000bw-pcie-8x",
    cuda: str = "12.8",
    concurrency: int = 1,
    prompt_kind: Literal["fixed", "diverse"] = "fixed",
    output_tokens: int = 256,
    prompt_tokens: int = 512,
    requests: int | None = None,
) -> float:
    """Noise-free output tokens/s (node time) of one load level: the ground truth."""
    prof = get_profile(profile) if isinstance(profile, str) else profile
    n = requests if requests is not None else max(2 * concurrency, 1)
    out = simulate_level(
        config,
        prof,
        get_stack(cuda),
        concurrency=concurrency,
        requests=n,
        prompt_kind=prompt_kind,
        output_tokens=output_tokens,
        prompt_tokens=prompt_tokens,
    )
    return out.output_tps


__all__ = [
    "DIVERSE_PREDICTABILITY",
    "LevelOutcome",
    "MemoryPlan",
    "StepModel",
    "accept_length",
    "expected_output_tps",
    "kv_bytes_per_token",
    "memory_plan",
    "simulate_level",
    "step_model",
]
