"""Classify why a server failed from its exit status and log: a rule table.

Decisions (documented because they shape the journal's dead ends):
- A rule is a root cause or a *consequence* (`consequence=True`: a watchdog or RPC
  timeout, a dead worker or scheduler, an engine that died, a torch.compile frame that
  wraps another error).  Root causes decide whenever one matched, wherever it sits in
  the log; consequences decide only a log with no root cause, and then the first one
  seen wins: a hang whose watchdog then kills the scheduler is `hang`, not `engine_dead`.
- Root causes sit in priority bands; the strongest band with a match decides, and
  inside a band the line seen *first*.  Specific, unambiguous signatures come first:
  what the node lacks (`environment`: a missing shared library, package or too-old
  version, driver, a gated model repo) and argparse errors, a taken port; a JIT build
  failure outranks "unsupported arch" because FlashInfer's JIT failing on sm_120 prints
  both, and the fix is in the JIT, not the arch; CUDA-graph capture errors outrank NCCL
  errors because NCCL Tree under graph capture prints both.
- `assertion` and `oom` share a band: the seeds' expert-parallel case ("assertion
  error, then OOM") is classified `assertion`, with the OOM line kept in the evidence
  and named in the summary; an OOM that triggers a later assertion is classified `oom`.
- vLLM's "Engine core initialization failed" with KV-cache wording is `oom` (too little
  memory for the cache).  `EngineDeadError` is `engine_dead` unless it follows
  "stopping engine client" (a requested shutdown).
- A Triton `OutOfResources: shared memory` is `unsupported_arch`: the kernel's tiles
  were tuned for a GPU with more shared memory (T4, consumer Ada/Blackwell); an illegal
  memory access (CUDA) or a "Memory access fault by GPU node" (ROCm) is `kernel_fault`
  and outranks the NCCL watchdog that reports it; a ptxas that rejects the target is
  `jit_error` (the toolchain is older than the GPU).
- Warnings that do not stop the server are not signatures ("... unsupported compute
  capability 7.5; falling back", SGLang's "Decode out of memory happened" retraction).
- Measured on real logs: `bench/triage_corpus.py` (training corpus and holdout).
- Nothing matched: `exited` with the last lines as evidence.
Engine profiles add rules through `extra_rules` (same bands).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from campaign.domain.models import Failure, FailureClass

Phase = Literal["patch", "start", "load", "correctness"]

CONTEXT_LINES = 2
#: the summary of a log no rule matched (`exited`, last lines as evidence).
NO_SIGNATURE = "no known failure signature in the log"
MAX_EVIDENCE_LINES = 12
FALLBACK_TAIL = 15


@dataclass(frozen=True)
class TriageRule:
    """A log signature: `pattern` on one line means `failure_class` (lower band wins).
    `unless_after`: the match does not count when this pattern appeared earlier."""

    failure_class: FailureClass
    pattern: re.Pattern[str]
    band: int
    label: str
    unless_after: re.Pattern[str] | None = None
    consequence: bool = False  # decides only when no root-cause rule matched


def rule(
    cls: FailureClass,
    pattern: str,
    band: int,
    label: str,
    unless_after: str | None = None,
    *,
    consequence: bool = False,
) -> TriageRule:
    return TriageRule(
        cls,
        re.compile(pattern, re.IGNORECASE),
        band,
        label,
        re.compile(unless_after, re.IGNORECASE) if unless_after else None,
        consequence,
    )


FC = FailureClass
RULES: tuple[TriageRule, ...] = (
    # what the node lacks: the same launch fails for the baseline too (from the loaders'
    # own messages: glibc's dlopen, Python's import system, huggingface_hub, torch's CUDA init,
    # SGLang's `assert_pkg_version`)
    # (not a WARNING line: vLLM logs "WARNING ... Failed to import from vllm._C with ImportError(...)"
    # and goes on; whatever then stops it decides)
    rule(
        FC.environment,
        r"^(?!.*\bWARNING\b)(?:.*?)(?:lib[\w.+-]*\.so[\w.]*: cannot open shared object file|"
        r"ImportError: .*undefined symbol|\.so: undefined symbol|"
        r"ModuleNotFoundError: No module named|PackageNotFoundError|"
        r"with minimum required version [\w.]+ is not installed|"
        r"ImportError: cannot import name .* from '?(flashinfer|sgl_kernel|triton|torch|transformers|flash_attn|xformers)|"
        r"NVIDIA driver on your system is too old|CUDA driver version is insufficient|cudaErrorInsufficientDriver|"
        r"Cannot access gated repo|GatedRepoError|You are trying to access a gated repo|401 Client Error)",
        5,
        "the node's installation lacks what the engine needs",
    ),
    rule(
        FC.bad_flag,
        r"error: unrecognized arguments|error: argument [-\w/]+|invalid choice:|"
        r"error: the following arguments are required",
        10,
        "argument parser rejected the command line",
    ),
    rule(
        FC.port_in_use,
        r"address already in use|\baddress in use\b|EADDRINUSE|"
        r"port \d+ is (already )?(in use|used)",
        10,
        "port already taken",
    ),
    # (not an argparse usage line: vLLM's `[--jit-monitor-mode {error,warn}]` is no JIT failure)
    rule(
        FC.jit_error,
        r"^(?!.*\[--)(?:.*?)(?:ninja: build stopped|ninja build failed|Error building extension|"
        r"nvcc fatal|ptxas (fatal|error)|\bJIT\b.*(fail|error)|compil\w+ (failed|error).*(kernel|cuda|jit)|"
        r"CalledProcessError: Command '\[?'?ninja|NVCC compilation failed|NVCC version should be|"
        r"ptxas\b.*returned non-zero exit status|PTXASError)",
        20,
        "kernel JIT compilation failed",
    ),
    rule(
        FC.unsupported_arch,
        r"unsupported (gpu )?arch|not supported arch|arch\w* (is )?not supported|"
        r"no kernel image is available|\bsm_?120a?\b.*not (supported|in)|not in .*arch\w* (table|list)|"
        r"requires (compute capability|sm_?\d+)|No supported CUDA architectures found|"
        r"Bfloat16 is only supported on GPUs with compute capability|"
        r"GPUs with compute capability below [\d.]+ are not supported|"
        r"^(?!.*fall(ing)? ?back)(?:.*?)Unsupported compute capability",
        30,
        "GPU architecture not supported",
    ),
    # a Triton kernel whose tiles need more shared memory than this GPU has (T4, consumer Ada/Blackwell)
    rule(FC.unsupported_arch, r"out of resources?: shared memory", 30, "kernel does not fit this GPU's shared memory"),
    # a capture that fails for lack of memory is an OOM, not an incompatibility
    rule(
        FC.cuda_graph_incompatible,
        r"^(?!.*out of memory)(?:.*?)(?:operation not permitted when stream is capturing|"
        r"cudaErrorStreamCapture\w*|CUDA graph.*captur\w*.*(fail|error|invalid)|captur\w* .*CUDA graph.*(fail|error)|"
        r"stream capture (is )?(invalidated|unsupported)|during CUDA graph capture|cudaStreamCaptureStatusActive)",
        40,
        "incompatible with CUDA graph capture",
    ),
    rule(
        FC.kernel_fault,
        r"an illegal memory access was encountered|cudaErrorIllegal(Address|Instruction)|"
        r"an illegal instruction was encountered|misaligned address|unspecified launch failure|"
        r"Memory access fault by GPU node|HSA_STATUS_ERROR_MEMORY_(FAULT|APERTURE_VIOLATION)",
        45,
        "a GPU kernel faulted",
    ),
    rule(
        FC.nccl_error,
        r"NCCL error|ncclInternalError|ncclUnhandledCudaError|ncclSystemError|"
        r"ncclInvalidUsage|ncclRemoteError|ProcessGroupNCCL.*(timeout|Watchdog caught)",
        50,
        "NCCL failure",
    ),
    rule(
        FC.oom,
        r"CUDA out of memory|OutOfMemoryError|CUDA error: out of memory|cudaErrorMemoryAllocation|"
        r"Not enough memory\. Please try to increase --mem-fraction-static|"
        r"KV cache is needed, which is larger than the available KV cache memory|"
        r"No available memory for the cache blocks|insufficient (gpu )?memory for (the )?KV cache|"
        r"larger than the maximum number of tokens that can be stored in KV cache",
        60,
        "out of GPU memory",
    ),
    rule(
        FC.assertion,
        r"\bAssertionError\b|Assertion `.*' failed|assert(ion)? failed|device-side assert triggered",
        60,
        "assertion failed",
    ),
    # torch.compile: weaker than any root cause the compile hit (OOM while autotuning, an assertion)
    rule(
        FC.jit_error,
        r"BackendCompilerFailed|InductorError|torch/_inductor/(compile_fx|graph|codecache|scheduler)\.py",
        62,
        "torch.compile (Inductor) failed",
        consequence=True,
    ),
    rule(
        FC.exited,
        r"Tokenizer class \w+ does not exist or is not currently imported",
        65,
        "tokenizer could not be loaded",
    ),
    # vLLM's and SGLang's model registries: "Model architectures [...] are not supported for now."
    rule(
        FC.exited,
        r"Model architectures? \[.*\] (are|is) not supported",
        65,
        "model architecture not supported by this engine",
    ),
    # vLLM's workers stopped answering the engine: a warning that repeats while they hang
    rule(
        FC.hang, r"No available shared memory broadcast block found", 68, "workers stopped responding", consequence=True
    ),
    # vLLM's MultiprocExecutor.collective_rpc: a worker did not answer in time
    rule(FC.hang, r"RPC call to \w+ timed out", 68, "workers stopped responding", consequence=True),
    # SGLang's scheduler watchdog ("Watchdog timeout (self.watchdog_timeout=300)", since 0.5:
    # "Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=False)")
    rule(FC.hang, r"watchdog timeout \(self\.watchdog_timeout=", 68, "scheduler made no progress", consequence=True),
    rule(
        FC.engine_dead,
        r"EngineDeadError",
        70,
        "vLLM engine died",
        unless_after=r"stopping engine client|\[shutdown\] API server",
        consequence=True,
    ),  # a requested shutdown
    # vLLM's MultiprocExecutor monitor: a worker process exited (killed, segfault) mid-run
    rule(FC.engine_dead, r"Worker proc \S+ died unexpectedly", 70, "a vLLM worker process died", consequence=True),
)


@dataclass(frozen=True)
class _Hit:
    rule: TriageRule
    index: int


def _hits(lines: Sequence[str], rules: Iterable[TriageRule]) -> list[_Hit]:
    hits: list[_Hit] = []
    for r in rules:
        for i, line in enumerate(lines):
            if r.pattern.search(line):
                if r.unless_after and any(r.unless_after.search(prev) for prev in lines[:i]):
                    continue
                hits.append(_Hit(r, i))
    return hits


def _decider(hits: list[_Hit]) -> _Hit:
    """The strongest band's first root cause; with none, the first consequence."""
    roots = [h for h in hits if not h.rule.consequence]
    if not roots:
        return min(hits, key=lambda h: (h.index, h.rule.band))
    best_band = min(h.rule.band for h in roots)
    return min((h for h in roots if h.rule.band == best_band), key=lambda h: h.index)


def _context(lines: Sequence[str], index: int) -> list[int]:
    return list(range(max(0, index - CONTEXT_LINES), min(len(lines), index + CONTEXT_LINES + 1)))


def _evidence(lines: Sequence[str], indices: Iterable[int]) -> list[str]:
    return [lines[i].rstrip() for i in sorted(set(indices))]


def _exit_words(exit_code: int | None) -> str:
    if exit_code is None:
        return "no exit status"
    if exit_code < 0 or exit_code > 128:
        sig = -exit_code if exit_code < 0 else exit_code - 128
        hint = " (SIGKILL: host OOM killer or an external kill?)" if sig == 9 else ""
        return f"killed by signal {sig}{hint}"
    return f"exit status {exit_code}"


def classify(
    exit_code: int | None, log_lines: list[str], *, phase: Phase = "start", extra_rules: Iterable[TriageRule] = ()
) -> Failure:
    """The failure class, a one-line summary and the log lines that decided it."""
    lines = [ln.rstrip("\n") for ln in log_lines]
    hits = _hits(lines, [*RULES, *extra_rules])
    if not hits:
        tail = [ln for ln in lines if ln.strip()][-FALLBACK_TAIL:]
        return Failure(
            failure_class=FailureClass.exited,
            summary=f"server ended: {_exit_words(exit_code)}; {NO_SIGNATURE}",
            evidence=tail,
            exit_code=exit_code,
            phase=phase,
            matched=False,
        )

    decider = _decider(hits)
    cls = decider.rule.failure_class
    # the first line of every other class seen, so a reader sees what followed
    others: dict[FailureClass, _Hit] = {}
    for h in sorted(hits, key=lambda h: h.index):
        if h.rule.failure_class != cls:
            others.setdefault(h.rule.failure_class, h)
    own = sorted({j for h in hits if h.rule.failure_class == cls for j in _context(lines, h.index)})
    indices = own[: max(1, MAX_EVIDENCE_LINES - len(others))] + [h.index for h in others.values()]

    summary = f"{decider.rule.label}: {lines[decider.index].strip()[:200]}"
    if others:
        order = sorted(others.values(), key=lambda h: h.index)
        summary += "; also seen: " + ", ".join(
            f"{h.rule.failure_class.value} ({'after' if h.index > decider.index else 'before'} it)" for h in order
        )
    summary += f" [{_exit_words(exit_code)}]"
    return Failure(
        failure_class=cls, summary=summary, evidence=_evidence(lines, indices), exit_code=exit_code, phase=phase
    )


def is_unmatched(failure: Failure) -> bool:
    """True when no rule matched: `exited` with the last lines, an unknown, not a class."""
    return not failure.matched or (failure.failure_class == FailureClass.exited and NO_SIGNATURE in failure.summary)
